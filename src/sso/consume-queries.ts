import type { Queryable } from '../db/db.ts';
import { insertAuditRows } from '../audit/queries.ts';
import { admitsSql } from '../access/queries.ts';
import { CLIENT_CHANGED, CLIENT_IS_CURRENT } from './queries.ts';

/** The user a consumed token named. */
export interface ConsumedToken {
  user_id: number;
  /** The token's username claim: the user's own, or the name of their active link at the client (the audit row keeps the account's). */
  username: string;
  email: string;
  /** The user's full name, read by the consuming statement itself (the answer's `user.full_name`). */
  full_name: string;
  expires_at: Date;
}

/** One validation's request to consume a token: the token, who presents it, from where. */
export interface ConsumeRequest {
  jti: string;
  clientId: string;
  ipAddress: string;
  userAgent: string | null;
  /**
   * The version of the client's row the caller was authenticated with (ClientRecord.version):
   * nothing is consumed unless the row still has it. Omitted: not checked.
   */
  clientVersion?: string | null;
}


/**
 * The token `t` was issued to the client under its id that was created at `createdAt` (an
 * SQL expression), not to one deleted or renamed before that client was created: a token written while its client was being deleted or
 * renamed (by a transaction the issue could not see) is left under the old id, and a client
 * registered there later must not accept it. Tokens keep their client's creation time;
 * those written before they did (null) are judged by the id alone.
 */
const sameClient = (createdAt: string) => `(t.client_created_at IS NULL OR t.client_created_at = ${createdAt})`;

/**
 * Marks tokens used, in one statement for any number of validations (`result[i]` answers
 * `requests[i]`: the user, or null when that request consumed nothing). A token is consumed
 * only by the client it was issued for, only while unused, not invalidated, unexpired and
 * its user active and admitted by the client's access rule (read in this statement: a user who
 * left the group since the issue is refused), only while the client's row has the version the caller was authenticated
 * with (`clientVersion`, when given; otherwise the answer is CLIENT_CHANGED), and (for a
 * token naming a dashboard link) only while that link is still active, so a link revoked while its token was being issued lends that token nothing; of any number of requests for one token, in this batch or in concurrent
 * ones, exactly one gets the row back (a row is updated once, and a concurrent update waits
 * for the row lock and then sees `used_at` set). The success audit rows are written by the
 * same statement.
 *
 * A token the expiry sweep has announced expired (`expiry_notified_at`) is not consumed, though
 * this statement's now() (taken when it began) may be before its expiry: a validation that
 * waited for the sweep's lock would otherwise succeed for a token.expired already sent.
 *
 * "Unused" is spelled `coalesce(used_at, invalidated_at) IS NULL` on purpose: written as
 * two IS NULL tests it matches the partial index sso_tokens_unused_by_user, and on a table
 * that grew faster than autovacuum analyzes it (a fresh deployment under load) the planner
 * then scans all unused tokens into a hash instead of looking each jti up by primary key.
 */
export async function consumeTokens(q: Queryable, requests: readonly ConsumeRequest[]): Promise<Array<ConsumedToken | null | typeof CLIENT_CHANGED>> {
  const r = await q.query<{ n: number; current: boolean; user_id: number | null; username: string; email: string; full_name: string; expires_at: Date }>(
    `WITH req AS (
       SELECT r.*, ${CLIENT_IS_CURRENT} AS current, c.created_at AS client_created_at, c.allow_groups, c.allow_roles
       FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[])
         WITH ORDINALITY AS r(jti, client_id, ip_address, user_agent, client_version, n)
       LEFT JOIN clients c ON c.client_id = r.client_id
     ), consumed AS (
       UPDATE sso_tokens t SET used_at = now()
       FROM req r, users u
       WHERE r.current AND t.jti = r.jti AND t.client_id = r.client_id AND ${sameClient('r.client_created_at')} AND u.id = t.user_id AND u.active
         AND coalesce(t.used_at, t.invalidated_at) IS NULL AND t.expires_at > now() AND t.expiry_notified_at IS NULL
         AND ${admitsSql('u', 'r')}
         AND (t.username = u.username OR EXISTS (
           SELECT 1 FROM user_client_links l
            WHERE l.user_id = t.user_id AND l.client_id = t.client_id AND l.status = 'active' AND l.external_username = t.username))
       RETURNING r.n, r.jti, r.client_id, r.ip_address, r.user_agent, u.id AS user_id, u.username, t.username AS claim_username, u.email, u.full_name, t.expires_at
     ), audit AS (
       ${insertAuditRows(`SELECT 'token.validate', 'success', user_id, username, client_id, ip_address, user_agent, jsonb_build_object('jti', jti::text)
       FROM consumed ORDER BY n`)}
     )
     SELECT r.n::int AS n, r.current, k.user_id, k.claim_username AS username, k.email, k.full_name, k.expires_at FROM req r LEFT JOIN consumed k ON k.n = r.n`,
    [
      requests.map((x) => x.jti),
      requests.map((x) => x.clientId),
      requests.map((x) => x.ipAddress),
      requests.map((x) => x.userAgent?.slice(0, 512) ?? null),
      requests.map((x) => x.clientVersion ?? null),
    ],
    { prepare: true },
  );
  const result: Array<ConsumedToken | null | typeof CLIENT_CHANGED> = requests.map(() => null);
  for (const { n, current, ...row } of r.rows) {
    result[n - 1] = !current ? CLIENT_CHANGED : row.user_id === null ? null : { ...row, user_id: row.user_id };
  }
  return result;
}

/** Why a token could not be consumed. `name_valid`: it names its user, or a link still active. */
interface TokenState {
  /** Null when the token was issued to an earlier client under the same id (sameClient). */
  client_id: string | null;
  used_at: Date | null;
  invalidated_at: Date | null;
  expires_at: Date;
  user_active: boolean;
  user_id: number;
  name_valid: boolean;
  /** Whether the client's access rule admits the user now (docs/access.md). */
  admitted: boolean;
}

/** The state of a token that could not be consumed, to say why. */
export async function tokenState(
  q: Queryable,
  jti: string,
): Promise<TokenState | null> {
  const r = await q.query<TokenState>(
    `SELECT CASE WHEN ${sameClient('c.created_at')} THEN t.client_id END AS client_id,
            t.used_at, t.invalidated_at, t.expires_at, u.active AS user_active, u.id AS user_id,
            (t.username = u.username OR EXISTS (
              SELECT 1 FROM user_client_links l
               WHERE l.user_id = t.user_id AND l.client_id = t.client_id AND l.status = 'active' AND l.external_username = t.username)) AS name_valid,
            coalesce(${admitsSql('u', 'c')}, true) AS admitted
     FROM sso_tokens t JOIN users u ON u.id = t.user_id LEFT JOIN clients c ON c.client_id = t.client_id WHERE t.jti = $1`,
    [jti],
  );
  return r.rows[0] ?? null;
}

/**
 * The user of a token issued to `clientId` (the client now under that id: sameClient),
 * whatever its state, and the browser session it was issued in (null: issued server to
 * server); null when there is no such token.
 */
export async function tokenOwner(q: Queryable, jti: string, clientId: string): Promise<{ userId: number; sessionId: string | null } | null> {
  const r = await q.query<{ user_id: number; session_id: string | null }>(
    `SELECT t.user_id, t.session_id FROM sso_tokens t JOIN clients c ON c.client_id = t.client_id
      WHERE t.jti = $1 AND t.client_id = $2 AND ${sameClient('c.created_at')}`,
    [jti, clientId],
  );
  const row = r.rows[0];
  return row ? { userId: row.user_id, sessionId: row.session_id } : null;
}
