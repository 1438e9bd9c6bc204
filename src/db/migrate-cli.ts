import { ConfigError, loadConfig } from '../config.ts';
import { migrate } from './migrate.ts';
import { openDatabase } from './open.ts';

/** npm run migrate: applies pending migrations to the configured database and exits. */
async function main(): Promise<void> {
  const config = loadConfig();
  const db = await openDatabase(config, { serve: false });
  try {
    const applied = await migrate(db);
    console.log(applied.length ? `applied: ${applied.join(', ')}` : 'the database is up to date');
  } finally {
    await db.close();
  }
}

main().catch((err) => {
  console.error(err instanceof ConfigError ? err.message : `migrate: ${(err as Error).message}`);
  process.exit(1);
});
