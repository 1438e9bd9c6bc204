import { z } from 'zod';
import { writeAudit } from '../audit/writer.ts';
import { setTotpEnabled } from '../auth/queries.ts';
import type { Actor } from '../audit/actor.ts';
import type { Db } from '../db/db.ts';
import { type AdminUserRow, findAdminUserRow, searchAdminUsers, updateUserProfile } from './queries.ts';
import { AppError } from '../http/errors.ts';
import { type LinkProver, type LinkStatus, listLinks } from '../links/queries.ts';
import { clearLoginAttempts, type UserRecord } from '../users/queries.ts';
import type { UserService } from '../users/service.ts';
import { normalizeUsername } from '../users/username.ts';

/** A user as administrators see it: the public user (docs/contract.md, "Answers") plus active, locked_until, totp_enabled. */
export type AdminUser = UserRecord & {
  /** The next sign-in must choose a new password. */
  must_change_password: boolean;
  /** When the current lockout ends (ISO), or null when not locked. */
  locked_until: string | null;
  created_at: string;
};

/** A client system linked to a user on the dashboard. */
export interface UserLink {
  client_id: string;
  client_name: string;
  external_username: string;
  /** Only an active (proven) link's name goes into tokens. */
  status: LinkStatus;
  linked_at: string;
  confirmed_at: string | null;
  confirmed_by: LinkProver | null;
}

function toAdminUser(r: AdminUserRow): AdminUser {
  return {
    id: r.id,
    username: r.username,
    email: r.email,
    role: r.role,
    full_name: r.full_name,
    active: r.active,
    locked_until: r.locked_until ? new Date(r.locked_until).toISOString() : null,
    totp_enabled: r.totp_enabled,
    must_change_password: r.must_change_password,
    created_at: new Date(r.created_at).toISOString(),
  };
}

/** `%` and `_` in a search are meant literally. */
function likePattern(q: string): string {
  return `%${q.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

function auditOf(actor: Actor, user: { id: number; username: string }) {
  return {
    userId: user.id,
    username: user.username,
    ipAddress: actor.ipAddress ?? null,
    userAgent: actor.userAgent ?? null,
  };
}

function actorDetails(actor: Actor): Record<string, unknown> {
  return { via: actor.via, actor_user_id: actor.userId ?? null, actor: actor.username ?? null };
}

export const ROLE = /^[a-z][a-z0-9_.-]{0,31}$/;

/** User administration for the admin API and panel (by id; the CLI works by username). */
export function createUserAdmin(deps: { db: Db; users: UserService }) {
  const { db, users } = deps;

  async function getOr404(id: number): Promise<AdminUser> {
    const row = Number.isSafeInteger(id) ? await findAdminUserRow(db, id) : null;
    const user = row ? toAdminUser(row) : null;
    if (!user) throw new AppError(404, 'user_not_found', `No user ${id}`);
    return user;
  }

  /**
   * Changes email, full name, role or the active flag. An administrator cannot demote or
   * deactivate themselves: that would lock the last admin out of the panel.
   */
  async function updateProfile(id: number, patch: { email?: string; full_name?: string; role?: string; active?: boolean }, actor: Actor): Promise<void> {
    if (id === actor.userId && ((patch.role !== undefined && patch.role !== 'admin') || patch.active === false)) {
      throw new AppError(409, 'cannot_demote_self', 'You cannot remove your own administrator role or deactivate yourself');
    }
    if (patch.email !== undefined && !z.email().safeParse(patch.email.trim()).success) {
      throw new AppError(400, 'invalid_email', 'email is not a valid address');
    }
    if (patch.role !== undefined && !ROLE.test(patch.role)) {
      throw new AppError(400, 'invalid_role', 'role: lower-case letters, digits and . _ - (up to 32)');
    }
    await db.transaction(async (tx) => {
      const user = await updateUserProfile(tx, id, { ...patch, email: patch.email?.trim() });
      if (!user) throw new AppError(404, 'user_not_found', `No user ${id}`);
      const changed = Object.fromEntries(Object.entries(patch).filter(([, v]) => v !== undefined));
      const action = patch.active === undefined || Object.keys(changed).length > 1
        ? 'user.update'
        : patch.active ? 'user.activate' : 'user.deactivate';
      await writeAudit(tx, { action, outcome: 'success', ...auditOf(actor, user), details: { ...actorDetails(actor), changed } });
    });
  }

  return {
    /** Users matching `q` in username, email or full name (case-insensitive), newest first. */
    async search(q: string | undefined, limit = 100): Promise<AdminUser[]> {
      const term = q?.trim();
      return (await searchAdminUsers(db, term ? likePattern(term) : null, limit)).map(toAdminUser);
    },

    get: getOr404,

    /** The client systems a user linked on the dashboard, with each link's state. */
    async links(id: number): Promise<UserLink[]> {
      const rows = await listLinks(db, { userId: id }, 500);
      return rows
        .sort((a, b) => a.client_name.toLowerCase().localeCompare(b.client_name.toLowerCase()) || a.client_id.localeCompare(b.client_id))
        .map((l) => ({
          client_id: l.client_id, client_name: l.client_name, external_username: l.external_username, status: l.status,
          linked_at: new Date(l.created_at).toISOString(), confirmed_at: l.confirmed_at ? new Date(l.confirmed_at).toISOString() : null, confirmed_by: l.confirmed_by,
        }));
    },

    /** Creates a user (the shared user service checks name, email and password). */
    async create(
      input: { username: string; email: string; password: string; role?: string; full_name?: string; active?: boolean },
      actor: Actor,
    ): Promise<AdminUser> {
      const created = await users.createUser(
        { username: input.username, email: input.email, password: input.password, role: input.role, fullName: input.full_name, active: input.active },
        actor,
      );
      return getOr404(created.id);
    },

    /** Changes the profile (updateProfile) and/or the password (UserService.setPassword). */
    async update(
      id: number,
      patch: { email?: string; full_name?: string; role?: string; active?: boolean; password?: string; must_change_password?: boolean },
      actor: Actor,
    ): Promise<AdminUser> {
      const { password, must_change_password: mustChange, ...profile } = patch;
      if (Object.keys(profile).length > 0) await updateProfile(id, profile, actor);
      // the password never reaches the profile's audit entry (`changed`)
      if (password !== undefined || mustChange !== undefined) await users.setPassword({ id }, { password, mustChange }, actor);
      return getOr404(id);
    },

    /** Sets a user's password (and/or the must-change flag); see UserService.setPassword. */
    async setPassword(id: number, change: { password?: string; mustChange?: boolean }, actor: Actor): Promise<AdminUser> {
      await users.setPassword({ id }, change, actor);
      return getOr404(id);
    },

    /** Clears the user's failed-login counter and lock. */
    async unlock(id: number, actor: Actor): Promise<AdminUser> {
      const user = await getOr404(id);
      await db.transaction(async (tx) => {
        await clearLoginAttempts(tx, normalizeUsername(user.username));
        await writeAudit(tx, { action: 'user.unlock', outcome: 'success', ...auditOf(actor, user), details: actorDetails(actor) });
      });
      return getOr404(id);
    },

    /** Turns two-factor off (secret and recovery codes forgotten), for a user who lost their device. */
    async resetTwoFactor(id: number, actor: Actor): Promise<AdminUser> {
      const user = await getOr404(id);
      await db.transaction(async (tx) => {
        await setTotpEnabled(tx, id, false);
        await writeAudit(tx, {
          action: 'user.2fa_reset', outcome: 'success', ...auditOf(actor, user),
          details: { ...actorDetails(actor), was_enabled: user.totp_enabled },
        });
      });
      return getOr404(id);
    },
  };
}

export type UserAdmin = ReturnType<typeof createUserAdmin>;
