import { writeAudit } from '../audit/writer.ts';
import { actorDetails, type Actor } from '../audit/actor.ts';
import { isUniqueViolation, type Db, type Queryable } from '../db/db.ts';
import { AppError } from '../http/errors.ts';
import { invalidateUnusedTokens } from '../sso/queries.ts';
import { findUserById } from '../users/queries.ts';
import {
  activateLink, clientIsActive, dashboardSystems, deleteLink, findLink, insertPendingLink, isSameName, linkNameHeldByAnother,
  type LinkListRow, type LinkRow, type LinkStatus, listLinks,
} from './queries.ts';

/** Where a user's or a client's request came from, for the audit log. */
export interface LinkContext {
  ipAddress: string;
  userAgent: string | null;
}

/** A link as the APIs show it. */
export interface PublicLink {
  user_id: number;
  client_id: string;
  external_username: string;
  status: LinkStatus;
  requested_at: string;
  confirmed_at: string | null;
  confirmed_by: 'client' | 'admin' | null;
}

/** A link in a listing: with the account's username and the client's name. */
export interface ListedLink extends PublicLink {
  username: string;
  client_name: string;
}

/**
 * The answer to a proof (a client's confirmation, an administrator's approval) of a claim whose
 * name belongs to another account at that client: its active link, or its own username. Only
 * provers hear it; the claimant is never told (a claim is accepted as pending whoever holds the
 * name, so claiming reveals nothing).
 */
export const NAME_TAKEN = 'That username at this system already belongs to another account (its username, or its proven link); this claim cannot be confirmed.';

/**
 * A claim whose name is another user's own username (their tokens carry the name at the
 * client without any link), or another user's active link there, is not proven: 409
 * link_name_taken.
 */
async function refuseNameOfAnother(tx: Queryable, userId: number, clientId: string): Promise<void> {
  if (await linkNameHeldByAnother(tx, userId, clientId)) throw nameTaken();
}

const nameTaken = () => new AppError(409, 'link_name_taken', NAME_TAKEN);

/**
 * Runs a proof's transaction; a unique violation of the active-name index (another user's
 * claim of the name proven at the same moment, after this one's check) is 409 link_name_taken.
 */
async function proving<T>(work: Promise<T>): Promise<T> {
  try {
    return await work;
  } catch (err) {
    if (isUniqueViolation(err)) throw nameTaken();
    throw err;
  }
}

/** A link as the APIs answer it: times as ISO strings. */
export function toPublicLink(l: LinkRow): PublicLink {
  return {
    user_id: l.user_id,
    client_id: l.client_id,
    external_username: l.external_username,
    status: l.status,
    requested_at: new Date(l.created_at).toISOString(),
    confirmed_at: l.confirmed_at ? new Date(l.confirmed_at).toISOString() : null,
    confirmed_by: l.confirmed_by,
  };
}

function toListedLink(l: LinkListRow): ListedLink {
  return { ...toPublicLink(l), username: l.username, client_name: l.client_name };
}

/**
 * Dashboard links (docs/dashboard-links.md): a user claims a username at a client system; the
 * claim is pending until the client system (with its credentials) or an administrator proves
 * it, and only a proven (active) link's name goes into a token. A name belongs to one user per
 * client at most, decided when a claim is proven: claims hold nothing. Every change is audited; withdrawing or revoking a link also invalidates
 * the user's unused tokens for that client, so its name stops at once.
 */
export function createLinkService(deps: { db: Db }) {
  const { db } = deps;

  async function usernameOf(userId: number): Promise<{ id: number; username: string }> {
    const user = await findUserById(db, userId);
    if (!user) throw new AppError(404, 'user_not_found', `No user ${userId}`);
    return user;
  }

  return {
    /** Active client systems with the user's link and its state, for the dashboard. */
    dashboard: (userId: number) => dashboardSystems(db, userId),

    /** The user's link at a client (any state), or null. Only an active one's name goes into tokens. */
    find: (userId: number, clientId: string) => findLink(db, userId, clientId),

    /**
     * Claims `name` at an active client system as pending. The same name again changes
     * nothing (an active link stays active); another name replaces the link, pending again.
     * Accepted whoever holds or has claimed the name, with the same answer: a claim holds
     * nothing and proves nothing, and its proof is refused when the name is another
     * account's (409 link_name_taken to the client or administrator, never to the claimant).
     */
    async request(user: { id: number; username: string }, clientId: string, name: string, ctx: LinkContext): Promise<{ link: LinkRow; changed: boolean }> {
      return db.transaction(async (tx) => {
        if (!(await clientIsActive(tx, clientId))) throw new AppError(404, 'client_not_found', 'That client system does not exist or is inactive');
        const previous = await findLink(tx, user.id, clientId, true);
        if (previous && isSameName(previous, name)) return { link: previous, changed: false };
        if (previous) await deleteLink(tx, user.id, clientId);
        const link = await insertPendingLink(tx, user.id, clientId, name);
        if (!link) {
          // the same user's claim sent twice at once (two tabs, a double submit): the other
          // one's row, committed while this insert waited for it, is what the user now has
          const theirs = await findLink(tx, user.id, clientId);
          if (theirs) return { link: theirs, changed: false };
          throw new AppError(503, 'service_unavailable', 'The link changed while it was requested; try again', { headers: { 'Retry-After': '1' } });
        }
        if (previous) await invalidateUnusedTokens(tx, user.id, { clientId });
        await writeAudit(tx, {
          action: 'user.link_client', outcome: 'success', userId: user.id, username: user.username, clientId,
          ipAddress: ctx.ipAddress, userAgent: ctx.userAgent,
          details: { via: 'page', external_username: name, status: link.status, ...(previous ? { replaced: previous.external_username, replaced_status: previous.status } : {}) },
        });
        return { link, changed: true };
      });
    },

    /** The user withdraws their link (pending or active); null when there was none. */
    async withdraw(user: { id: number; username: string }, clientId: string, ctx: LinkContext): Promise<LinkRow | null> {
      return db.transaction(async (tx) => {
        const link = await deleteLink(tx, user.id, clientId);
        if (!link) return null;
        const invalidated = await invalidateUnusedTokens(tx, user.id, { clientId });
        await writeAudit(tx, {
          action: 'user.unlink_client', outcome: 'success', userId: user.id, username: user.username, clientId,
          ipAddress: ctx.ipAddress, userAgent: ctx.userAgent,
          details: { via: 'page', external_username: link.external_username, status: link.status, invalidated_tokens: invalidated },
        });
        return link;
      });
    },

    /**
     * A client system proves that user `userId` is `name` at itself (the client is the
     * authenticated caller, so it can only speak for its own names). The user must have
     * claimed exactly that name there; anything else is 404 link_not_found, the same answer
     * for an unknown user, no claim and another name. Confirming an active link again is a no-op.
     */
    async confirmByClient(clientId: string, userId: number, name: string, ctx: LinkContext): Promise<LinkRow> {
      return proving(db.transaction(async (tx) => {
        await refuseNameOfAnother(tx, userId, clientId);
        const result = await activateLink(tx, userId, clientId, 'client', name);
        if (!result) throw new AppError(404, 'link_not_found', 'No link of that user with that username at this client system');
        if (result.changed) {
          const user = await findUserById(tx, userId);
          await writeAudit(tx, {
            action: 'user.link_confirm', outcome: 'success', userId, username: user?.username ?? null, clientId,
            ipAddress: ctx.ipAddress, userAgent: ctx.userAgent, details: { via: 'client', external_username: result.link.external_username },
          });
        }
        return result.link;
      }));
    },

    /**
     * An administrator approves the user's pending link at a client; 404 when there is none.
     * `shown`: the name the administrator was shown, the one approved; 409 link_changed when
     * the user has put another in its place since (it has not been reviewed).
     */
    async approve(userId: number, clientId: string, actor: Actor, shown?: string): Promise<LinkRow> {
      const user = await usernameOf(userId);
      return proving(db.transaction(async (tx) => {
        if (shown !== undefined) {
          // a claim replaced meanwhile is a row deleted and another inserted: the lock waited for
          // the old one and found it gone, and the statement after it sees the new one
          const current = await findLink(tx, userId, clientId, true) ?? await findLink(tx, userId, clientId, true);
          if (!current) throw new AppError(404, 'link_not_found', `${user.username} has no link at ${clientId}`);
          if (current.external_username !== shown) {
            throw new AppError(409, 'link_changed', `The link's name is now ${current.external_username}, not ${shown}: review it again`);
          }
        }
        await refuseNameOfAnother(tx, userId, clientId);
        const result = await activateLink(tx, userId, clientId, 'admin');
        if (!result) throw new AppError(404, 'link_not_found', `${user.username} has no link at ${clientId}`);
        if (result.changed) {
          await writeAudit(tx, {
            action: 'user.link_confirm', outcome: 'success', userId, username: user.username, clientId,
            ipAddress: actor.ipAddress ?? null, userAgent: actor.userAgent ?? null,
            details: { ...actorDetails(actor), external_username: result.link.external_username },
          });
        }
        return result.link;
      }));
    },

    /** An administrator revokes a link (pending or active): its name stops at once. */
    async revoke(userId: number, clientId: string, actor: Actor): Promise<{ link: LinkRow; invalidatedTokens: number }> {
      const user = await usernameOf(userId);
      return db.transaction(async (tx) => {
        const link = await deleteLink(tx, userId, clientId);
        if (!link) throw new AppError(404, 'link_not_found', `${user.username} has no link at ${clientId}`);
        const invalidatedTokens = await invalidateUnusedTokens(tx, userId, { clientId });
        await writeAudit(tx, {
          action: 'user.link_revoke', outcome: 'success', userId, username: user.username, clientId,
          ipAddress: actor.ipAddress ?? null, userAgent: actor.userAgent ?? null,
          details: { ...actorDetails(actor), external_username: link.external_username, status: link.status, invalidated_tokens: invalidatedTokens },
        });
        return { link, invalidatedTokens };
      });
    },

    /** Links by state, client and user, oldest request first. */
    async list(filter: { status?: LinkStatus; clientId?: string; userId?: number }, limit = 200): Promise<ListedLink[]> {
      return (await listLinks(db, filter, limit)).map(toListedLink);
    },
  };
}

export type LinkService = ReturnType<typeof createLinkService>;
