import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import type { Db } from '../db/db.ts';
import { guardPolicy } from '../webhooks/address-guard.ts';
import { applySeeds, SeedError } from './apply.ts';
import { readSeedFiles } from './files.ts';

/**
 * SEED_ON_START: applies the seed file or folder it names, in one transaction under the
 * migration lock (src/db/migrate.ts), so instances starting together apply it one after
 * another and only the first changes anything (the next finds every row as the files say:
 * nothing to audit, nothing to announce). Returns null when applied, or the reason the
 * instance stays unready when the files are refused (then nothing was applied); the reason is
 * logged. `env`: where webhook secrets are read.
 */
export async function seedOnStart(db: Db, config: Config, logger: Logger, env: Record<string, string | undefined> = process.env): Promise<string | null> {
  const given = config.SEED_ON_START;
  if (!given) return null;
  try {
    const files = await readSeedFiles(process.cwd(), [given]);
    const r = await applySeeds(db, files, { user: 'SEED_ON_START' }, {
      production: config.NODE_ENV === 'production', env, webhookPolicy: guardPolicy(config), migrationLock: true,
    });
    const hooks = (change: string) => r.webhooks.filter((w) => w.change === change).map((w) => w.url);
    logger.info({
      files: r.files, created: r.created, updated: r.updated, deleted: r.deleted, unchanged: r.unchanged,
      webhooks: { created: hooks('created'), updated: hooks('changed'), deleted: hooks('deleted') },
    }, 'SEED_ON_START applied');
    return null;
  } catch (err) {
    if (!(err instanceof SeedError)) throw err;
    const reason = `SEED_ON_START was refused, nothing was applied: ${err.message}`;
    logger.error({ seed: given, reason }, 'SEED_ON_START refused: this instance stays unready');
    return reason;
  }
}
