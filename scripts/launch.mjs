#!/usr/bin/env node
// Runs one entry point of the service — `server`, `cli/main` (npm run admin) or
// `db/migrate-cli` (npm run migrate) — as `node scripts/launch.mjs <entry> [args...]`:
//
// - the compiled JavaScript, dist/<entry>.js, with plain node, when NODE_ENV=production
//   (there it is required: `npm run build` first; the Docker image runs it directly), or when
//   dist/ was built after the last change under src/;
// - otherwise the TypeScript sources through tsx, so `npm ci && npm start` works on a fresh
//   clone with no build step.
//
// NODE_ENV is taken from the environment, else from the .env file the service itself will read.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseEnv } from 'node:util';

const root = path.resolve(fileURLToPath(new URL('..', import.meta.url)));
const entry = process.argv[2];
if (!entry || !/^[\w/-]+$/.test(entry)) {
  console.error('usage: node scripts/launch.mjs <server|cli/main|db/migrate-cli> [args...]');
  process.exit(2);
}
process.argv.splice(2, 1); // the entry sees only its own arguments

function nodeEnv() {
  if (process.env.NODE_ENV?.trim()) return process.env.NODE_ENV.trim();
  const file = path.resolve(process.env.ENV_FILE?.trim() || '.env');
  try {
    return parseEnv(readFileSync(file, 'utf8')).NODE_ENV?.trim() || 'development';
  } catch {
    return 'development';
  }
}

/** The newest modification time of any file under `dir`. */
function newestMtime(dir) {
  let newest = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    newest = Math.max(newest, e.isDirectory() ? newestMtime(p) : statSync(p).mtimeMs);
  }
  return newest;
}

const compiled = path.join(root, 'dist', `${entry}.js`);
const production = nodeEnv() === 'production';
const built = existsSync(compiled);
if (production && !built) {
  console.error(`${path.relative(root, compiled)} is missing: run \`npm run build\` before starting with NODE_ENV=production`);
  process.exit(1);
}
const sources = path.join(root, 'src');
const fresh = built && (!existsSync(sources) || statSync(compiled).mtimeMs >= newestMtime(sources));
if (production || fresh) {
  if (production && !fresh) console.error(`warning: ${path.relative(root, compiled)} is older than src/: run \`npm run build\``);
  await import(pathToFileURL(compiled).href);
} else {
  const { register } = await import('tsx/esm/api');
  register();
  await import(pathToFileURL(path.join(root, 'src', `${entry}.ts`)).href);
}
