import { writeAudit } from '../audit/writer.ts';
import { actorDetails, type Actor } from '../audit/actor.ts';
import { assertPasswordAllowed } from '../auth/password-policy.ts';
import { setMustChangePassword, storePassword } from '../auth/password-queries.ts';
import { hashPassword } from '../auth/passwords.ts';
import { signOutEverywhere } from '../auth/sign-out.ts';
import type { Config } from '../config.ts';
import type { Deps } from '../context.ts';
import type { Queryable } from '../db/db.ts';
import { AppError } from '../http/errors.ts';
import { clearLoginAttempts } from './queries.ts';
import type { UserRecord } from './user.ts';

/*
 * An administrator's password change (command line, admin API, panel; src/users/service.ts)
 * and the sign-out every administrator's change that ends sessions shares.
 */

type Events = Deps['events'];

/**
 * Signs the user out everywhere for an administrator's change, in its transaction, audited
 * with the administrator. A deactivated user too: an inactive user's sessions, access tokens
 * and unused SSO tokens are refused anyway, but they must not come back to life if the user
 * is activated again while they would still be valid.
 */
export const signOutByAdministrator = (tx: Queryable, events: Events, user: { id: number; username: string; email: string }, actor: Actor, reason: string, keepSid?: string) =>
  signOutEverywhere(tx, events, user, {
    ipAddress: actor.ipAddress ?? null, userAgent: actor.userAgent ?? null, via: actor.via, reason, actor: actor.username ?? null, actorUserId: actor.userId ?? null,
  }, keepSid, { renewing: true }); // kept only by a password set, whose caller renews it (renewSessionAfterChange)

/** A password change checked against the policy and hashed, before any transaction. */
export async function preparePassword(
  user: { username: string; email: string }, change: { password?: string; mustChange?: boolean }, config: Pick<Config, 'PASSWORD_MIN_LENGTH' | 'BCRYPT_COST'>,
): Promise<{ hash?: string; mustChange: boolean }> {
  if (change.password === undefined && change.mustChange === undefined) throw new AppError(400, 'usage', 'Give a password or the must-change flag');
  if (change.password !== undefined) assertPasswordAllowed(change.password, config.PASSWORD_MIN_LENGTH, user);
  const hash = change.password === undefined ? undefined : await hashPassword(change.password, config.BCRYPT_COST);
  return { hash, mustChange: change.mustChange ?? false };
}

/** Writes a prepared password change in `tx` (setPassword); the new credentials version when the user was signed out. */
export async function applyPassword(
  tx: Queryable, events: Events, found: UserRecord, prepared: { hash?: string; mustChange: boolean }, actor: Actor, keepSid?: string,
): Promise<string | undefined> {
  const { hash, mustChange } = prepared;
  if (hash !== undefined) {
    await storePassword(tx, found.id, hash, mustChange);
    await clearLoginAttempts(tx, found.username);
  } else if (!(await setMustChangePassword(tx, found.id, mustChange))) {
    return undefined; // the flag already was so: a request that changes nothing writes nothing
  }
  await writeAudit(tx, {
    action: 'user.password_set', outcome: 'success', userId: found.id, username: found.username,
    ipAddress: actor.ipAddress ?? null, userAgent: actor.userAgent ?? null,
    details: { ...actorDetails(actor), password_changed: hash !== undefined, must_change: mustChange },
  });
  if (hash === undefined && !mustChange) return undefined;
  const signedOut = await signOutByAdministrator(tx, events, found, actor, 'password_set', keepSid);
  return signedOut.credentialsVersion;
}
