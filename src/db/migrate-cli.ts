import { ConfigError, loadConfig } from '../config.ts';
import { EnvFileError, loadEnvFile } from '../config/env-file.ts';
import { migrate } from './migrate.ts';
import { describeDatabase, openDatabase } from './open.ts';

/** npm run migrate: applies pending migrations to the configured database (.env read) and exits. */
async function main(): Promise<void> {
  loadEnvFile();
  const config = loadConfig();
  console.error(`migrate: using ${describeDatabase(config)}`);
  const db = await openDatabase(config, { serve: false });
  try {
    const applied = await migrate(db);
    console.log(applied.length ? `applied: ${applied.join(', ')}` : 'the database is up to date');
  } finally {
    await db.close();
  }
}

main().catch((err) => {
  console.error(err instanceof ConfigError || err instanceof EnvFileError ? err.message : `migrate: ${(err as Error).message}`);
  process.exit(1);
});
