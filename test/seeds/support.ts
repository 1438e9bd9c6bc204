import { mkdir, mkdtemp, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { hashClientSecret } from '../../src/clients/credentials.ts';
import { runSeed } from '../../src/seeds/run.ts';
import { TEST_ENV, type TestApp } from '../helpers/app.ts';
import { captured, type CliResult } from '../helpers/cli.ts';

/** One client row of a seed file, in the documented columns. */
export interface SeedClient {
  id: string;
  name: string;
  callback: string;
  ips: string[];
  secret: string;
  active?: boolean;
}

const quote = (s: string) => `'${s.replace(/'/g, "''")}'`;

/** A seed file as an administrator writes it: the documented upsert with the documented columns. */
export function seedSql(clients: SeedClient[]): string {
  const rows = clients.map((c) =>
    `  (${quote(c.id)}, ${quote(c.name)}, ${quote(c.callback)}, ARRAY[${c.ips.map(quote).join(', ')}]::text[], ${c.active ?? true}, ${quote(hashClientSecret(c.secret))})`);
  return `-- clients of this environment
INSERT INTO clients (client_id, client_name, callback_url, allowed_ips, active, secret_hash) VALUES
${rows.join(',\n')}
ON CONFLICT (client_id) DO UPDATE SET
  client_name = EXCLUDED.client_name,
  callback_url = EXCLUDED.callback_url,
  allowed_ips = EXCLUDED.allowed_ips,
  active = EXCLUDED.active,
  secret_hash = EXCLUDED.secret_hash;
`;
}

/** A fresh project folder with the given files (paths relative to it, e.g. seeds/a.sql). */
export async function projectWith(files: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'auth-seed-'));
  for (const [name, text] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(dir, name)), { recursive: true });
    await writeFile(path.join(dir, name), text);
  }
  return dir;
}

/**
 * Runs `npm run seed -- ARGS` in-process in the project folder `cwd`: on the app's database
 * when `app.db` is given, else on the one `env` configures (opened as the command opens it).
 */
export async function seed(
  target: { db?: TestApp['db']; config: Pick<TestApp['config'], 'DATA_DIR'> },
  cwd: string,
  args: string[] = [],
  env: Record<string, string> = {},
): Promise<CliResult> {
  return captured(runSeed, args, { env: { ...TEST_ENV, DATA_DIR: target.config.DATA_DIR, ...env }, db: target.db, cwd });
}
