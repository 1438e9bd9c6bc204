import os from 'node:os';
import { parseArgs } from 'node:util';
import { ConfigError, loadConfig } from '../config.ts';
import { EnvFileError, loadEnvFile } from '../config/env-file.ts';
import type { CliIo } from '../cli/run.ts';
import { migrate, pendingMigrations } from '../db/migrate.ts';
import { describeDatabase, openDatabase } from '../db/open.ts';
import { guardPolicy } from '../webhooks/address-guard.ts';
import { applySeeds, SeedError, type SeedResult, SeedTransactionEndedError } from './apply.ts';
import { readSeedFiles } from './files.ts';
import { appliedSummary, checkText, differences, planText } from './report.ts';

export const SEED_USAGE = `Usage: npm run seed [-- PATH...] [--plan | --check] [--prune] [--json]

  PATH: a seed file, or a folder of them (its *.sql in name order); with none, seeds/.
  All in one transaction: on any error nothing is applied (exit 1).
  --plan    run the files and roll everything back: prints what applying would create,
            change (each column, old -> new; secrets only "changed") and delete. Exit 0 when
            they would apply, 2 when they would be refused (the message an apply gives).
  --check   exit 1, listing the differences, when the database's clients or webhooks are not
            what the files say (changed elsewhere, or not in the files); 0 when they match.
  --prune   delete the clients and webhooks the files do not write (the files own them all).`;

/**
 * \`npm run seed\` as a function: reads the seed files, opens the configured database (as the
 * admin command line does: PostgreSQL, or the embedded one through the running service's
 * socket, or directly when the service is stopped), migrates it and applies the files in one
 * transaction; or plans or checks them, changing nothing. Returns the exit status; the error
 * names the file and the refused value.
 */
export async function runSeed(argv: string[], io: CliIo & { cwd?: string }): Promise<number> {
  let mode: 'apply' | 'plan' | 'check' = 'apply';
  try {
    const { values, positionals } = parseArgs({
      args: argv,
      allowPositionals: true,
      strict: true,
      options: {
        json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' }, plan: { type: 'boolean' }, check: { type: 'boolean' }, prune: { type: 'boolean' },
      },
    });
    const json = values.json === true;
    if (values.help) {
      io.stdout(`${SEED_USAGE}\n`);
      return 0;
    }
    if (values.plan && values.check) throw Object.assign(new Error('--plan and --check: choose one'), { code: 'ERR_PARSE_ARGS_CONFLICT' });
    mode = values.plan ? 'plan' : values.check ? 'check' : 'apply';
    const cwd = io.cwd ?? process.cwd();
    const files = await readSeedFiles(cwd, positionals);
    if (files.length === 0 && mode === 'apply') {
      io.stdout(json ? `${JSON.stringify(emptyResult(), null, 2)}\n` : 'No seed files: seeds/ holds no *.sql file. Nothing applied.\n');
      return 0;
    }
    loadEnvFile(io.env, io.cwd); // the same .env as the service and the admin command line
    const config = loadConfig(io.env);
    // an admin must see which database is about to change (or be read) before it is
    if (!io.db) io.stderr(`seed: using ${describeDatabase(config)}\n`);
    const db = io.db ?? (await openDatabase(config, { serve: false }));
    try {
      if (mode === 'apply') await migrate(db);
      else {
        // a plan and a check change nothing, migrations included
        const pending = await pendingMigrations(db);
        if (pending.length > 0) {
          io.stderr(`seed: the database has ${pending.length} migration(s) not applied (${pending[0]}…): start the service or run npm run migrate first; --${mode} changes nothing\n`);
          return 1;
        }
      }
      const result = await applySeeds(db, files, { user: safeUsername() }, {
        production: config.NODE_ENV === 'production', plan: mode !== 'apply', prune: values.prune === true, env: io.env, webhookPolicy: guardPolicy(config),
      });
      if (mode === 'check') {
        const d = differences(result);
        const drift = d.clients.length > 0 || d.webhooks.length > 0;
        io.stdout(json ? `${JSON.stringify({ files: result.files, matches: !drift, ...d }, null, 2)}\n` : `${checkText(result)}\n`);
        return drift ? 1 : 0;
      }
      const text = mode === 'plan' ? planText(result) : appliedSummary(result);
      io.stdout(json ? `${JSON.stringify(mode === 'plan' ? { ...result, applied: false } : result, null, 2)}\n` : `${text}\n`);
      return 0;
    } finally {
      if (!io.db) await db.close();
    }
  } catch (err) {
    if (err instanceof SeedError) {
      const ended = err instanceof SeedTransactionEndedError;
      io.stderr(`seed: ${err.message}\n${ended ? '' : mode === 'apply' ? 'Nothing was applied.\n' : 'The files would be refused; nothing was applied.\n'}`);
      return mode === 'apply' ? 1 : 2;
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

function emptyResult(): SeedResult {
  return { files: [], created: [], updated: [], deleted: [], unchanged: 0, clients: [], webhooks: [] };
}

/** The operating-system user running the seed, for the audit log (none when unknown). */
function safeUsername(): string | undefined {
  try {
    return os.userInfo().username;
  } catch {
    return undefined;
  }
}
