import { existsSync } from 'node:fs';
import { parseArgs } from 'node:util';
import pino from 'pino';
import { ConfigError, loadConfig } from '../config.ts';
import { EnvFileError, loadEnvFile } from '../config/env-file.ts';
import type { Db } from '../db/db.ts';
import { migrate, pendingMigrations } from '../db/migrate.ts';
import { describeDatabase, embeddedPaths, openDatabase } from '../db/open.ts';
import { createServices } from '../deps.ts';
import { AppError } from '../http/errors.ts';
import { loadSigningKeys } from '../sso/keys.ts';
import { offlineCommand, readOnlyCommand, runCommand } from './commands.ts';
import { USAGE } from './usage.ts';

/** Where the command line writes, and what it reads its configuration from. */
export interface CliIo {
  stdout(text: string): void;
  stderr(text: string): void;
  /** The environment (configuration keys); process.env for the real command. */
  env: Record<string, string | undefined>;
  /** An open database to use instead of opening the configured one (tests in-process). */
  db?: Db;
  /** Where `.env` is looked for (default: the working directory). */
  cwd?: string;
}

const OPTIONS = {
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
  name: { type: 'string' },
  'callback-url': { type: 'string' },
  'initiate-login-uri': { type: 'string' },
  'allow-ip': { type: 'string', multiple: true },
  'allow-everything': { type: 'boolean' },
  'redirect-uri': { type: 'string', multiple: true },
  'post-logout-redirect-uri': { type: 'string', multiple: true },
  'backchannel-logout-uri': { type: 'string' },
  public: { type: 'boolean' },
  none: { type: 'boolean' },
  id: { type: 'string' },
  username: { type: 'string' },
  email: { type: 'string' },
  password: { type: 'string' },
  role: { type: 'string' },
  'full-name': { type: 'string' },
  inactive: { type: 'boolean' },
  'must-change': { type: 'boolean' },
  'base-url': { type: 'string' },
  'dry-run': { type: 'boolean' },
  'grace-seconds': { type: 'string' },
  status: { type: 'string' },
  client: { type: 'string' },
  active: { type: 'string' },
  'allow-group': { type: 'string', multiple: true },
  'allow-role': { type: 'string', multiple: true },
  'open-to-all': { type: 'boolean' },
  listed: { type: 'string' },
} as const;

/**
 * The admin command line as a function: parses `argv`, opens the configured database
 * (PostgreSQL, or the embedded one — through the running service's socket when it runs,
 * directly when it does not), runs one command and returns the exit status. With --json,
 * stdout carries one JSON document and nothing else; errors go to stderr.
 */
export async function runAdmin(argv: string[], io: CliIo): Promise<number> {
  try {
    return await run(argv, io);
  } catch (err) {
    if (err instanceof AppError || err instanceof ConfigError || err instanceof EnvFileError) {
      // the panel and the API confirm with a box or a field; here it is an option
      const hint = err instanceof AppError && err.code === 'allow_everything_unconfirmed' ? ' (pass --allow-everything)' : '';
      io.stderr(`${err.message}${hint}\n`);
      return err instanceof AppError && err.code === 'usage' ? 2 : 1;
    }
    // an unknown option or a missing value is a usage error like any other: 2, as npm run seed
    const parse = (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS') === true;
    io.stderr(`${parse ? `${(err as Error).message}\n\n${USAGE}` : `admin: ${(err as Error).message}`}\n`);
    return parse ? 2 : 1;
  }
}

async function run(argv: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseArgs({ args: argv, allowPositionals: true, strict: true, options: OPTIONS });
  if (values.help || positionals.length === 0) {
    io.stdout(`${USAGE}\n`);
    return positionals.length === 0 && !values.help ? 2 : 0;
  }
  loadEnvFile(io.env, io.cwd); // the same .env as the service, the real environment winning
  const offline = offlineCommand({ words: positionals, options: values });
  if (offline) {
    io.stdout(values.json ? `${JSON.stringify(offline.json, null, 2)}\n` : `${offline.text}\n`);
    return 0;
  }
  const config = loadConfig(io.env);
  // Say which database this is: a shell without DATABASE_URL would otherwise write silently
  // to the embedded one while the service runs on PostgreSQL.
  if (!io.db) io.stderr(`admin: using ${describeDatabase(config)}\n`);
  const args = { words: positionals, options: values };
  // a read-only command creates nothing, an embedded database in the wrong directory included
  const embedded = embeddedPaths(config.DATA_DIR);
  if (!io.db && readOnlyCommand(args) && !config.DATABASE_URL && !existsSync(embedded.pgdata)) {
    throw new AppError(409, 'no_database', `admin: there is no embedded database in ${embedded.dir}. `
      + 'Check that it is the right directory (DATA_DIR) or set DATABASE_URL; this command only reads and changes nothing.');
  }
  const db = io.db ?? (await openDatabase(config, { serve: false }));
  try {
    if (readOnlyCommand(args)) await refuseUnmigrated(db);
    else await migrate(db); // as the service does at start: a writing command brings the schema up to date first
    const services = createServices({ config, db, logger: pino({ level: 'silent' }), signingKeys: await loadSigningKeys(config) });
    const result = await runCommand(services, args);
    io.stdout(values.json ? `${JSON.stringify(result.json, null, 2)}\n` : `${result.text}\n`);
    if (result.notice) io.stderr(`${result.notice}\n`);
    return 0;
  } finally {
    if (!io.db) await db.close();
  }
}

/** A read-only command runs only on a database with every migration applied: exit 1 otherwise, nothing written. */
async function refuseUnmigrated(db: Db): Promise<void> {
  const pending = await pendingMigrations(db);
  if (pending.length === 0) return;
  const what = pending.length === 1 ? `migration ${pending[0]} is` : `${pending.length} migrations (from ${pending[0]}) are`;
  throw new AppError(409, 'not_migrated', `admin: ${what} not applied to this database. `
    + 'Check that it is the right one (DATABASE_URL), then run `npm run migrate` or start the service; this command only reads and changes nothing.');
}
