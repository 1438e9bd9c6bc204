import { actorDetails, type Actor } from '../audit/actor.ts';
import { writeAudit } from '../audit/writer.ts';
import { GROUP_NAME } from '../clients/access-rule.ts';
import type { ClientRecord } from '../clients/client.ts';
import type { Deps } from '../context.ts';
import type { Queryable } from '../db/db.ts';
import { AppError } from '../http/errors.ts';
import { findUserById } from '../users/queries.ts';
import {
  accessOf, addMember, admittedCounts, clientsForUser, deleteGroup, groupsOfUser, insertGroup, listGroups, membersOf, removeMember,
} from './queries.ts';

/** A group as the CLI, the API and the panel show it. */
export interface PublicGroup {
  name: string;
  members: number;
  created_at: string;
}

/** A group name as given: trimmed, or 400 invalid_group. */
export function checkGroupName(raw: string): string {
  const name = raw.trim();
  if (!GROUP_NAME.test(name)) throw new AppError(400, 'invalid_group', 'A group name is 1-64 lower-case letters, digits, . _ or -, starting with a letter or digit');
  return name;
}

/**
 * Whether the user (active) may use the client by its access rule (docs/access.md), read from
 * the database now: the client's current row and the user's current groups. The one check for
 * every flow that hands a user a token outside the SSO statements (which hold it themselves):
 * OpenID Connect's authorization, any later sign-in path.
 */
export async function mayUseClient(q: Queryable, userId: number, clientId: string): Promise<boolean> {
  return (await accessOf(q, userId, clientId)).admitted;
}

/**
 * The same as a use case: returns the user's groups (for `rolesOf`) when admitted, else throws
 * 403 access_denied with "You do not have access to NAME" (an OAuth flow answers
 * `error=access_denied` to the redirect URI instead of the page).
 */
export async function assertClientAccess(q: Queryable, userId: number, client: Pick<ClientRecord, 'client_id' | 'client_name'>): Promise<{ groups: string[] }> {
  const access = await accessOf(q, userId, client.client_id);
  if (!access.admitted) throw new AppError(403, 'access_denied', `You do not have access to ${client.client_name}`);
  return { groups: access.groups };
}

/**
 * Whether a sign-in whose checks passed may go on to this client system by its access rule,
 * read now; a refusal is audited as a failed `action` (reason access_denied, with `details`),
 * and the caller makes no session and writes no user.login. The one check of the sign-in paths:
 * the password (src/auth/service.ts), the passkey (src/passkeys/service.ts) and a browser
 * signed in already at an OpenID Connect authorization (src/oidc/service.ts).
 */
export async function admitSignIn(
  q: Queryable, user: { id: number; username: string }, clientId: string,
  entry: { action: 'user.login' | 'oidc.sign_in'; ipAddress: string | null; userAgent: string | null; details: Record<string, unknown> },
): Promise<boolean> {
  if (await mayUseClient(q, user.id, clientId)) return true;
  await writeAudit(q, {
    action: entry.action, outcome: 'failure', userId: user.id, username: user.username, clientId,
    ipAddress: entry.ipAddress, userAgent: entry.userAgent, details: { ...entry.details, reason: 'access_denied' },
  });
  return false;
}

/** Groups and their members: administration, audited (group.create, group.delete, user.group_add, user.group_remove). */
export function createAccessService(deps: Pick<Deps, 'db'>) {
  const { db } = deps;
  const publicGroup = (g: { name: string; members: number; created_at: Date }): PublicGroup => ({
    name: g.name, members: g.members, created_at: new Date(g.created_at).toISOString(),
  });
  const ctxOf = (actor: Actor) => ({ ipAddress: actor.ipAddress ?? null, userAgent: actor.userAgent ?? null });

  /** Adds or removes a membership, audited when it changed; 404 for an unknown user or group. */
  const changeMembership = async (userId: number, rawName: string, add: boolean, actor: Actor) => {
    const name = checkGroupName(rawName);
    return db.transaction(async (tx) => {
      const user = await findUserById(tx, userId);
      if (!user) throw new AppError(404, 'user_not_found', `No user ${userId}`);
      const outcome = add ? await addMember(tx, userId, name) : await removeMember(tx, userId, name);
      if (outcome === 'no_group') throw new AppError(404, 'group_not_found', `No group ${name}`);
      if (outcome === 'no_user') throw new AppError(404, 'user_not_found', `No user ${userId}`);
      const changed = outcome === 'added' || outcome === 'removed';
      if (changed) {
        await writeAudit(tx, {
          action: add ? 'user.group_add' : 'user.group_remove', outcome: 'success', userId: user.id, username: user.username,
          ...ctxOf(actor), details: { ...actorDetails(actor), group: name },
        });
      }
      return { user_id: user.id, username: user.username, group: name, member: add, changed };
    });
  };

  return {
    listGroups: async (): Promise<PublicGroup[]> => (await listGroups(db)).map(publicGroup),

    /** One group with its members; 404 group_not_found. */
    async group(rawName: string): Promise<PublicGroup & { users: Array<{ id: number; username: string }> }> {
      const name = checkGroupName(rawName);
      const found = (await listGroups(db)).find((g) => g.name === name);
      const users = found ? await membersOf(db, name) : null;
      if (!found || !users) throw new AppError(404, 'group_not_found', `No group ${name}`);
      return { ...publicGroup(found), users };
    },

    /** Creates a group; 409 group_exists when the name is taken. */
    async createGroup(rawName: string, actor: Actor): Promise<PublicGroup> {
      const name = checkGroupName(rawName);
      return db.transaction(async (tx) => {
        const created = await insertGroup(tx, name);
        if (!created) throw new AppError(409, 'group_exists', `Group ${name} already exists`);
        await writeAudit(tx, { action: 'group.create', outcome: 'success', ...ctxOf(actor), details: { ...actorDetails(actor), group: name } });
        return publicGroup(created);
      });
    },

    /**
     * Deletes a group and its memberships; 404 group_not_found; 409 group_in_use while a client's
     * rule names it (the database refuses: the client would silently admit fewer, or everyone).
     */
    async deleteGroup(rawName: string, actor: Actor): Promise<{ name: string; members: number }> {
      const name = checkGroupName(rawName);
      try {
        return await db.transaction(async (tx) => {
          const gone = await deleteGroup(tx, name);
          if (!gone) throw new AppError(404, 'group_not_found', `No group ${name}`);
          await writeAudit(tx, { action: 'group.delete', outcome: 'success', ...ctxOf(actor), details: { ...actorDetails(actor), group: name, members: gone.members } });
          return { name, members: gone.members };
        });
      } catch (err) {
        if ((err as { code?: unknown }).code === '23503') throw new AppError(409, 'group_in_use', (err as Error).message);
        throw err;
      }
    },

    addToGroup: (userId: number, name: string, actor: Actor) => changeMembership(userId, name, true, actor),
    removeFromGroup: (userId: number, name: string, actor: Actor) => changeMembership(userId, name, false, actor),

    /** A user's groups, sorted. */
    groupsOf: (userId: number) => groupsOfUser(db, userId),
    /** The active clients the user may use (listed or not), by name. */
    clientsFor: (userId: number) => clientsForUser(db, userId),
    /** How many active users each client's rule admits, by client id. */
    admittedCounts: () => admittedCounts(db),
    mayUseClient: (userId: number, clientId: string) => mayUseClient(db, userId, clientId),
    assertClientAccess: (userId: number, client: Pick<ClientRecord, 'client_id' | 'client_name'>) => assertClientAccess(db, userId, client),
  };
}

export type AccessService = ReturnType<typeof createAccessService>;
