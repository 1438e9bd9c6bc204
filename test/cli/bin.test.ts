import { spawn } from 'node:child_process';
import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { TEST_ENV } from '../helpers/app.ts';
import { createTestDatabase, onPostgres } from '../helpers/db.ts';
import { ROOT } from '../helpers/processes.ts';
import { runAdmin } from '../../src/cli/run.ts';

/** The installed command (package.json "bin"): a real process, its stdout read from a pipe. */
describe('auth-admin bin', () => {
  let drop: (() => Promise<void>) | undefined;
  afterAll(() => drop?.());

  it('prints exactly one JSON document on stdout for --json, so it can be piped into jq', async () => {
    const env: Record<string, string> = { ...TEST_ENV, DATA_DIR: await mkdtemp(path.join(os.tmpdir(), 'auth-bin-')) };
    if (onPostgres) {
      const database = await createTestDatabase();
      await database.db.close();
      drop = database.drop;
      env.DATABASE_URL = database.url!;
    }
    // on PostgreSQL a client to list; on the embedded database one opening of it is all this
    // test can afford (the child's), so the list is empty there
    if (onPostgres) {
      const created = await runAdmin(['client', 'create', '--name', 'Piped', '--callback-url', 'https://piped.example/cb', '--id', 'piped'], {
        stdout: () => {}, stderr: () => {}, env,
      });
      expect(created).toBe(0);
    }

    const child = spawn(process.execPath, ['bin/auth-admin.mjs', 'client', 'list', '--json'], {
      cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
    expect(code, stderr).toBe(0);
    const doc = JSON.parse(stdout);
    expect(doc.map((c: { client_id: string }) => c.client_id)).toStrictEqual(onPostgres ? ['piped'] : []);
  });
});
