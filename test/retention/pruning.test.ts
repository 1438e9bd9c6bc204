import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { prunePass } from '../../src/retention/pruner.ts';
import { sweepExpiredTokens } from '../../src/sso/expiry-sweep.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { admin } from '../helpers/cli.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import { attemptCount, present, seed, SEEDED_COUNTS, sorted } from './support.ts';

/** Every pruned table with no rows deleted. */
const NONE = { sso_tokens: 0, webhook_deliveries: 0, webhook_attempts: 0, audit_log: 0, login_attempts: 0, sessions: 0, revoked_access_tokens: 0, totp_pending: 0, oidc_artefacts: 0, webauthn_challenges: 0 };

const jtiOf = (token: string): string => JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString()).jti;

describe('pruning past retention', () => {
  let app: TestApp;
  beforeAll(async () => {
    // No background pass and no token.expired sweep here: each test runs the passes it checks.
    app = await startTestApp({ PRUNE_INTERVAL: '0', TOKEN_SWEEP_INTERVAL_MS: '3600000' });
  });
  afterAll(() => app.close());

  const prune = async (args: string[] = [], env: Record<string, string> = {}) => {
    const r = await admin(app, ['prune', ...args, '--json'], env);
    expect(r.code, r.stderr).toBe(0);
    return JSON.parse(r.stdout);
  };

  it('removes exactly what is past retention and nothing else', async () => {
    const rows = await seed(app);
    const report = await prune();
    expect(report).toStrictEqual({ dry_run: false, tables: SEEDED_COUNTS, kept_forever: [], left_to_other_instance: [], not_permitted: [] });
    expect(await present(app.db, rows.gone)).toStrictEqual({ sso_tokens: [], audit_log: [], webhook_deliveries: [], login_attempts: [], sessions: [], revoked_access_tokens: [], totp_pending: [], oidc_artefacts: [], webauthn_challenges: [] });
    expect(await present(app.db, rows.kept)).toStrictEqual(sorted(rows.kept));
    expect(await attemptCount(app.db, rows.gone.webhook_deliveries), 'attempts go with their delivery').toBe(0);
    expect(await attemptCount(app.db, rows.kept.webhook_deliveries), 'a pending delivery keeps its attempts').toBe(3);
    expect((await prune()).tables, 'a second pass finds nothing more').toStrictEqual(NONE);
  });

  it('audits a pass run from the command line with what it deleted', async () => {
    await seed(app);
    await prune();
    const r = await app.db.query<{ outcome: string; details: { via: string; deleted: Record<string, number> } }>(
      "SELECT outcome, details FROM audit_log WHERE action = 'retention.prune' ORDER BY id DESC LIMIT 1");
    expect(r.rows[0].outcome).toBe('success');
    expect(r.rows[0].details.via).toBe('cli');
    expect(r.rows[0].details.deleted).toStrictEqual(SEEDED_COUNTS);
  });

  it('deletes nothing on --dry-run and counts what a pass would delete', async () => {
    const rows = await seed(app);
    const audited = (await app.db.query<{ n: number }>("SELECT count(*)::int AS n FROM audit_log WHERE action = 'retention.prune'")).rows[0].n;
    const dry = await prune(['--dry-run']);
    expect(dry).toStrictEqual({ dry_run: true, tables: SEEDED_COUNTS, kept_forever: [], left_to_other_instance: [], not_permitted: [] });
    expect(await present(app.db, rows.gone)).toStrictEqual(sorted(rows.gone));
    expect(await present(app.db, rows.kept)).toStrictEqual(sorted(rows.kept));
    expect(await attemptCount(app.db, rows.gone.webhook_deliveries)).toBe(6);
    const text = await admin(app, ['prune', '--dry-run']);
    expect(text.stdout).toMatch(/^Dry run: nothing deleted/);
    expect(text.stdout).toMatch(/audit_log\s+1\n/);
    expect((await app.db.query<{ n: number }>("SELECT count(*)::int AS n FROM audit_log WHERE action = 'retention.prune'")).rows[0].n,
      'a dry run changes nothing, not even the audit log').toBe(audited);
    expect((await prune()).tables, 'the real pass deletes what the dry run counted').toStrictEqual(SEEDED_COUNTS);
    expect((await admin(app, ['--help'])).stdout).toMatch(/^ {2}prune \[--dry-run\]/m);
  });

  it('keeps the audit log with AUDIT_RETENTION=0', async () => {
    const rows = await seed(app);
    const ancient = (await app.db.query<{ id: string }>(
      "INSERT INTO audit_log (at, action, outcome) VALUES (now() - interval '20 years', 'test.seed', 'success') RETURNING id::text AS id")).rows[0].id;
    const report = await prune([], { AUDIT_RETENTION: '0' });
    expect(report.tables).toStrictEqual({ ...SEEDED_COUNTS, audit_log: 0 });
    expect(report.kept_forever).toStrictEqual(['audit_log']);
    expect(await present(app.db, { audit_log: [...rows.gone.audit_log, ancient] })).toStrictEqual(sorted({ audit_log: [...rows.gone.audit_log, ancient] }));
    expect((await admin(app, ['prune'], { AUDIT_RETENTION: '0' })).stdout).toMatch(/audit_log\s+0 {2}\(retention 0: kept forever\)/);
    expect((await prune()).tables.audit_log, 'the default retention then deletes them').toBe(2);
  });

  it('keeps tokens and deliveries with TOKEN_RETENTION=0 and WEBHOOK_RETENTION=0', async () => {
    const rows = await seed(app);
    const report = await prune([], { TOKEN_RETENTION: '0', WEBHOOK_RETENTION: '0' });
    expect(report.tables).toStrictEqual({ ...SEEDED_COUNTS, sso_tokens: 0, webhook_deliveries: 0, webhook_attempts: 0 });
    expect(report.kept_forever).toStrictEqual(['sso_tokens', 'webhook_deliveries', 'webhook_attempts']);
    expect(await present(app.db, { sso_tokens: rows.gone.sso_tokens, webhook_deliveries: rows.gone.webhook_deliveries }))
      .toStrictEqual(sorted({ sso_tokens: rows.gone.sso_tokens, webhook_deliveries: rows.gone.webhook_deliveries }));
    await prune();
  });

  it('follows shorter retentions', async () => {
    const rows = await seed(app);
    await prune([], { TOKEN_RETENTION: '1h', AUDIT_RETENTION: '1d', WEBHOOK_RETENTION: '15d' });
    // 1h: the token used and expired 20 hours ago goes too; 15d: the delivery finished 29 days
    // ago; 1d: the audit entry of 364 days. The unused token without its event, the valid
    // token, the token whose browser session lives and the pending delivery stay whatever the retention.
    expect(await present(app.db, rows.kept)).toStrictEqual(sorted({
      ...rows.kept,
      sso_tokens: [rows.kept.sso_tokens[0], rows.kept.sso_tokens[2], rows.kept.sso_tokens[3]],
      audit_log: [],
      webhook_deliveries: [rows.kept.webhook_deliveries[1]],
    }));
  });

  it('deletes an unused expired token only once its token.expired event is written', async () => {
    const user = await makeUser(app);
    const client = await makeClient(app);
    const hook = (await app.db.query<{ id: number }>(
      "INSERT INTO webhooks (url, events, secret, active) VALUES ('http://127.0.0.1:9/hook', '{token.expired}', 's', true) RETURNING id")).rows[0].id;
    const issued = await app.http.post('/api/sso/token', { client_id: client.client_id, client_secret: client.client_secret, username: user.username });
    expect(issued.status, issued.text).toBe(200);
    const jti = jtiOf(issued.body.token);
    await app.db.query("UPDATE sso_tokens SET expires_at = now() - interval '2 days' WHERE jti = $1", [jti]);
    expect((await prune()).tables.sso_tokens, 'no event yet: the token stays').toBe(0);
    expect(await present(app.db, { sso_tokens: [jti] })).toStrictEqual({ sso_tokens: [jti] });

    expect(await sweepExpiredTokens(app.db, app.services.deps.events) >= 1).toBe(true);
    const events = await app.db.query("SELECT 1 FROM webhook_deliveries WHERE webhook_id = $1 AND event = 'token.expired' AND data->>'token_id' = $2", [hook, jti]);
    expect(events.rows.length).toBe(1);
    await prune();
    expect(await present(app.db, { sso_tokens: [jti] }), 'with its event written, the token goes').toStrictEqual({ sso_tokens: [] });
    await app.db.query('DELETE FROM webhooks WHERE id = $1', [hook]);
  });

  it('keeps a token single-use before and after pruning', async () => {
    const user = await makeUser(app);
    const client = await makeClient(app);
    const creds = { client_id: client.client_id, client_secret: client.client_secret };
    const first = (await app.http.post('/api/sso/token', { ...creds, username: user.username })).body.token;
    const second = (await app.http.post('/api/sso/token', { ...creds, username: user.username })).body.token;

    expect((await app.http.post('/api/sso/validate', { ...creds, token: first })).status).toBe(200);
    const again = await app.http.post('/api/sso/validate', { ...creds, token: first });
    expect({ status: again.status, error: again.body.error }).toStrictEqual({ status: 401, error: 'token_already_used' });

    // Its row past retention (as if a day had gone by: the JWT itself is still unexpired,
    // the worst case), the pass deletes it; the token must still be refused.
    await app.db.query("UPDATE sso_tokens SET expires_at = now() - interval '25 hours' WHERE jti = $1", [jtiOf(first)]);
    expect((await prune()).tables.sso_tokens).toBe(1);
    expect(await present(app.db, { sso_tokens: [jtiOf(first)] })).toStrictEqual({ sso_tokens: [] });
    const afterPrune = await app.http.post('/api/sso/validate', { ...creds, token: first });
    expect(afterPrune.status).toBe(401);
    expect(afterPrune.body.valid).toBe(false);

    // An unused token issued before the pass is untouched: valid once, then refused.
    expect((await app.http.post('/api/sso/validate', { ...creds, token: second })).status).toBe(200);
    expect((await app.http.post('/api/sso/validate', { ...creds, token: second })).body.error).toBe('token_already_used');
  });

  it('prunes a backlog in batches no larger than the batch size, each its own transaction', async () => {
    await app.db.query(
      "INSERT INTO audit_log (at, action, outcome) SELECT now() - interval '400 days' - g * interval '1 second', 'test.backlog', 'success' FROM generate_series(1, 50) g");
    const deletedPerTransaction: number[] = [];
    const db = {
      ...app.db,
      transaction: <T>(fn: Parameters<typeof app.db.transaction<T>>[0]) => app.db.transaction(async (tx) => {
        const result = await fn(tx);
        const audit = (result as { counts?: { audit_log?: number } } | null)?.counts?.audit_log;
        if (audit !== undefined) deletedPerTransaction.push(audit);
        return result;
      }),
    };
    const report = await prunePass(db, app.config, { batchSize: 7 });
    expect(report.counts.audit_log).toBe(50);
    expect(deletedPerTransaction).toStrictEqual([7, 7, 7, 7, 7, 7, 7, 1]);
    expect((await app.db.query("SELECT 1 FROM audit_log WHERE action = 'test.backlog'")).rows.length).toBe(0);
  });

  it('ends a pass between two batches when its instance stops', async () => {
    await app.db.query(
      "INSERT INTO audit_log (at, action, outcome) SELECT now() - interval '400 days' - g * interval '1 second', 'test.stopping', 'success' FROM generate_series(1, 30) g");
    const stopping = new AbortController();
    let batches = 0;
    const db = {
      ...app.db,
      transaction: <T>(fn: Parameters<typeof app.db.transaction<T>>[0]) => app.db.transaction(async (tx) => {
        const result = await fn(tx);
        if ((result as { counts?: { audit_log?: number } } | null)?.counts?.audit_log !== undefined && ++batches === 2) stopping.abort();
        return result;
      }),
    };
    const report = await prunePass(db, app.config, { batchSize: 5, signal: stopping.signal });
    expect(report.counts.audit_log, 'the batch under way when it stopped is finished, no further one').toBe(10);
    expect((await app.db.query("SELECT 1 FROM audit_log WHERE action = 'test.stopping'")).rows.length).toBe(20);
    expect((await prunePass(app.db, app.config)).counts.audit_log, 'the next pass takes the rest').toBe(20);
  });

  it('lets passes run at once without deleting any row twice', async () => {
    await app.db.query(
      "INSERT INTO audit_log (at, action, outcome) SELECT now() - interval '400 days' - g * interval '1 second', 'test.concurrent', 'success' FROM generate_series(1, 120) g");
    await app.db.query(
      "INSERT INTO sessions (sid, sess, expire) SELECT 'concurrent-' || g, '{}', now() - g * interval '1 second' FROM generate_series(1, 80) g");
    const reports = await Promise.all([1, 2, 3].map(() => prunePass(app.db, app.config, { batchSize: 5 })));
    expect(reports.reduce((n, r) => n + r.counts.audit_log, 0)).toBe(120);
    expect(reports.reduce((n, r) => n + r.counts.sessions, 0)).toBe(80);
    expect((await app.db.query("SELECT 1 FROM audit_log WHERE action = 'test.concurrent'")).rows.length).toBe(0);
    expect((await app.db.query("SELECT 1 FROM sessions WHERE sid LIKE 'concurrent-%'")).rows.length).toBe(0);
  });
});
