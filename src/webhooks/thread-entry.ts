import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, renameSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { Logger } from 'pino';

/** Running from the TypeScript sources (development, tests), not from the compiled dist/. */
const FROM_SOURCES = import.meta.url.endsWith('.ts');
/** Where bundles are kept: under node_modules, so the bundle's package imports resolve as the sources' do. */
const CACHE_DIR = fileURLToPath(new URL('../../node_modules/.cache/auth-service/', import.meta.url));
/** Bundles of earlier sources are removed once they are this old (a process still running them has long started its thread). */
const STALE_MS = 24 * 3600_000;

let bundled: URL | undefined;

/**
 * The module a webhook dispatcher thread starts from.
 *
 * Compiled (dist/, production): dispatcher-worker.js itself.
 *
 * From the TypeScript sources, a thread cannot load .ts files by itself: on Node 20 the
 * parent's tsx hooks do not reach a worker's entry. Registering tsx in each thread
 * (dispatcher-worker-entry.mjs) costs a loader thread of its own and a round trip to it for
 * every import, about 170 ms of CPU per thread start and more while it runs; the tests start
 * some fifty instances on PostgreSQL, each with its thread. So the thread's module graph is
 * bundled once per process with esbuild (the compiler tsx itself uses), packages left as
 * imports, into node_modules/.cache/auth-service/ under a name holding a hash of the bundle,
 * written atomically, and every thread of the process starts from that file. Should that
 * fail (esbuild missing, a read-only node_modules), threads register tsx as before.
 */
export function dispatcherThreadEntry(logger: Pick<Logger, 'warn'>): URL {
  if (!FROM_SOURCES) return new URL('./dispatcher-worker.js', import.meta.url);
  if (bundled) return bundled;
  try {
    bundled = bundleThread();
  } catch (err) {
    logger.warn({ err }, 'could not bundle the webhook dispatcher thread; it registers tsx instead');
    bundled = new URL('./dispatcher-worker-entry.mjs', import.meta.url);
  }
  return bundled;
}

function bundleThread(): URL {
  // loaded here, on the sources' path only: the compiled service never needs esbuild
  const esbuild = createRequire(import.meta.url)('esbuild') as typeof import('esbuild');
  const result = esbuild.buildSync({
    entryPoints: [fileURLToPath(new URL('./dispatcher-worker.ts', import.meta.url))],
    bundle: true,
    packages: 'external',
    platform: 'node',
    format: 'esm',
    target: 'node20',
    sourcemap: 'inline', // stack traces name the .ts files when source maps are on (tsx turns them on)
    write: false,
    logLevel: 'silent',
  });
  const code = result.outputFiles[0].contents;
  const name = `dispatcher-worker-${createHash('sha256').update(code).digest('hex').slice(0, 16)}.mjs`;
  const file = path.join(CACHE_DIR, name);
  if (!existsSync(file)) {
    mkdirSync(CACHE_DIR, { recursive: true });
    const partial = `${file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
    writeFileSync(partial, code);
    renameSync(partial, file); // another process writing the same bundle writes the same bytes
    removeStale(name);
  }
  return pathToFileURL(file);
}

function removeStale(current: string): void {
  const now = Date.now();
  for (const entry of readdirSync(CACHE_DIR)) {
    if (entry === current || !entry.startsWith('dispatcher-worker-')) continue;
    const file = path.join(CACHE_DIR, entry);
    try {
      if (now - statSync(file).mtimeMs > STALE_MS) unlinkSync(file);
    } catch {
      // gone already, or not ours to remove: it stays
    }
  }
}
