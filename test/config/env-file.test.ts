import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { mkdtemp, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { runAdmin } from '../../src/cli/run.ts';
import { EnvFileError, loadEnvFile } from '../../src/config/env-file.ts';
import { createMigratedDatabase, TEST_ENV } from '../helpers/app.ts';
import { onPostgres } from '../helpers/db.ts';
import { freePort, request } from '../helpers/http.ts';
import { ROOT } from '../helpers/processes.ts';

const CONFIG_KEYS = ['NODE_ENV', 'PORT', 'HOST', 'DATABASE_URL', 'DATA_DIR', 'JWT_SECRET', 'SESSION_SECRET', 'BCRYPT_COST', 'LOG_LEVEL', 'ENV_FILE'];

/** A working directory holding `.env` with these lines. */
async function dirWithEnv(lines: string[]): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'auth-envfile-'));
  await writeFile(path.join(dir, '.env'), `# written by the test\n${lines.join('\n')}\n`);
  return dir;
}

/** This process's environment without any configuration key: only `.env` may set them. */
function bareEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const key of CONFIG_KEYS) delete env[key];
  return env;
}

/** Starts src/server.ts in `cwd` and resolves with its first output that settles the start. */
function startIn(cwd: string): { child: ChildProcess; started: Promise<{ url?: string; output: string; code?: number | null }> } {
  const tsx = pathToFileURL(path.join(ROOT, 'node_modules/tsx/dist/loader.mjs')).href;
  const child = spawn(process.execPath, ['--import', tsx, path.join(ROOT, 'src/server.ts')], { cwd, env: bareEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const started = new Promise<{ url?: string; output: string; code?: number | null }>((resolve) => {
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const m = /"url":"(http:\/\/[^"]+)"[^\n]*auth service listening/.exec(output);
      if (m) resolve({ url: m[1], output });
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => resolve({ output, code }));
  });
  return { child, started };
}

async function stop(child: ChildProcess) {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  await once(child, 'exit');
}

describe('loadEnvFile', () => {
  it('sets what the real environment does not, and an empty real value counts as unset', async () => {
    const dir = await dirWithEnv(['PORT=4123', 'HOST=127.0.0.9', 'DATA_DIR=./from-file', 'LOG_LEVEL="warn"']);
    const env: Record<string, string | undefined> = { HOST: '127.0.0.1', DATA_DIR: '' };
    const result = loadEnvFile(env, dir);
    expect(result.path).toBe(path.join(dir, '.env'));
    expect(env).toStrictEqual({ HOST: '127.0.0.1', PORT: '4123', DATA_DIR: './from-file', LOG_LEVEL: 'warn' });
    expect(result.applied.sort()).toStrictEqual(['DATA_DIR', 'LOG_LEVEL', 'PORT']);
  });

  it('is quiet without a .env, and refuses an ENV_FILE that cannot be read', async () => {
    const empty = await mkdtemp(path.join(os.tmpdir(), 'auth-envfile-'));
    expect(loadEnvFile({}, empty)).toStrictEqual({ path: null, applied: [] });
    expect(() => loadEnvFile({ ENV_FILE: 'missing.env' }, empty)).toThrow(EnvFileError);
  });
});

describe('.env at start', () => {
  it('is read by the service: it listens on the PORT and HOST and keeps its data in the DATA_DIR the file names', async () => {
    const t = onPostgres ? await createMigratedDatabase() : undefined;
    // A port found free can be taken (by another test's connection or server) before the
    // service binds it: then it exits with EADDRINUSE, and the test tries another port.
    let port = 0;
    let dir = '';
    let start: ReturnType<typeof startIn> | undefined;
    let result: Awaited<ReturnType<typeof startIn>['started']> | undefined;
    for (let attempt = 0; attempt < 5 && !result?.url; attempt++) {
      port = await freePort();
      dir = await dirWithEnv([`PORT=${port}`, 'HOST=127.0.0.1', 'DATA_DIR=./service-data', `DATABASE_URL=${t?.url ?? ''}`, 'LOG_LEVEL=info', 'BCRYPT_COST=4']);
      start = startIn(dir);
      result = await start.started;
      if (!result.url && !/EADDRINUSE/.test(result.output)) break;
    }
    const { child } = start!;
    try {
      expect(result!.url, result!.output).toBe(`http://127.0.0.1:${port}`);
      expect((await request(`${result!.url}/readyz`)).status).toBe(200);
      expect(existsSync(path.join(dir, 'service-data')), 'DATA_DIR from .env, relative to the working directory').toBe(true);
      expect(result!.output).toMatch(/"msg":"environment file read"/);
    } finally {
      await stop(child);
      await t?.drop();
    }
  });

  it('refuses weak production secrets given in .env, with one line naming the key', async () => {
    const dir = await dirWithEnv(['NODE_ENV=production', `JWT_SECRET=${'a'.repeat(40)}`, `SESSION_SECRET=${TEST_ENV.SESSION_SECRET}`, 'DATA_DIR=./data']);
    const { child, started } = startIn(dir);
    try {
      const result = await started;
      expect(result.code, result.output).toBe(1);
      const lines = result.output.split('\n').filter((l) => l.includes('Invalid configuration'));
      expect(lines).toStrictEqual([`Invalid configuration: JWT_SECRET: too weak for production (is one character repeated); generate one with: openssl rand -base64 48`]);
    } finally {
      await stop(child);
    }
  });

  it('is read by the admin command line, which says on stderr which database it uses', async () => {
    const t = onPostgres ? await createMigratedDatabase() : undefined;
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'auth-envfile-data-'));
    // absolute: in-process, a relative DATA_DIR would be relative to the test runner's directory
    const dir = await dirWithEnv([`DATABASE_URL=${t?.url ?? ''}`, `DATA_DIR=${dataDir}`, 'BCRYPT_COST=4']);
    try {
      const run = async (args: string[]) => {
        let stdout = '';
        let stderr = '';
        const code = await runAdmin(args, { stdout: (s) => void (stdout += s), stderr: (s) => void (stderr += s), env: {}, cwd: dir });
        return { code, stdout, stderr };
      };
      const created = await run(['client', 'create', '--name', 'From env', '--callback-url', 'https://shop.example/cb', '--allow-ip', '10.0.0.1', '--json']);
      expect(created.code, created.stderr).toBe(0);
      const clientId = JSON.parse(created.stdout).client_id as string;
      if (t) {
        const db = new URL(t.url!).pathname.slice(1);
        expect(created.stderr).toBe(`admin: using PostgreSQL database ${db} on 127.0.0.1:5432 as postgres\n`);
        const rows = await t.db.query('SELECT 1 FROM clients WHERE client_id = $1', [clientId]);
        expect(rows.rowCount, 'the client landed in the database .env names').toBe(1);
      } else {
        expect(created.stderr).toBe(`admin: using the embedded database in ${dataDir}\n`);
        const listed = await run(['client', 'list', '--json']);
        expect(JSON.parse(listed.stdout).map((c: { client_id: string }) => c.client_id)).toContain(clientId);
      }
    } finally {
      await t?.drop();
    }
  });
});
