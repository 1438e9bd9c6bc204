import type { Actor } from '../audit/actor.ts';
import type { TwoFactor } from '../auth/two-factor.ts';
import type { Db } from '../db/db.ts';
import { AppError } from '../http/errors.ts';
import type { ListedLink, LinkService } from '../links/service.ts';
import type { UserRecord } from '../users/user.ts';
import type { UserService } from '../users/service.ts';
import type { ShownProfile } from '../users/user.ts';
import { type AdminUserRow, findAdminUserRow, searchAdminUsers } from './queries.ts';

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
  status: ListedLink['status'];
  linked_at: string;
  confirmed_at: string | null;
  confirmed_by: ListedLink['confirmed_by'];
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

/** User administration for the admin API and panel (by id; the CLI works by username). */
export function createUserAdmin(deps: { db: Db; users: UserService; links: Pick<LinkService, 'list'>; twoFactor: Pick<TwoFactor, 'reset'> }) {
  const { db, users, links, twoFactor } = deps;

  async function getOr404(id: number): Promise<AdminUser> {
    const row = Number.isSafeInteger(id) ? await findAdminUserRow(db, id) : null;
    const user = row ? toAdminUser(row) : null;
    if (!user) throw new AppError(404, 'user_not_found', `No user ${id}`);
    return user;
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
      const rows = await links.list({ userId: id }, 500);
      return rows
        .sort((a, b) => a.client_name.toLowerCase().localeCompare(b.client_name.toLowerCase()) || a.client_id.localeCompare(b.client_id))
        .map((l) => ({
          client_id: l.client_id, client_name: l.client_name, external_username: l.external_username, status: l.status,
          linked_at: l.requested_at, confirmed_at: l.confirmed_at, confirmed_by: l.confirmed_by,
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

    /**
     * The panel's profile form: sets email, full name and role. Answers the names of the
     * fields that really changed (none: nothing was written, UserService.updateProfile).
     */
    async editProfile(id: number, profile: { email?: string; full_name?: string; role?: string }, actor: Actor, shown?: ShownProfile): Promise<string[]> {
      return Object.keys(await users.updateProfile(id, profile, actor, shown));
    },

    /**
     * Changes the profile and/or the password, all or nothing (UserService.update). An
     * administrator cannot ask themselves to change their own password at the next sign-in
     * (as in the panel: 409 cannot_require_own_change).
     */
    async update(
      id: number,
      patch: { email?: string; full_name?: string; role?: string; active?: boolean; password?: string; must_change_password?: boolean },
      actor: Actor,
    ): Promise<AdminUser> {
      const { password, must_change_password: mustChange, ...profile } = patch;
      if (id === actor.userId && mustChange === true) {
        throw new AppError(409, 'cannot_require_own_change', 'You cannot require yourself to change your own password at the next sign-in. Set it without that flag, or change it at /account/password.');
      }
      // the password never reaches the profile's audit entry (`changed`)
      const change = password !== undefined || mustChange !== undefined ? { password, mustChange } : null;
      await users.update(id, profile, change, actor);
      return getOr404(id);
    },

    /**
     * Sets a user's password (and/or the must-change flag); see UserService.setPassword
     * (`keepSid` too). With the new version of the user's credentials when they were signed out.
     */
    async setPassword(
      id: number, change: { password?: string; mustChange?: boolean }, actor: Actor, keepSid?: string,
    ): Promise<{ user: AdminUser; credentialsVersion?: string }> {
      const { credentialsVersion } = await users.setPassword({ id }, change, actor, keepSid);
      return { user: await getOr404(id), credentialsVersion };
    },

    /** Clears the user's failed-login counter and lock. */
    async unlock(id: number, actor: Actor): Promise<AdminUser> {
      await users.unlockUser(await getOr404(id), actor);
      return getOr404(id);
    },

    /** Turns two-factor off (secret and recovery codes forgotten), for a user who lost their device. */
    async resetTwoFactor(id: number, actor: Actor): Promise<AdminUser> {
      await twoFactor.reset(await getOr404(id), actor);
      return getOr404(id);
    },
  };
}

export type UserAdmin = ReturnType<typeof createUserAdmin>;
