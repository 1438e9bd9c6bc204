import { parseArgs } from 'node:util';
import pino from 'pino';
import { ConfigError, loadConfig } from '../config.ts';
import { migrate } from '../db/migrate.ts';
import { openDatabase } from '../db/open.ts';
import { createServices } from '../deps.ts';
import { AppError } from '../http/errors.ts';
import { loadSigningKey } from '../sso/keys.ts';
import { runCommand, USAGE } from './commands.ts';

/**
 * The admin command line. Opens the configured database: PostgreSQL, or the embedded one —
 * through the running service's socket when it runs, directly when it does not.
 * With --json, stdout carries one JSON document and nothing else.
 */
async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    strict: true,
    options: {
      json: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
      name: { type: 'string' },
      'callback-url': { type: 'string' },
      'allow-ip': { type: 'string', multiple: true },
      'allow-everything': { type: 'boolean' },
      id: { type: 'string' },
      username: { type: 'string' },
      email: { type: 'string' },
      password: { type: 'string' },
      role: { type: 'string' },
      'full-name': { type: 'string' },
      inactive: { type: 'boolean' },
      'base-url': { type: 'string' },
    },
  });
  if (values.help || positionals.length === 0) {
    process.stdout.write(`${USAGE}\n`);
    return positionals.length === 0 && !values.help ? 2 : 0;
  }
  const config = loadConfig();
  const db = await openDatabase(config, { serve: false });
  try {
    await migrate(db);
    const services = createServices({ config, db, logger: pino({ level: 'silent' }), signingKey: await loadSigningKey(config) });
    const result = await runCommand(services, { words: positionals, options: values });
    process.stdout.write(values.json ? `${JSON.stringify(result.json, null, 2)}\n` : `${result.text}\n`);
    return 0;
  } finally {
    await db.close();
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err) => {
    if (err instanceof AppError || err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(err instanceof AppError && err.code === 'usage' ? 2 : 1);
    }
    const message = (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS') ? `${(err as Error).message}\n\n${USAGE}` : `admin: ${(err as Error).message}`;
    process.stderr.write(`${message}\n`);
    process.exit(1);
  },
);
