import { CREDENTIALS_VERSION } from '../db/credentials-version.ts';
import type { Queryable } from '../db/db.ts';

/** A passkey as stored (the public key as bytes). */
export interface PasskeyRow {
  id: number;
  user_id: number;
  credential_id: string;
  public_key: Uint8Array<ArrayBuffer>;
  counter: number;
  transports: string[];
  name: string;
  created_at: Date;
  last_used_at: Date | null;
}

/** A passkey as its owner and administrators see it: nothing of the key. */
export interface PasskeySummary {
  id: number;
  name: string;
  created_at: Date;
  last_used_at: Date | null;
}

const SUMMARY = 'id, name, created_at, last_used_at';

/** Bytes as PostgreSQL (pg) or PGlite hand them over: a Buffer or a Uint8Array. */
function bytes(value: unknown): Uint8Array<ArrayBuffer> {
  return value instanceof Uint8Array ? new Uint8Array(value) : new Uint8Array(Buffer.from(String(value).replace(/^\\x/, ''), 'hex'));
}

function row(r: Record<string, unknown>): PasskeyRow {
  return {
    id: Number(r.id), user_id: Number(r.user_id), credential_id: String(r.credential_id), public_key: bytes(r.public_key),
    counter: Number(r.counter), transports: (r.transports as string[] | null) ?? [], name: String(r.name),
    created_at: new Date(r.created_at as string), last_used_at: r.last_used_at ? new Date(r.last_used_at as string) : null,
  };
}

/** The passkeys of a user, oldest first. */
export async function listPasskeys(q: Queryable, userId: number): Promise<PasskeySummary[]> {
  const r = await q.query<PasskeySummary>(`SELECT ${SUMMARY} FROM passkeys WHERE user_id = $1 ORDER BY id`, [userId]);
  return r.rows.map((p) => ({ id: Number(p.id), name: p.name, created_at: new Date(p.created_at), last_used_at: p.last_used_at ? new Date(p.last_used_at) : null }));
}

/** The credential ids a user has registered (the ceremony's exclude list). */
export async function credentialIdsOf(q: Queryable, userId: number): Promise<Array<{ credential_id: string; transports: string[] }>> {
  const r = await q.query<{ credential_id: string; transports: string[] }>('SELECT credential_id, transports FROM passkeys WHERE user_id = $1', [userId]);
  return r.rows;
}

/** The passkey with this credential id, or null. */
export async function findPasskeyByCredential(q: Queryable, credentialId: string): Promise<PasskeyRow | null> {
  const r = await q.query<Record<string, unknown>>('SELECT * FROM passkeys WHERE credential_id = $1', [credentialId]);
  return r.rows[0] ? row(r.rows[0]) : null;
}

/** How many passkeys each of these users has (absent: none). */
export async function countPasskeys(q: Queryable, userIds: number[]): Promise<Map<number, number>> {
  const r = await q.query<{ user_id: number; n: number }>(
    'SELECT user_id, count(*)::int AS n FROM passkeys WHERE user_id = ANY($1::int[]) GROUP BY user_id', [userIds]);
  return new Map(r.rows.map((x) => [Number(x.user_id), Number(x.n)]));
}

/**
 * Stores a new passkey unless the user already has `max`: the user's row is locked first
 * (FOR NO KEY UPDATE), so two registrations at once are counted one after the other. Null
 * when the limit is reached or the user is gone; the caller's transaction holds the lock.
 */
export async function insertPasskey(
  q: Queryable,
  p: { userId: number; credentialId: string; publicKey: Uint8Array; counter: number; transports: string[]; name: string },
  max: number,
): Promise<PasskeySummary | 'limit' | null> {
  const owner = await q.query('SELECT id FROM users WHERE id = $1 FOR NO KEY UPDATE', [p.userId]);
  if (owner.rowCount === 0) return null;
  const count = await q.query<{ n: number }>('SELECT count(*)::int AS n FROM passkeys WHERE user_id = $1', [p.userId]);
  if (Number(count.rows[0]?.n ?? 0) >= max) return 'limit';
  const r = await q.query<PasskeySummary>(
    `INSERT INTO passkeys (user_id, credential_id, public_key, counter, transports, name)
     VALUES ($1, $2, $3, $4, $5::text[], $6) RETURNING ${SUMMARY}`,
    [p.userId, p.credentialId, Buffer.from(p.publicKey), p.counter, p.transports, p.name],
  );
  const created = r.rows[0];
  return { id: Number(created.id), name: created.name, created_at: new Date(created.created_at), last_used_at: null };
}

/**
 * Records a use: the new counter and the time, only while the stored counter is still the one
 * the assertion was checked against (two uses of one assertion at once: one wins). False
 * when the passkey is gone or was used meanwhile.
 */
export async function recordPasskeyUse(q: Queryable, id: number, checkedCounter: number, newCounter: number): Promise<boolean> {
  const r = await q.query('UPDATE passkeys SET counter = $3, last_used_at = now() WHERE id = $1 AND counter = $2 RETURNING id', [id, checkedCounter, newCounter]);
  return r.rowCount > 0;
}

/** Deletes one passkey of a user; its name, or null when the user has no such passkey. */
export async function deletePasskey(q: Queryable, userId: number, id: number): Promise<{ name: string; credential_id: string } | null> {
  const r = await q.query<{ name: string; credential_id: string }>('DELETE FROM passkeys WHERE user_id = $1 AND id = $2 RETURNING name, credential_id', [userId, id]);
  return r.rows[0] ?? null;
}

/** Keeps a challenge for one ceremony, for `ttlSeconds`. */
export async function storeChallenge(q: Queryable, challenge: string, purpose: 'registration' | 'authentication', userId: number | null, ttlSeconds: number): Promise<void> {
  await q.query(
    `INSERT INTO webauthn_challenges (challenge, purpose, user_id, expires_at)
     VALUES ($1, $2, $3, now() + make_interval(secs => $4::double precision))`,
    [challenge, purpose, userId, ttlSeconds],
  );
}

/**
 * Takes a challenge in one statement: true once, for an unexpired challenge of this purpose
 * (and user); every later try, and any try after it expired, finds nothing.
 */
export async function takeChallenge(q: Queryable, challenge: string, purpose: 'registration' | 'authentication', userId: number | null): Promise<boolean> {
  const r = await q.query(
    `DELETE FROM webauthn_challenges WHERE challenge = $1 AND purpose = $2 AND user_id IS NOT DISTINCT FROM $3::int RETURNING expires_at > now() AS live`,
    [challenge, purpose, userId],
  );
  return (r.rows[0] as { live?: boolean } | undefined)?.live === true;
}

/**
 * The user a passkey sign-in commits for, with the row locked FOR SHARE until the caller's
 * transaction ends (a deactivation or password change cannot commit in between): whether they
 * are active, the version of their credentials (the session carries it) and the must-change
 * flag. Null when the user is gone.
 */
export async function signInState(q: Queryable, userId: number): Promise<{ active: boolean; version: string; mustChange: boolean } | null> {
  const r = await q.query<{ active: boolean; version: string; must_change_password: boolean }>(
    `SELECT active, ${CREDENTIALS_VERSION} AS version, must_change_password FROM users WHERE id = $1 FOR SHARE`, [userId]);
  const found = r.rows[0];
  return found ? { active: found.active, version: found.version, mustChange: found.must_change_password } : null;
}
