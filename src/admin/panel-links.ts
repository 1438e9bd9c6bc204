import type { Request, RequestHandler } from 'express';
import { input } from '../http/validate.ts';
import type { LinkService } from '../links/service.ts';
import { flashNext } from '../pages/render.ts';
import { actorOf } from '../auth/actor.ts';
import { clientIdParam, idParam } from '../http/params.ts';
import { linkApproveForm } from './form-schemas.ts';

/** Where a link form returns to: the page it was posted from, when that is a panel page. */
function backTo(req: Request, id: number): string {
  const from = typeof req.body?.return_to === 'string' ? req.body.return_to : '';
  return from === '/admin/users' ? from : `/admin/users/${id}`;
}

/** The panel's link actions, on a user's page and in the users page's list of pending links. */
export function linkPanel(deps: { links: LinkService }) {
  const { links } = deps;

  const approve: RequestHandler = async (req, res) => {
    const id = idParam(req);
    const link = await links.approve(id, clientIdParam(req), actorOf(req, res, 'admin_panel'), input(res, linkApproveForm).external_username);
    flashNext(req, { type: 'success', text: `Approved: tokens for ${link.client_id} now name ${link.external_username}.` });
    res.redirect(303, backTo(req, id));
  };

  const revoke: RequestHandler = async (req, res) => {
    const id = idParam(req);
    const { link } = await links.revoke(id, clientIdParam(req), actorOf(req, res, 'admin_panel'));
    flashNext(req, { type: 'success', text: `Revoked: ${link.external_username} at ${link.client_id} is no longer linked; its name stopped at once.` });
    res.redirect(303, backTo(req, id));
  };

  return { approve, revoke };
}
