import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/db/open.ts';
import { TEST_ENV } from '../helpers/app.ts';
import { onPostgres } from '../helpers/db.ts';
import { listeningUrl, POOL_PRIORITY, ROOT } from '../helpers/processes.ts';

const demoRows = async (dataDir: string) => {
  const db = await openDatabase({ DATA_DIR: dataDir, DATABASE_URL: undefined }, { serve: false });
  try {
    return {
      client: (await db.query("SELECT 1 FROM clients WHERE client_id = 'demo'")).rowCount,
      user: (await db.query("SELECT 1 FROM users WHERE username = 'demo'")).rowCount,
    };
  } finally {
    await db.close();
  }
};

/** The service as `npm start` runs it from source, on the embedded database in `dataDir`. */
const startService = (dataDir: string) => spawn(process.execPath, [POOL_PRIORITY, '--import', 'tsx', 'src/server.ts'], {
  cwd: ROOT, env: { ...process.env, ...TEST_ENV, BCRYPT_COST: '12', LOG_LEVEL: 'info', DATA_DIR: dataDir }, stdio: ['ignore', 'pipe', 'pipe'],
});

/**
 * The first start on the embedded database seeds a demo client and user after it listens. A
 * SIGTERM in that moment ended the process by the signal (its handlers came after the
 * seeding): no graceful stop, and a demo client without its user that no later start finished.
 */
describe.skipIf(onPostgres && 'embedded only')('a stop asked for as soon as the service listens', () => {
  it('is graceful (exit 0) and leaves the demo whole', async () => {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'auth-early-term-'));
    const child = startService(dataDir);
    const exited = once(child, 'exit');
    await listeningUrl(child);
    child.kill('SIGTERM');
    const [code, signal] = await exited;
    expect({ code, signal }).toStrictEqual({ code: 0, signal: null });
    expect(await demoRows(dataDir)).toStrictEqual({ client: 1, user: 1 });
  }, 120_000);

  it('a demo left half-made (its user, not yet its client) is finished by the next start', async () => {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'auth-half-demo-'));
    const first = startService(dataDir);
    let exited = once(first, 'exit');
    await listeningUrl(first);
    first.kill('SIGTERM');
    await exited;
    const db = await openDatabase({ DATA_DIR: dataDir, DATABASE_URL: undefined }, { serve: false });
    await db.query("DELETE FROM clients WHERE client_id = 'demo'"); // as a stop between the two leaves it
    await db.close();
    const again = startService(dataDir);
    exited = once(again, 'exit');
    let output = '';
    again.stdout.on('data', (c: Buffer) => (output += c.toString()));
    await listeningUrl(again);
    for (let i = 0; i < 100 && !output.includes('Demo ready'); i++) await new Promise((r) => setTimeout(r, 100));
    again.kill('SIGTERM');
    await exited;
    expect(output).toContain('Demo ready');
    expect(await demoRows(dataDir)).toStrictEqual({ client: 1, user: 1 });
  }, 120_000);
});
