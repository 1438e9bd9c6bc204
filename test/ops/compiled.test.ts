import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMigratedDatabase } from '../helpers/app.ts';
import { onPostgres } from '../helpers/db.ts';
import { request } from '../helpers/http.ts';
import { listeningUrl, ROOT } from '../helpers/processes.ts';

/**
 * A module hook for the compiled service: resolving PGlite, tsx or esbuild fails the process,
 * so a start on PostgreSQL proves none of them is loaded.
 */
const FORBID = `data:text/javascript,${encodeURIComponent(`
import { register } from 'node:module';
register('data:text/javascript,' + encodeURIComponent(\`
export async function resolve(specifier, context, next) {
  if (/^(@electric-sql\\\\/pglite|tsx|esbuild)(\\\\/|$)/.test(specifier)) throw new Error('forbidden module loaded: ' + specifier);
  return next(specifier, context);
}\`));
`)}`;

describe('the compiled service', () => {
  // Compiled next to src/ (views, public and migrations are found relative to it) under a
  // name of its own, so a developer's dist/ is left alone.
  const outDir = path.join(ROOT, `.dist-test-${randomBytes(4).toString('hex')}`);
  beforeAll(async () => {
    await new Promise<void>((resolve, reject) => {
      execFile(process.execPath, [path.join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json', '--outDir', outDir], { cwd: ROOT }, (err, stdout) =>
        err ? reject(new Error(`npm run build failed: ${stdout}`)) : resolve());
    });
  }, 240_000);
  afterAll(() => rm(outDir, { recursive: true, force: true }));

  /** Starts `<outDir>/server.js` with plain node and resolves once it listens (or exits). */
  async function start(env: Record<string, string>, nodeArgs: string[] = []): Promise<{ child: ChildProcess; url: string; output: () => string }> {
    const child = spawn(process.execPath, [...nodeArgs, path.join(outDir, 'server.js')], {
      cwd: await mkdtemp(path.join(os.tmpdir(), 'auth-compiled-')),
      env: { ...process.env, NODE_OPTIONS: '', PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', BCRYPT_COST: '4', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    return { child, ...(await listeningUrl(child)) };
  }

  async function stop(child: ChildProcess) {
    if (child.exitCode !== null) return;
    child.kill('SIGTERM');
    await once(child, 'exit');
  }

  it('compiles every source file to JavaScript', () => {
    for (const file of ['server.js', 'cli/main.js', 'db/migrate-cli.js', 'webhooks/dispatcher-worker.js']) {
      expect(existsSync(path.join(outDir, file)), file).toBe(true);
    }
  });

  it.skipIf(!onPostgres && 'PostgreSQL only')('starts with plain node on PostgreSQL without loading PGlite, tsx or esbuild, and is ready', async () => {
    const t = await createMigratedDatabase();
    const s = await start({ DATABASE_URL: t.url! }, ['--import', FORBID]);
    try {
      const ready = await request(`${s.url}/readyz`);
      expect(ready.status, ready.text).toBe(200);
      expect(ready.body.database).toBe('postgres');
      expect((await request(`${s.url}/login`, { headers: { accept: 'text/html' } })).status, 'views found next to the compiled output').toBe(200);
      expect(s.output()).not.toMatch(/forbidden module|dispatcher thread/);
    } finally {
      await stop(s.child);
      await t.drop();
    }
  });

  it.skipIf(onPostgres && 'embedded only')('starts with plain node on the embedded database and is ready', async () => {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'auth-compiled-data-'));
    const s = await start({ DATABASE_URL: '', DATA_DIR: dataDir, NODE_ENV: 'test' }, ['--import', FORBID.replace('pglite', 'no-such-module')]);
    try {
      const ready = await request(`${s.url}/readyz`);
      expect(ready.status, ready.text).toBe(200);
      expect(ready.body.database).toBe('embedded');
      expect(s.output()).not.toMatch(/forbidden module/);
    } finally {
      await stop(s.child);
    }
  });
});
