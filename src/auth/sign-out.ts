import { writeAudit } from '../audit/writer.ts';
import type { Queryable } from '../db/db.ts';
import { revokeAccountTokens } from '../oidc/queries.ts';
import { invalidateUnusedTokens } from '../sso/queries.ts';
import type { EventRecorder } from '../webhooks/events.ts';
import { touchCredentials } from './password-queries.ts';
import { deleteUserSession, deleteUserSessions } from './session-queries.ts';
import { deletePendingTotp } from './totp-pending-queries.ts';

/** The client_system of events this service causes itself (sign-ins and sign-outs at this service). */
export const OWN_SYSTEM = 'auth-service';

/**
 * Enqueues user.logout for `user` (sent once the caller's transaction commits): every way a
 * session ends says so the same way. `clientSystem`: the client system that asked, else this service.
 */
export async function recordLogout(
  tx: Queryable, events: EventRecorder, user: { id: number; email: string | null }, ipAddress: string | null, clientSystem = OWN_SYSTEM,
): Promise<void> {
  await events.record(tx, 'user.logout', { user_id: user.id, email: user.email ?? '', ip_address: ipAddress ?? '', client_system: clientSystem });
}

/** Who asked for a sign-out everywhere, for the audit log. */
export interface SignOutContext {
  ipAddress: string | null;
  userAgent: string | null;
  /** The channel (api, page, admin_api, cli ...). */
  via: string;
  /** Why: password_change, password_reset, password_set, revoke_all, deactivated. */
  reason: string;
  /** An administrator doing it for the user: their name and id. */
  actor?: string | null;
  actorUserId?: number | null;
}

/**
 * Signs a user out everywhere, inside the caller's transaction: every session ends (but
 * `exceptSid`, the caller's own when it stays signed in), access tokens issued until now are
 * refused, unused SSO tokens are invalidated, two-factor setups not yet confirmed are forgotten
 * (the kept session starts again if it was setting up), and user.logout is audited and enqueued as a
 * logout does (the event goes out once the caller's transaction commits). Answers the new
 * version of the user's credentials (a session the caller starts afterwards carries it).
 *
 * `renewing`: the caller's session (`exceptSid`) is renewed once this commits (a password
 * change's own, renewSessionAfterChange): its row goes now too, not counted as ended, so that
 * were the renewal lost (the database gone just after the commit), the session would not live
 * on with the credentials it was signed in with.
 */
export async function signOutEverywhere(
  tx: Queryable,
  events: EventRecorder,
  user: { id: number; username: string; email: string },
  ctx: SignOutContext,
  exceptSid?: string,
  options: { renewing?: boolean } = {},
): Promise<{ endedSessions: number; invalidatedTokens: number; credentialsVersion: string }> {
  // the user's row first: a sign-in that read the old version and is about to save its
  // session waits for this transaction and then finds the version moved (saveSignedInSession);
  // one that saved it before is among the sessions deleted next
  const credentialsVersion = await touchCredentials(tx, user.id);
  const endedSessions = await deleteUserSessions(tx, user.id, exceptSid);
  if (exceptSid !== undefined && options.renewing) await deleteUserSession(tx, user.id, exceptSid);
  const invalidatedTokens = await invalidateUnusedTokens(tx, user.id);
  await deletePendingTotp(tx, user.id);
  // OpenID Connect: the user's refresh and access tokens and grants go with the sessions (their
  // provider sessions end, with a back-channel logout, once user.logout below has committed)
  const revokedOidcTokens = await revokeAccountTokens(tx, String(user.id));
  await writeAudit(tx, {
    action: 'user.logout', outcome: 'success', userId: user.id, username: user.username,
    ipAddress: ctx.ipAddress, userAgent: ctx.userAgent,
    details: {
      via: ctx.via, reason: ctx.reason, ended_sessions: endedSessions, invalidated_tokens: invalidatedTokens, revoked_oidc_tokens: revokedOidcTokens,
      ...(ctx.actor ? { actor: ctx.actor, actor_user_id: ctx.actorUserId ?? null } : {}),
    },
  });
  await recordLogout(tx, events, user, ctx.ipAddress);
  return { endedSessions, invalidatedTokens, credentialsVersion };
}
