import { createHash } from 'node:crypto';
import { writeAudit } from '../audit/writer.ts';
import type { Deps } from '../context.ts';
import { invalidateUnusedTokens } from '../sso/queries.ts';
import type { UserRecord } from '../users/user.ts';
import { deleteUserSession, listUserSessions } from './session-queries.ts';
import { recordLogout, signOutEverywhere } from './sign-out.ts';

/** A session as its user sees it. `id` is a digest of the session id, never the id itself. */
export interface UserSessionView {
  id: string;
  current: boolean;
  ip_address: string | null;
  user_agent: string | null;
  device: string;
  signed_in_at: string;
  last_seen_at: string;
  expires_at: string;
}

/** Who asked, for the audit log. */
export interface SessionContext {
  ipAddress: string;
  userAgent: string | null;
  via: 'api' | 'page';
}

/** The public handle of a session: enough to name it, useless as a cookie. */
function sessionHandle(sid: string): string {
  return createHash('sha256').update(sid).digest('base64url').slice(0, 22);
}

/** "Firefox on Linux" from a User-Agent header, or the start of the header when nothing is recognised. */
export function describeDevice(userAgent: string | null | undefined): string {
  const ua = userAgent ?? '';
  if (!ua) return 'Unknown device';
  const browser = [['Edg/', 'Edge'], ['OPR/', 'Opera'], ['Firefox/', 'Firefox'], ['Chrome/', 'Chrome'], ['Safari/', 'Safari'], ['curl/', 'curl']]
    .find(([needle]) => ua.includes(needle))?.[1];
  const os = [['Windows', 'Windows'], ['Android', 'Android'], ['iPhone', 'iOS'], ['iPad', 'iPadOS'], ['Mac OS X', 'macOS'], ['Linux', 'Linux']]
    .find(([needle]) => ua.includes(needle))?.[1];
  if (browser && os) return `${browser} on ${os}`;
  return browser ?? os ?? ua.slice(0, 60);
}

/** A user's sessions: list them, end one, end all the others (sign out everywhere). */
export function createSessionService(deps: Pick<Deps, 'db' | 'events'>) {
  const { db, events } = deps;
  return {
    /** The user's live sessions, the current one (`currentSid`) marked. */
    async list(userId: number, currentSid?: string): Promise<UserSessionView[]> {
      const rows = await listUserSessions(db, userId);
      return rows.map((row) => {
        const sess = (typeof row.sess === 'string' ? JSON.parse(row.sess) : row.sess) as { ipAddress?: string; userAgent?: string };
        return {
          id: sessionHandle(row.sid),
          current: row.sid === currentSid,
          ip_address: sess.ipAddress ?? null,
          user_agent: sess.userAgent ?? null,
          device: describeDevice(sess.userAgent),
          signed_in_at: new Date(row.created_at).toISOString(),
          last_seen_at: new Date(row.last_seen_at).toISOString(),
          expires_at: new Date(row.expire).toISOString(),
        };
      });
    },

    /**
     * Ends the user's session with this handle, as a sign-out of that browser: its unused SSO
     * tokens are invalidated (the current browser's: all the user's unused tokens, as
     * /sso/logout does), the end is audited and user.logout sent. Returns whether it was the
     * current one, or null when there is none.
     */
    async endOne(user: UserRecord, handle: string, ctx: SessionContext, currentSid?: string): Promise<{ current: boolean } | null> {
      const row = (await listUserSessions(db, user.id)).find((r) => sessionHandle(r.sid) === handle);
      if (!row) return null;
      const current = row.sid === currentSid;
      const ended = await db.transaction(async (tx) => {
        if (!(await deleteUserSession(tx, user.id, row.sid))) return false;
        // a token being issued in the session holds its row (lockLiveSession), so has committed by now and is seen here
        const invalidatedTokens = await invalidateUnusedTokens(tx, user.id, current ? {} : { sessionId: row.sid });
        await writeAudit(tx, {
          action: 'user.session_end', outcome: 'success', userId: user.id, username: user.username,
          ipAddress: ctx.ipAddress, userAgent: ctx.userAgent, details: { via: ctx.via, current, invalidated_tokens: invalidatedTokens },
        });
        await recordLogout(tx, events, user, ctx.ipAddress);
        return true;
      });
      return ended ? { current } : null;
    },

    /**
     * Signs the user out everywhere but `keepSid` (the caller's own session, when it stays):
     * other sessions end, access tokens issued so far are refused, unused SSO tokens are
     * invalidated, user.logout is sent.
     */
    async endAll(user: UserRecord, ctx: SessionContext, keepSid?: string): Promise<{ ended_sessions: number; invalidated_tokens: number }> {
      const result = await db.transaction((tx) => signOutEverywhere(tx, events, user, { ...ctx, reason: 'revoke_all' }, keepSid));
      return { ended_sessions: result.endedSessions, invalidated_tokens: result.invalidatedTokens };
    },
  };
}

export type SessionService = ReturnType<typeof createSessionService>;
