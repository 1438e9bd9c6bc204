import type { Request, Response } from 'express';
import { err, invalid, forbidden, limited, unauthenticated } from '../openapi/operation.ts';
import * as R from '../openapi/responses.ts';
import { route } from '../routes/declare.ts';
import { actorOf } from '../auth/actor.ts';
import { idParam } from '../http/params.ts';
import { createGroupSchema } from './schemas.ts';

const guarded = { 401: unauthenticated, 403: forbidden, 429: limited };
const badId = err('Malformed user id', { error: 'invalid_id', message: 'The id must be a positive integer' });
const noGroup = err('No such group (`group_not_found`)', { error: 'group_not_found', message: 'No group finance' });
const noUserOrGroup = err('No such user (`user_not_found`) or group (`group_not_found`)', { error: 'group_not_found', message: 'No group finance' });
const badName = err('Not a group name (`invalid_group`)', { error: 'invalid_group', message: 'A group name is 1-64 lower-case letters, digits, . _ or -, starting with a letter or digit' });
const group = { name: 'finance', members: 3, created_at: '2026-01-31T12:00:00.000Z' };
const admin = { tag: 'Administration', access: 'admin', limit: 'user' } as const;
const api = (req: Request, res: Response) => actorOf(req, res, 'admin_api');
const nameParam = (req: Request) => String(req.params.name).slice(0, 100);

/**
 * Groups and memberships (docs/access.md), for role admin, under the per-user limit; every
 * change audited (group.create, group.delete, user.group_add, user.group_remove). A client's
 * access rule is set on the client (PATCH /api/admin/clients/:client_id).
 */
export const ACCESS_ADMIN_ROUTES = [
  route({
    ...admin, method: 'get', path: '/api/admin/groups', summary: 'List groups with their member counts',
    responses: { 200: { description: 'Every group, by name', schema: R.group.array(), example: [group] }, ...guarded },
    handle: ({ access }) => async ({ res }) => {
      res.json(await access.listGroups());
    },
  }),
  route({
    ...admin, method: 'post', path: '/api/admin/groups', summary: 'Create a group',
    body: createGroupSchema, example: { name: 'finance' },
    responses: {
      201: { description: 'Created', schema: R.group, example: { ...group, members: 0 } },
      400: badName, 409: err('The name is taken (`group_exists`)', { error: 'group_exists', message: 'Group finance already exists' }), ...guarded,
    },
    handle: ({ access }) => async ({ req, res, body }) => {
      res.status(201).json(await access.createGroup(body.name, api(req, res)));
    },
  }),
  route({
    ...admin, method: 'get', path: '/api/admin/groups/:name', summary: 'One group with its members',
    responses: { 200: { description: 'The group', schema: R.groupDetail, example: { ...group, members: 1, users: [{ id: 7, username: 'alice' }] } }, 400: badName, 404: noGroup, ...guarded },
    handle: ({ access }) => async ({ req, res }) => {
      res.json(await access.group(nameParam(req)));
    },
  }),
  route({
    ...admin, method: 'delete', path: '/api/admin/groups/:name', summary: 'Delete a group (its memberships go with it)',
    description: 'Refused with 409 `group_in_use` while a client\'s access rule names the group: the message names the clients to change first.',
    responses: {
      200: { description: 'Deleted', schema: R.deletedGroup, example: { name: 'finance', deleted: true, members: 3 } },
      400: badName, 404: noGroup,
      409: err('A client\'s access rule names the group (`group_in_use`)', { error: 'group_in_use', message: 'group "finance" is named by the access rule of client billing; remove it there first' }),
      ...guarded,
    },
    handle: ({ access }) => async ({ req, res }) => {
      const gone = await access.deleteGroup(nameParam(req), api(req, res));
      res.json({ name: gone.name, deleted: true, members: gone.members });
    },
  }),
  route({
    ...admin, method: 'put', path: '/api/admin/groups/:name/members/:id', summary: 'Put a user in a group',
    description: 'Takes effect at once on every instance: the next token issue, sign-in or validation for a client that admits the group admits the user. Putting a member in again changes nothing (`changed: false`).',
    responses: { 200: { description: 'The membership', schema: R.membership, example: { user_id: 7, group: 'finance', member: true, changed: true } }, 400: invalid, 404: noUserOrGroup, ...guarded },
    handle: ({ access }) => async ({ req, res }) => {
      const r = await access.addToGroup(idParam(req), nameParam(req), api(req, res));
      res.json({ user_id: r.user_id, group: r.group, member: true, changed: r.changed });
    },
  }),
  route({
    ...admin, method: 'delete', path: '/api/admin/groups/:name/members/:id', summary: 'Take a user out of a group',
    description: 'Takes effect at once: a token issued before, for a client that admitted the user only through this group, is refused at validation (`access_denied`).',
    responses: { 200: { description: 'The membership', schema: R.membership, example: { user_id: 7, group: 'finance', member: false, changed: true } }, 400: badId, 404: noUserOrGroup, ...guarded },
    handle: ({ access }) => async ({ req, res }) => {
      const r = await access.removeFromGroup(idParam(req), nameParam(req), api(req, res));
      res.json({ user_id: r.user_id, group: r.group, member: false, changed: r.changed });
    },
  }),
];
