import { readdir, readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { ConfigError, loadConfig } from '../config.ts';
import { EnvFileError, loadEnvFile } from '../config/env-file.ts';
import type { CliIo } from '../cli/run.ts';
import { migrate } from '../db/migrate.ts';
import { describeDatabase, openDatabase } from '../db/open.ts';
import { applySeeds, type SeedFile, SeedError, type SeedResult, SeedTransactionEndedError } from './apply.ts';

export const SEED_USAGE = `Usage: npm run seed [-- FILE...] [--json]

  With no FILE, applies every seeds/*.sql in name order; otherwise the files named, in that
  order. All in one transaction: on any error nothing is applied.`;

/**
 * `npm run seed` as a function: reads the seed files, opens the configured database (as the
 * admin command line does: PostgreSQL, or the embedded one through the running service's
 * socket, or directly when the service is stopped), migrates it and applies the files in one
 * transaction. Returns the exit status; the error names the file and the refused value.
 */
export async function runSeed(argv: string[], io: CliIo & { cwd?: string }): Promise<number> {
  try {
    const { values, positionals } = parseArgs({
      args: argv,
      allowPositionals: true,
      strict: true,
      options: { json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } },
    });
    const json = values.json === true;
    if (values.help) {
      io.stdout(`${SEED_USAGE}\n`);
      return 0;
    }
    const cwd = io.cwd ?? process.cwd();
    const files = await readSeedFiles(cwd, positionals);
    if (files.length === 0) {
      io.stdout(json ? `${JSON.stringify(emptyResult(), null, 2)}\n` : 'No seed files: seeds/ holds no *.sql file. Nothing applied.\n');
      return 0;
    }
    loadEnvFile(io.env, io.cwd); // the same .env as the service and the admin command line
    const config = loadConfig(io.env);
    // an admin must see which database is about to change before it does
    if (!io.db) io.stderr(`seed: using ${describeDatabase(config)}\n`);
    const db = io.db ?? (await openDatabase(config, { serve: false }));
    try {
      await migrate(db);
      const result = await applySeeds(db, files, { user: safeUsername() }, { production: config.NODE_ENV === 'production' });
      io.stdout(json ? `${JSON.stringify(result, null, 2)}\n` : `${summary(result)}\n`);
      return 0;
    } finally {
      if (!io.db) await db.close();
    }
  } catch (err) {
    if (err instanceof SeedError) {
      io.stderr(`seed: ${err.message}\n${err instanceof SeedTransactionEndedError ? '' : 'Nothing was applied.\n'}`);
      return 1;
    }
    if (err instanceof ConfigError || err instanceof EnvFileError) {
      io.stderr(`${err.message}\n`);
      return 1;
    }
    const usage = (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS');
    io.stderr(usage ? `${(err as Error).message}\n\n${SEED_USAGE}\n` : `seed: ${(err as Error).message}\n`);
    return usage ? 2 : 1;
  }
}

/** The named files (relative to `cwd`), or every seeds/*.sql in name order. */
async function readSeedFiles(cwd: string, named: string[]): Promise<SeedFile[]> {
  let names = named;
  if (names.length === 0) {
    const entries = await readdir(path.join(cwd, 'seeds')).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return [];
      throw err;
    });
    // only *.sql: an example such as seeds/example.sql.sample is never applied by default
    names = entries.filter((f) => f.endsWith('.sql')).sort().map((f) => path.join('seeds', f));
  }
  const files: SeedFile[] = [];
  for (const name of names) {
    const sql = await readFile(path.resolve(cwd, name), 'utf8').catch((err: NodeJS.ErrnoException) => {
      throw new SeedError(name, err.code === 'ENOENT' ? 'no such file' : err.message);
    });
    files.push({ name, sql });
  }
  return files;
}

function emptyResult(): SeedResult {
  return { files: [], created: [], updated: [], deleted: [], unchanged: 0 };
}

function summary(r: SeedResult): string {
  const list = (ids: string[]) => (ids.length ? ` (${ids.join(', ')})` : '');
  return [
    `Applied ${r.files.join(', ')} in one transaction:`,
    `  created ${r.created.length}${list(r.created)}, updated ${r.updated.length}${list(r.updated)}, deleted ${r.deleted.length}${list(r.deleted)}, unchanged ${r.unchanged}`,
  ].join('\n');
}

/** The operating-system user running the seed, for the audit log (none when unknown). */
function safeUsername(): string | undefined {
  try {
    return os.userInfo().username;
  } catch {
    return undefined;
  }
}
