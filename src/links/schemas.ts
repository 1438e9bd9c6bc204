import { z } from 'zod';

const credential = z.string().min(1).max(256);

/** A username at a client system: trimmed, printable, as long as any login name could be. */
export const externalUsername = z.string().trim().min(1, 'Enter your username at that system').max(128)
  .regex(/^[^\p{Cc}]*$/u, 'The username contains control characters');

/**
 * A user id as the token's `user_id` claim (a string) or the validation answer's `user.id`
 * (a number) carries it.
 */
export const userIdInput = z.union([
  z.number().int().positive().max(2_147_483_647),
  z.string().regex(/^[1-9]\d{0,9}$/, 'user_id must be a positive integer').transform(Number).pipe(z.number().max(2_147_483_647)),
]);

/**
 * POST /api/admin/users/:id/links/:client_id/approve: the name the administrator reviewed,
 * exactly as listed; the link is approved only while it still names it (409 link_changed).
 * Without it, whatever the link names is approved.
 */
export const approveLinkSchema = z.object({
  external_username: z.string().min(1).max(200).optional(),
}).strict();

/**
 * POST /api/sso/links/confirm: the calling client system proves that user `user_id` of this
 * service is `username` at itself. Which client is never a field: it is the one whose
 * credentials these are.
 */
export const confirmLinkSchema = z.object({
  client_id: credential,
  client_secret: credential,
  user_id: userIdInput,
  username: externalUsername,
});

/** POST /api/sso/links/pending: the calling client's links awaiting its confirmation. */
export const pendingLinksSchema = z.object({
  client_id: credential,
  client_secret: credential,
});

/** GET /api/admin/links: filters. */
export const adminLinksQuery = z.object({
  status: z.enum(['pending', 'active']).optional(),
  client_id: z.string().min(1).max(200).optional(),
  user_id: z.string().regex(/^[1-9]\d{0,8}$/).transform(Number).optional(),
  limit: z.coerce.number().int().min(1).max(500).default(200),
});
