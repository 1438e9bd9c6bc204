import { writeAudit } from '../audit/writer.ts';
import type { Deps } from '../context.ts';
import { prunePass, type PruneReport } from './pruner.ts';

/**
 * One pruning pass on demand (the admin command line). A real pass is audited with what it
 * deleted, since it may have deleted audit entries; a dry run changes nothing and is not.
 */
export async function pruneNow(deps: Pick<Deps, 'db' | 'config' | 'metrics'>, options: { dryRun: boolean; actor: { via: string; username?: string } }): Promise<PruneReport> {
  const report = await prunePass(deps.db, deps.config, { dryRun: options.dryRun, metrics: deps.metrics });
  if (!options.dryRun) {
    await writeAudit(deps.db, {
      action: 'retention.prune',
      outcome: 'success',
      details: {
        via: options.actor.via, actor: options.actor.username ?? null, deleted: report.counts, kept_forever: report.keptForever,
        ...(report.notPermitted.length > 0 ? { not_permitted: report.notPermitted } : {}),
      },
    });
  }
  return report;
}
