import { err, forbidden, limited, unauthenticated } from '../openapi/operation.ts';
import * as R from '../openapi/responses.ts';
import { passkeyJson, passkeyList, userParams, userPasskeyParams } from '../passkeys/schemas.ts';
import { route } from '../routes/declare.ts';
import { actorOf } from '../auth/actor.ts';

const guarded = { 401: unauthenticated, 403: forbidden, 429: limited };
const badId = err('Malformed id', { error: 'invalid_id', message: 'The id must be a positive integer' });
const noUser = err('No such user', { error: 'user_not_found', message: 'No user 7' });
const admin = { tag: 'Administration', access: 'admin', limit: 'user' } as const;

/**
 * Administrators and a user's passkeys (docs/passkeys.md): the list, and removal (audited as
 * passkey.removed with the acting administrator). Removing the last one is allowed: the user
 * still has their password.
 */
export const ADMIN_PASSKEY_ROUTES = [
  route({
    ...admin, method: 'get', path: '/api/admin/users/:id/passkeys', params: userParams, summary: 'A user\'s passkeys (name, created, last used)',
    responses: {
      200: { description: 'Oldest first', schema: passkeyList, example: { passkeys: [{ id: 3, name: 'Laptop', created_at: '2026-01-31T12:00:00.000Z', last_used_at: null }] } },
      400: badId, 404: noUser, ...guarded,
    },
    handle: ({ userAdmin, passkeys }) => async ({ res, params }) => {
      await userAdmin.get(params.id);
      res.json({ passkeys: (await passkeys.list(params.id)).map(passkeyJson) });
    },
  }),
  route({
    ...admin, method: 'delete', path: '/api/admin/users/:id/passkeys/:passkeyId', params: userPasskeyParams, summary: 'Remove one of a user\'s passkeys',
    responses: {
      200: { description: 'Removed', schema: R.success, example: { success: true } },
      400: badId,
      404: err('No such user (`user_not_found`), or the user has no such passkey (`passkey_not_found`)', { error: 'passkey_not_found', message: 'No such passkey' }),
      ...guarded,
    },
    handle: ({ userAdmin, passkeys }) => async ({ req, res, params }) => {
      const user = await userAdmin.get(params.id);
      await passkeys.remove(user, params.passkeyId, { actor: actorOf(req, res, 'admin_api') });
      res.json({ success: true });
    },
  }),
];
