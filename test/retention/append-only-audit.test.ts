import { describe, expect, it } from 'vitest';
import { findSchemaProblems } from '../../src/db/schema-check.ts';
import { prunePass } from '../../src/retention/pruner.ts';
import { asRole, createMigratedTestDatabase } from '../helpers/db.ts';

/**
 * src/db/required-schema.ts: an operator may revoke UPDATE and DELETE on audit_log, and the
 * service starts and is ready. Pruning then cannot delete audit rows, but must still prune
 * every other kind: a pass that stopped at audit_log kept expired sessions, ended lockout
 * counters and revoked access tokens for ever.
 */
describe('pruning with an append-only audit log', () => {
  it('prunes every other kind and reports audit_log as not permitted', async () => {
    const t = await createMigratedTestDatabase();
    try {
      await t.db.query("INSERT INTO sessions (sid, sess, expire) VALUES ('expired', '{}', now() - interval '1 hour')");
      await t.db.query("INSERT INTO audit_log (at, action, outcome) VALUES (now() - interval '2 years', 'user.login', 'success')");
      const appendOnly = (role: string) => `CREATE ROLE ${role} LOGIN; GRANT USAGE ON SCHEMA public TO ${role};
        GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO ${role};
        GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO ${role};
        REVOKE UPDATE, DELETE ON audit_log FROM ${role};`;
      await asRole(t, appendOnly, async (db) => {
        expect(await findSchemaProblems(db), 'a supported configuration: the service starts and is ready').toStrictEqual([]);
        const report = await prunePass(db, { TOKEN_RETENTION: 86_400_000, WEBHOOK_RETENTION: 30 * 86_400_000, AUDIT_RETENTION: 365 * 86_400_000, LOCKOUT_MINUTES: 30 });
        expect(report.notPermitted).toStrictEqual(['audit_log']);
        expect(report.counts.sessions, 'the kinds after audit_log are pruned').toBe(1);
        expect((await db.query("SELECT 1 FROM sessions WHERE sid = 'expired'")).rowCount).toBe(0);
        expect((await db.query("SELECT 1 FROM audit_log WHERE at < now() - interval '1 year'")).rowCount, 'the audit row is kept').toBe(1);
      });
    } finally {
      await t.drop();
    }
  });
});
