import { z } from 'zod';
import { writeAudit } from '../audit/writer.ts';
import { assertPasswordAllowed } from '../auth/password-policy.ts';
import { deletePasswordResets } from '../auth/password-queries.ts';
import { hashPassword } from '../auth/passwords.ts';
import { actorDetails, type Actor } from '../audit/actor.ts';
import type { Deps } from '../context.ts';
import { isUniqueViolation, type Queryable } from '../db/db.ts';
import { refuseEditConflicts } from '../http/edit-conflict.ts';
import { AppError } from '../http/errors.ts';
import { linkNameInUse } from '../links/queries.ts';
import {
  clearLoginAttempts, countActiveAdmins, findUserById, findUserByUsername, insertUser, lockActiveAdmins, type ProfileFields, setUserActive, updateUserProfile,
} from './queries.ts';
import type { ShownProfile, UserRecord } from './user.ts';
import { normalizeUsername } from '../validation/username.ts';
import { ROLE } from './roles.ts';
import { applyPassword, preparePassword, signOutByAdministrator } from './password-set.ts';

const USERNAME = /^[\p{L}\p{N}._@+-]{1,64}$/u;

export { ROLE } from './roles.ts';

/** Longest full name, in characters. */
const FULL_NAME_MAX = 200;

/**
 * The same rules for a role and a full name on every path (admin API, panel, command line):
 * `Admin ` is not a role that silently grants nothing, and a name carries no control characters.
 */
function assertRoleAndName(role: string | undefined, fullName: string | undefined): void {
  if (role !== undefined && !ROLE.test(role)) {
    throw new AppError(400, 'invalid_role', 'role: lower-case letters, digits and . _ - (up to 32)');
  }
  // eslint-disable-next-line no-control-regex -- control characters are what is refused
  if (fullName !== undefined && (fullName.length > FULL_NAME_MAX || /[\u0000-\u001f\u007f-\u009f]/.test(fullName))) {
    throw new AppError(400, 'invalid_full_name', `full_name: at most ${FULL_NAME_MAX} characters, no control characters`);
  }
}

const PROFILE_FIELDS = ['email', 'full_name', 'role', 'active'] as const;

/** The audit fields of a change an administrator made to `user` (admin API and panel). */
function byAdministrator(actor: Actor, user: { id: number; username: string }) {
  return {
    userId: user.id,
    username: user.username,
    ipAddress: actor.ipAddress ?? null,
    userAgent: actor.userAgent ?? null,
  };
}

/** User administration shared by the command line and the admin API. */
export function createUserService(deps: Pick<Deps, 'db' | 'config' | 'events'>) {
  const { db, config, events } = deps;

  /** A deactivation: signed out everywhere, every reset link dies (it worked again once the user was active again). */
  const deactivated = async (tx: Queryable, user: { id: number; username: string; email: string }, actor: Actor) => {
    await deletePasswordResets(tx, user.id);
    await signOutByAdministrator(tx, events, user, actor, 'deactivated');
  };

  /**
   * The rule every path that demotes or deactivates keeps (API, panel, command line): after the
   * change, in its transaction (the active administrators' rows locked first: lockActiveAdmins),
   * at least one active administrator is left.
   */
  async function refuseNoAdminLeft(tx: Queryable): Promise<void> {
    if ((await countActiveAdmins(tx)) === 0) {
      throw new AppError(409, 'last_admin', 'This is the last active administrator: make another user an administrator first');
    }
  }

  /** What a profile change is checked for before anything is written. */
  function checkProfile(id: number, patch: Partial<ProfileFields>, actor: Actor): void {
    if (id === actor.userId && ((patch.role !== undefined && patch.role !== 'admin') || patch.active === false)) {
      throw new AppError(409, 'cannot_demote_self', 'You cannot remove your own administrator role or deactivate yourself');
    }
    if (patch.email !== undefined && !z.email().safeParse(patch.email.trim()).success) {
      throw new AppError(400, 'invalid_email', 'email is not a valid address');
    }
    assertRoleAndName(patch.role, patch.full_name);
  }

  /** Writes a checked profile change in `tx` (updateProfile). */
  async function applyProfile(tx: Queryable, id: number, patch: Partial<ProfileFields>, actor: Actor, shown?: ShownProfile): Promise<Partial<ProfileFields>> {
    const mayEndAdmin = (patch.role !== undefined && patch.role !== 'admin') || patch.active === false;
    // Demotions and deactivations take the administrators' rows in turn, so two admins
    // demoting each other at once cannot both go through and leave none.
    if (mayEndAdmin) await lockActiveAdmins(tx);
    const user = await updateUserProfile(tx, id, { ...patch, email: patch.email?.trim() });
    if (!user) throw new AppError(404, 'user_not_found', `No user ${id}`);
    // a field saved from a page that showed another value than the one it replaces (read
    // under the row's lock): two saves at once from one page cannot both go through
    refuseEditConflicts(shown, { email: user.before.email, full_name: user.before.full_name ?? '', role: user.before.role },
      { email: patch.email?.trim(), full_name: patch.full_name, role: patch.role });
    if (mayEndAdmin) await refuseNoAdminLeft(tx);
    const changed: Partial<ProfileFields> = Object.fromEntries(
      PROFILE_FIELDS.filter((k) => user[k] !== user.before[k]).map((k) => [k, user[k]]),
    );
    if (Object.keys(changed).length === 0) return changed;
    const action = changed.active === undefined || Object.keys(changed).length > 1
      ? 'user.update'
      : changed.active ? 'user.activate' : 'user.deactivate';
    await writeAudit(tx, {
      action, outcome: 'success', ...byAdministrator(actor, user),
      details: { ...actorDetails(actor), changed, ...(changed.role !== undefined ? { previous_role: user.before.role } : {}) },
    });
    // a link mailed to the address being replaced must not reset the password afterwards
    if (changed.email !== undefined) await deletePasswordResets(tx, user.id);
    if (changed.active === false) await deactivated(tx, user, actor);
    return changed;
  }

  return {
    /** Creates a user with a bcrypt-hashed password; 409 when the (normalized) name is taken. */
    async createUser(
      input: { username: string; email: string; password: string; role?: string; fullName?: string; active?: boolean },
      actor: Actor,
    ): Promise<UserRecord> {
      const username = normalizeUsername(input.username);
      if (!USERNAME.test(username)) {
        throw new AppError(400, 'invalid_username', 'username: 1-64 letters, digits or . _ @ + -');
      }
      if (!z.email().safeParse(input.email).success) throw new AppError(400, 'invalid_email', 'email is not a valid address');
      assertRoleAndName(input.role, input.fullName);
      assertPasswordAllowed(input.password, config.PASSWORD_MIN_LENGTH, { username, email: input.email });
      const passwordHash = await hashPassword(input.password, config.BCRYPT_COST);
      return db.transaction(async (tx) => {
        if (await findUserByUsername(tx, username)) throw new AppError(409, 'username_taken', `The username ${username} is taken`);
        // a name linked at a client system belongs there to the user who linked it; the new
        // user's tokens would carry the same name (src/links/queries.ts insertPendingLink)
        if (await linkNameInUse(tx, username)) throw new AppError(409, 'username_taken', `The username ${username} is linked to another user at a client system`);
        const user = await insertUser(tx, {
          username,
          email: input.email.trim(),
          role: input.role ?? 'user',
          fullName: input.fullName ?? '',
          passwordHash,
          active: input.active ?? true,
        });
        await writeAudit(tx, {
          action: 'user.create', outcome: 'success', userId: user.id, username,
          ipAddress: actor.ipAddress ?? null, userAgent: actor.userAgent ?? null,
          details: { ...actorDetails(actor), role: user.role, active: user.active },
        });
        return user;
      }).catch((err: unknown) => {
        // created by another request since the check
        if (isUniqueViolation(err)) throw new AppError(409, 'username_taken', `The username ${username} is taken`);
        throw err;
      });
    },

    /**
     * Activates or deactivates a user by username (the command line); deactivating signs them
     * out everywhere (signOutByAdministrator). As on the API and the panel, the last active
     * administrator is not deactivated (409 last_admin), and a change that changes nothing
     * is not audited.
     */
    async setActive(rawUsername: string, active: boolean, actor: Actor): Promise<UserRecord> {
      const username = normalizeUsername(rawUsername);
      return db.transaction(async (tx) => {
        if (!active) await lockActiveAdmins(tx);
        const user = await setUserActive(tx, username, active);
        if (!user) throw new AppError(404, 'user_not_found', `No user ${username}`);
        if (!active && user.role === 'admin') await refuseNoAdminLeft(tx);
        const { was_active: _was, ...record } = user;
        if (user.was_active === active) return record;
        await writeAudit(tx, {
          action: active ? 'user.activate' : 'user.deactivate', outcome: 'success', userId: user.id, username,
          ipAddress: actor.ipAddress ?? null, userAgent: actor.userAgent ?? null, details: actorDetails(actor),
        });
        if (!active) await deactivated(tx, user, actor);
        return record;
      });
    },

    /**
     * An administrator sets a user's password (`user` by username or id) and/or the
     * must-change flag. A new password passes the one policy, clears the lockout and kills
     * reset links; a new password or `mustChange: true` signs the user out everywhere
     * (sessions, access tokens, unused SSO tokens, user.logout); `keepSid`, the session of an
     * administrator setting their own password, is not counted as ended: the caller renews it
     * (renewSessionAfterChange). Audited as user.password_set.
     */
    async setPassword(
      user: { username: string } | { id: number },
      change: { password?: string; mustChange?: boolean },
      actor: Actor,
      keepSid?: string,
    ): Promise<UserRecord & { must_change_password: boolean; credentialsVersion?: string }> {
      const found = 'id' in user ? await findUserById(db, user.id) : await findUserByUsername(db, normalizeUsername(user.username));
      if (!found) throw new AppError(404, 'user_not_found', `No user ${'id' in user ? user.id : normalizeUsername(user.username)}`);
      const prepared = await preparePassword(found, change, config);
      const credentialsVersion = await db.transaction((tx) => applyPassword(tx, events, found, prepared, actor, keepSid));
      return { ...found, must_change_password: prepared.mustChange, credentialsVersion };
    },

    /**
     * The admin API's PATCH: profile fields (as updateProfile) and the password or must-change
     * flag (as setPassword), all or nothing: everything is checked, and the password hashed,
     * before anything is written, and both are written in one transaction.
     */
    async update(
      id: number, profile: Partial<ProfileFields>, change: { password?: string; mustChange?: boolean } | null, actor: Actor,
    ): Promise<void> {
      checkProfile(id, profile, actor);
      const found = await findUserById(db, id);
      if (!found) throw new AppError(404, 'user_not_found', `No user ${id}`);
      // the policy compares the password with the address it will have
      const prepared = change ? await preparePassword({ ...found, email: profile.email?.trim() ?? found.email }, change, config) : null;
      await db.transaction(async (tx) => {
        const changed = Object.keys(profile).length > 0 ? await applyProfile(tx, id, profile, actor) : {};
        // the sign-out's user.logout event names the address the user has now
        if (prepared) await applyPassword(tx, events, changed.email !== undefined ? { ...found, email: changed.email } : found, prepared, actor);
      });
    },

    /**
     * Changes email, full name, role or the active flag (by id, for the admin API and panel).
     * An administrator cannot demote or deactivate themselves: that would lock the last admin
     * out of the panel. Only what really changed is audited (`changed`, with `previous_role`
     * when the role did), as client changes are (migration 0009); a change that changes nothing
     * writes nothing. Answers the fields that changed, with their new values.
     */
    async updateProfile(id: number, patch: Partial<ProfileFields>, actor: Actor, shown?: ShownProfile): Promise<Partial<ProfileFields>> {
      checkProfile(id, patch, actor);
      return db.transaction((tx) => applyProfile(tx, id, patch, actor, shown));
    },

    /** Clears a user's failed-login counter and lock (by id, for the admin API and panel); audited when there was one. */
    async unlockUser(user: { id: number; username: string }, actor: Actor): Promise<void> {
      await db.transaction(async (tx) => {
        if (!(await clearLoginAttempts(tx, normalizeUsername(user.username)))) return;
        await writeAudit(tx, { action: 'user.unlock', outcome: 'success', ...byAdministrator(actor, user), details: actorDetails(actor) });
      });
    },

    /**
     * Clears the lockout of a login name, whether or not such a user exists (failures are
     * counted, and names locked, for unknown names too); `exists` says which, `cleared` whether
     * there was anything to clear. The audit entry, written only then, carries the user's id.
     */
    async unlock(rawUsername: string, actor: Actor): Promise<{ username: string; exists: boolean; cleared: boolean }> {
      const username = normalizeUsername(rawUsername);
      return db.transaction(async (tx) => {
        const user = await findUserByUsername(tx, username);
        if (!(await clearLoginAttempts(tx, username))) return { username, exists: user !== null, cleared: false };
        await writeAudit(tx, {
          action: 'user.unlock', outcome: 'success', userId: user?.id ?? null, username,
          ipAddress: actor.ipAddress ?? null, userAgent: actor.userAgent ?? null,
          details: { ...actorDetails(actor), ...(user ? {} : { no_such_user: true }) },
        });
        return { username, exists: user !== null, cleared: true };
      });
    },
  };
}

export type UserService = ReturnType<typeof createUserService>;
