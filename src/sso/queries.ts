import { afterCommitOf, type Queryable } from '../db/db.ts';
import { insertAuditRows } from '../audit/queries.ts';
import { statementParams, type WritePart } from '../db/statement.ts';
import { admitsSql, groupsOfSql } from '../access/queries.ts';

/** The answer for a request whose client's row no longer had the version it was authenticated with: nothing was written. */
export const CLIENT_CHANGED = 'client_changed';

/**
 * Whether a request's client row (`c`, joined by client_id) still has the version the caller
 * was authenticated with (`r.client_version`; null: not checked). Every hot statement that
 * writes for a client selects it as `current` and writes nothing where it is false.
 */
export const CLIENT_IS_CURRENT = '(r.client_version IS NULL OR coalesce(c.xmin::text = r.client_version, false))';

/** An issued token as recorded for the single-use check. */
export interface IssuedTokenRow {
  jti: string;
  userId: number;
  clientId: string;
  username: string;
  ipAddress: string;
  issuedAt: Date;
  expiresAt: Date;
  /** The browser session the token was issued in (a sign-in at /sso/login or the dashboard). */
  sessionId?: string | null;
}

/**
 * Holds the user and the client of a token about to be written, as their foreign keys did
 * (FOR KEY SHARE, until the commit; migrations/0021): a delete of either waits for the token
 * and then deletes it with them. False when either is gone. For the issues that read the
 * client and user long before they write (a browser's sign-in, bcrypt between); the
 * server-to-server statement reads both itself. With them, whether the client's access rule
 * admits the user now, and the user's groups (for the token's roles).
 */
export async function holdTokenOwners(q: Queryable, userId: number, clientId: string): Promise<{ user: boolean; client: boolean; admitted: boolean; groups: string[] }> {
  const r = await q.query<{ user: boolean; client: boolean; admitted: boolean | null; groups: string[] | null }>(
    `SELECT EXISTS (SELECT 1 FROM users WHERE id = $1 FOR KEY SHARE) AS user,
            EXISTS (SELECT 1 FROM clients WHERE client_id = $2 FOR KEY SHARE) AS client,
            (SELECT ${admitsSql('u', 'c')} FROM users u, clients c WHERE u.id = $1 AND c.client_id = $2) AS admitted,
            (SELECT ${groupsOfSql('u')} FROM users u WHERE u.id = $1) AS groups`,
    [userId, clientId],
  );
  const row = r.rows[0];
  return { user: row.user, client: row.client, admitted: row.admitted === true, groups: row.groups ?? [] };
}

/** The insert of issued tokens as a part of a larger statement (null: none). */
export function issuedTokenRows(tokens: readonly IssuedTokenRow[]): WritePart | null {
  if (tokens.length === 0) return null;
  return {
    // with the creation time of the client it is issued to (see consumeTokens)
    sql: (bind) => `INSERT INTO sso_tokens (jti, user_id, client_id, username, ip_address, issued_at, expires_at, session_id, client_created_at)
       SELECT r.jti, r.user_id, r.client_id, r.username, r.ip_address, r.issued_at, r.expires_at, r.session_id, c.created_at
       FROM unnest(${bind(tokens.map((t) => t.jti))}::uuid[], ${bind(tokens.map((t) => t.userId))}::int[],
         ${bind(tokens.map((t) => t.clientId))}::text[], ${bind(tokens.map((t) => t.username))}::text[], ${bind(tokens.map((t) => t.ipAddress))}::text[],
         ${bind(tokens.map((t) => t.issuedAt))}::timestamptz[], ${bind(tokens.map((t) => t.expiresAt))}::timestamptz[],
         ${bind(tokens.map((t) => t.sessionId ?? null))}::text[])
         AS r(jti, user_id, client_id, username, ip_address, issued_at, expires_at, session_id)
       LEFT JOIN clients c ON c.client_id = r.client_id`,
  };
}

/**
 * One server-to-server token issue, as its statement needs it: the token's id, times and
 * address, and the user by normalized username (the statement finds them).
 */
export interface IssueByUsernameRequest {
  jti: string;
  /** Normalized (src/validation/username.ts). */
  username: string;
  clientId: string;
  /** The address the token is bound to (its ip_address claim). */
  tokenIp: string;
  /** The caller's address and user agent, for the audit row and the event. */
  ipAddress: string;
  userAgent: string | null;
  issuedAt: Date;
  expiresAt: Date;
  /** As in ConsumeRequest: nothing is written unless the client's row still has this version. */
  clientVersion?: string | null;
}

/** What became of one issue request: the user the token was recorded for, or why none was. */
export type IssueOutcome =
  | { issued: true; user: { id: number; username: string; email: string; role: string; groups: string[] } }
  | { issued: false; reason: 'user_not_found' | 'user_inactive' | 'access_denied' | typeof CLIENT_CHANGED };

/**
 * Issues server-to-server tokens by username, any number in one statement (`result[i]`
 * answers `requests[i]`): each request's user is found by its normalized username and, when
 * active, its token row, its audit row (token.issue success) and its user.login event are
 * written; for an unknown or inactive user only the failure audit row is; for a client whose
 * row no longer has `clientVersion`, nothing (CLIENT_CHANGED). One round trip
 * where looking the users up first took two, and the rows are written from the users as
 * the statement reads them, so a user deactivated meanwhile gets no token.
 *
 * `events` makes the user.login part of the statement from the query it is given (each
 * event's data and place); its deliveries are handed on once the statement has committed.
 */
export async function issueTokensByUsername(
  q: Queryable,
  requests: readonly IssueByUsernameRequest[],
  events: (source: { select: string }) => WritePart | null,
): Promise<IssueOutcome[]> {
  const { bind, values } = statementParams();
  const column = <T>(pick: (r: IssueByUsernameRequest) => T) => bind(requests.map(pick));
  const found = `SELECT r.n, r.jti, r.client_id, r.token_ip, r.ip_address, r.user_agent, r.audit_user_agent, r.asked, r.issued_at, r.expires_at,
         ${CLIENT_IS_CURRENT} AS current, c.created_at AS client_created_at,
         u.id AS user_id, u.username, u.email, u.role, coalesce(u.active, false) AS active,
         coalesce(${admitsSql('u', 'c')}, false) AS admitted, CASE WHEN u.id IS NOT NULL THEN ${groupsOfSql('u')} END AS groups
       FROM unnest(${column((r) => r.jti)}::uuid[], ${column((r) => r.username)}::text[], ${column((r) => r.username.slice(0, 200))}::text[],
         ${column((r) => r.clientId)}::text[], ${column((r) => r.tokenIp)}::text[], ${column((r) => r.ipAddress)}::text[],
         ${column((r) => r.userAgent)}::text[], ${column((r) => r.userAgent?.slice(0, 512) ?? null)}::text[],
         ${column((r) => r.issuedAt)}::timestamptz[], ${column((r) => r.expiresAt)}::timestamptz[], ${column((r) => r.clientVersion ?? null)}::text[])
         WITH ORDINALITY AS r(jti, wanted, asked, client_id, token_ip, ip_address, user_agent, audit_user_agent, issued_at, expires_at, client_version, n)
       LEFT JOIN clients c ON c.client_id = r.client_id
       LEFT JOIN users u ON u.username = r.wanted`;
  const event = events({
    select: `SELECT jsonb_build_object('user_id', user_id, 'email', email, 'ip_address', token_ip, 'user_agent', coalesce(user_agent, ''),
         'client_system', client_id, '2fa_used', false), n FROM issued`,
  });
  const ctes = [
    `requested AS (${found})`,
    // a request whose client changed since it was authenticated writes nothing
    'found AS (SELECT * FROM requested WHERE current)',
    // the client's access rule (docs/access.md), read from its row and the user's groups as they are now
    'issued AS (SELECT * FROM found WHERE active AND admitted)',
    `tokens AS (INSERT INTO sso_tokens (jti, user_id, client_id, username, ip_address, issued_at, expires_at, client_created_at)
       SELECT jti, user_id, client_id, username, token_ip, issued_at, expires_at, client_created_at FROM issued)`,
    `audit AS (${insertAuditRows(`SELECT 'token.issue', CASE WHEN active AND admitted THEN 'success' ELSE 'failure' END, user_id,
         CASE WHEN active THEN username ELSE asked END, client_id, ip_address, audit_user_agent,
         CASE WHEN active AND admitted THEN jsonb_build_object('jti', jti::text, 'flow', 'server_to_server', 'token_ip', token_ip)
              ELSE jsonb_build_object('reason', CASE WHEN user_id IS NULL THEN 'user_not_found' WHEN NOT active THEN 'user_inactive' ELSE 'access_denied' END) END
       FROM found ORDER BY n`)})`,
  ];
  if (event) ctes.push(`events AS (${event.sql(bind)})`);
  // the deliveries the event part answers (leased to this process's dispatcher) ride on the first row
  const deliveries = event?.answer ? `, CASE WHEN n = 1 THEN (SELECT coalesce(json_agg(d), '[]') FROM (SELECT ${event.answer('events')}) d) END AS deliveries` : '';
  const r = await q.query<{
    n: number; current: boolean; user_id: number | null; username: string | null; email: string | null; role: string | null; active: boolean; admitted: boolean;
    groups: string[] | null; deliveries?: unknown[] | null;
  }>(
    `WITH ${ctes.join(',\n')}
     SELECT n::int AS n, current, user_id, username, email, role, active, admitted, groups${deliveries} FROM requested`,
    values,
    { prepare: true },
  );
  const result: IssueOutcome[] = requests.map(() => ({ issued: false, reason: 'user_not_found' }));
  let answered: unknown[] = [];
  for (const row of r.rows) {
    if (row.deliveries) answered = row.deliveries;
    result[row.n - 1] = !row.current ? { issued: false, reason: CLIENT_CHANGED }
      : row.active && row.admitted ? { issued: true, user: { id: row.user_id!, username: row.username!, email: row.email!, role: row.role!, groups: row.groups ?? [] } }
      : { issued: false, reason: row.user_id === null ? 'user_not_found' : !row.active ? 'user_inactive' : 'access_denied' };
  }
  const committed = event?.committed;
  if (committed) afterCommitOf(q)(event.answer ? () => committed(answered) : committed as () => void);
  return result;
}

/**
 * Invalidates a user's issued-but-unused SSO tokens (all of them, only those for
 * `scope.clientId`, or only those issued in the browser session `scope.sessionId`), in one
 * statement; returns how many. A logout makes them worthless before they expire.
 */
export async function invalidateUnusedTokens(q: Queryable, userId: number, scope: { clientId?: string; sessionId?: string } = {}): Promise<number> {
  const r = await q.query(
    `UPDATE sso_tokens SET invalidated_at = now()
     WHERE user_id = $1 AND ($2::text IS NULL OR client_id = $2) AND ($3::text IS NULL OR session_id = $3)
       AND used_at IS NULL AND invalidated_at IS NULL AND expires_at > now()
     RETURNING jti`,
    [userId, scope.clientId ?? null, scope.sessionId ?? null],
  );
  return r.rowCount;
}
