import type { Queryable } from '../db/db.ts';

/** One artefact as the adapter stores it (src/oidc/adapter.ts). */
export interface ArtefactRow {
  payload: Record<string, unknown>;
  consumed: boolean;
}

/** The key an artefact is stored under (its pk). */
export const artefactKey = (model: string, id: string) => `${model}:${id}`;

/** One artefact to write: `payload` for `model` and `id`, expiring `expiresIn` seconds from now by the database's clock. */
export interface ArtefactWrite {
  model: string;
  id: string;
  payload: Record<string, unknown>;
  expiresIn: number;
}

/**
 * Writes (or replaces) artefacts, with the fields each is looked up by and the user it belongs
 * to, in one statement. A key given more than once is written once, with the last of its
 * writes (one statement cannot update a row twice). The rows go in key order: the statement
 * locks them in that order, so two instances writing batches that share keys (a grant or a
 * session both update) take the locks alike and cannot deadlock.
 */
export async function upsertArtefacts(q: Queryable, writes: readonly ArtefactWrite[]): Promise<void> {
  const last = new Map(writes.map((w) => [artefactKey(w.model, w.id), w]));
  const text = (v: unknown) => (typeof v === 'string' ? v : null);
  const rows = [...last].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([pk, w]) => [pk, w.model, JSON.stringify(w.payload), text(w.payload.grantId), text(w.payload.uid),
    text(w.payload.userCode), text(w.payload.accountId), w.expiresIn] as const);
  const column = (i: number) => rows.map((r) => r[i]);
  await q.query(
    `INSERT INTO oidc_artefacts (pk, model, payload, grant_id, uid, user_code, account_id, expires_at)
     SELECT pk, model, payload, grant_id, uid, user_code, account_id, now() + make_interval(secs => expires_in)
       FROM unnest($1::text[], $2::text[], $3::jsonb[], $4::text[], $5::text[], $6::text[], $7::text[], $8::double precision[])
         AS w (pk, model, payload, grant_id, uid, user_code, account_id, expires_in)
     ON CONFLICT (pk) DO UPDATE SET payload = EXCLUDED.payload, grant_id = EXCLUDED.grant_id, uid = EXCLUDED.uid,
       user_code = EXCLUDED.user_code, account_id = EXCLUDED.account_id, expires_at = EXCLUDED.expires_at`,
    [0, 1, 2, 3, 4, 5, 6, 7].map(column),
    PREPARED,
  );
}

const LIVE = `expires_at > now()`;
/** The statements of every token request: parsed and planned once per connection (src/db/db.ts). */
const PREPARED = { prepare: true } as const;

/**
 * Consumes the live, unconsumed artefacts among `pks` in one statement, and answers the keys it
 * consumed: each at most once, however many callers asked for it, whichever instance they are
 * on. Two token requests racing on one authorization code cannot both see it unconsumed.
 */
export async function consumeArtefactsByKey(q: Queryable, pks: string[]): Promise<Set<string>> {
  const r = await q.query<{ pk: string }>(
    `UPDATE oidc_artefacts SET consumed_at = now() WHERE pk = ANY ($1::text[]) AND consumed_at IS NULL AND ${LIVE} RETURNING pk`, [pks], PREPARED);
  return new Set(r.rows.map((row) => row.pk));
}

/** A live artefact as findArtefactsWithGrants reads it: with its grant's, when it names one (null: that grant is gone or expired). */
export interface ArtefactWithGrant extends ArtefactRow {
  pk: string;
  grant?: { id: string; row: ArtefactRow | null };
}

/**
 * The live artefacts among `pks`, in one statement, each with the live grant it was issued
 * under: a token or code and its grant, which oidc-provider reads one after the other for
 * every token request and introspection, in one round trip.
 */
export async function findArtefactsWithGrants(q: Queryable, pks: readonly string[]): Promise<ArtefactWithGrant[]> {
  const r = await q.query<{ pk: string; payload: Record<string, unknown>; consumed: boolean; grant_id: string | null; grant_payload: Record<string, unknown> | null; grant_consumed: boolean }>(
    `SELECT t.pk, t.payload, t.consumed_at IS NOT NULL AS consumed, t.grant_id, g.payload AS grant_payload, g.consumed_at IS NOT NULL AS grant_consumed
     FROM oidc_artefacts t
     LEFT JOIN oidc_artefacts g ON t.grant_id IS NOT NULL AND t.model <> 'Grant' AND g.pk = 'Grant:' || t.grant_id AND g.${LIVE}
     WHERE t.pk = ANY ($1::text[]) AND t.${LIVE}`,
    [pks],
    PREPARED,
  );
  return r.rows.map((row) => ({
    pk: row.pk, payload: row.payload, consumed: row.consumed,
    ...(row.grant_id !== null && !row.pk.startsWith('Grant:')
      ? { grant: { id: row.grant_id, row: row.grant_payload === null ? null : { payload: row.grant_payload, consumed: row.grant_consumed } } }
      : {}),
  }));
}

/** The artefact, unless it is unknown or expired. */
export async function findArtefact(q: Queryable, model: string, id: string): Promise<ArtefactRow | null> {
  const r = await q.query<ArtefactRow>(`SELECT payload, consumed_at IS NOT NULL AS consumed FROM oidc_artefacts WHERE pk = $1 AND ${LIVE}`, [artefactKey(model, id)], PREPARED);
  return r.rows[0] ?? null;
}

/** The live artefact of `model` whose `column` (uid or user_code) is `value`. */
export async function findArtefactBy(q: Queryable, model: string, column: 'uid' | 'user_code', value: string): Promise<ArtefactRow | null> {
  const r = await q.query<ArtefactRow>(
    `SELECT payload, consumed_at IS NOT NULL AS consumed FROM oidc_artefacts WHERE model = $1 AND ${column} = $2 AND ${LIVE} LIMIT 1`,
    [model, value],
    PREPARED,
  );
  return r.rows[0] ?? null;
}

export async function destroyArtefact(q: Queryable, model: string, id: string): Promise<void> {
  await q.query('DELETE FROM oidc_artefacts WHERE pk = $1', [artefactKey(model, id)], PREPARED);
}

/** Deletes the artefacts of `model` issued under a grant (the Grant model: the grant itself). */
export async function revokeModelByGrant(q: Queryable, model: string, grantId: string): Promise<void> {
  if (model === 'Grant') await q.query('DELETE FROM oidc_artefacts WHERE pk = $1', [artefactKey('Grant', grantId)]);
  else await q.query('DELETE FROM oidc_artefacts WHERE grant_id = $1 AND model = $2', [grantId, model]);
}

/** Deletes every artefact of a grant (its codes, tokens and the grant itself), whatever the model. */
export async function revokeGrantArtefacts(q: Queryable, grantId: string): Promise<void> {
  await q.query('DELETE FROM oidc_artefacts WHERE grant_id = $1 OR pk = $2', [grantId, artefactKey('Grant', grantId)]);
}

/**
 * Deletes what the provider holds for a user (every model, or only `models`: sessions,
 * grants, codes, access and refresh tokens) and answers the deleted sessions' payloads, for
 * the back-channel logout that follows.
 */
export async function revokeAccountArtefacts(q: Queryable, accountId: string, models?: string[]): Promise<Array<Record<string, unknown>>> {
  const r = await q.query<{ model: string; payload: Record<string, unknown> }>(
    `DELETE FROM oidc_artefacts WHERE account_id = $1 AND ($2::text[] IS NULL OR model = ANY ($2::text[])) RETURNING model, payload`,
    [accountId, models ?? null],
  );
  return r.rows.filter((row) => row.model === 'Session').map((row) => row.payload);
}

/** Deletes a user's grants, codes and tokens (not their sessions), inside the caller's transaction. */
export async function revokeAccountTokens(q: Queryable, accountId: string): Promise<number> {
  const r = await q.query(`DELETE FROM oidc_artefacts WHERE account_id = $1 AND model <> 'Session'`, [accountId]);
  return r.rowCount;
}
