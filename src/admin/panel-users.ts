import type { AccessService } from '../access/service.ts';
import type { Request, RequestHandler, Response } from 'express';
import type { Logger } from 'pino';
import { renewSessionAfterChange } from '../auth/session.ts';
import { currentUser } from '../auth/guards.ts';
import { AppError } from '../http/errors.ts';
import { input } from '../http/validate.ts';
import type { LinkService } from '../links/service.ts';
import { flashNext, renderChangedSignedOut } from '../pages/render.ts';
import { actorOf } from '../auth/actor.ts';
import { idParam } from '../http/params.ts';
import { activeForm, userCreateForm, userEditForm, userPasswordForm } from './form-schemas.ts';
import { checked, editedFields, refusedEdit, refusedForm, renderAdmin } from './panel-common.ts';
import type { UserAdmin } from './users.ts';
import type { PasskeyService } from '../passkeys/service.ts';
import { passkeyParams } from '../passkeys/schemas.ts';

/** Roles offered in the panel's select; a user's other role (set over the API) is kept and shown too. */
export const PANEL_ROLES = ['user', 'admin'];

/** The profile form's fields, each saved only when the administrator changed it (editedFields). */
const PROFILE_FIELDS = ['email', 'full_name', 'role'] as const;

/** The panel's user pages: list and search (with links awaiting approval), create, detail (edit, activate, unlock, reset 2FA, links). */
export function userPanel(deps: { userAdmin: UserAdmin; links: LinkService; passkeys: Pick<PasskeyService, 'list' | 'remove'>; access: AccessService; deps: { logger: Logger } }) {
  const { userAdmin, links, passkeys, access } = deps;
  const { logger } = deps.deps;
  const detailUrl = (id: number) => `/admin/users/${id}`;

  const list: RequestHandler = async (req, res) => {
    const q = typeof req.query.q === 'string' ? req.query.q.slice(0, 200) : '';
    renderAdmin(req, res, 'users', { section: 'users', q, users: await userAdmin.search(q, 200), pendingLinks: q ? [] : await links.list({ status: 'pending' }, 100) });
  };

  const renderNew = (req: Request, res: Response, form: Record<string, string> = {}, refused?: unknown) => {
    renderAdmin(req, res, 'user-new', { section: 'users', form, roles: PANEL_ROLES }, refused === undefined ? {} : refusedForm(refused));
  };

  const showNew: RequestHandler = (req, res) => renderNew(req, res);

  const create: RequestHandler = async (req, res) => {
    const form = input(res, userCreateForm);
    const user = await userAdmin.create(form, actorOf(req, res, 'admin_panel'));
    flashNext(req, { type: 'success', text: `User ${user.username} was created.` });
    res.redirect(303, detailUrl(user.id));
  };

  const createFailed = (err: unknown, req: Request, res: Response, next: (e?: unknown) => void) => {
    if (!(err instanceof AppError) || err.status >= 500 || [401, 403, 429].includes(err.status)) return next(err);
    const { password: _password, _csrf, ...form } = req.body as Record<string, string>;
    renderNew(req, res, form, err);
  };

  const renderDetail = async (req: Request, res: Response, posted?: Record<string, unknown>, refused?: unknown) => {
    const id = idParam(req);
    const user = await userAdmin.get(id);
    const roles = PANEL_ROLES.includes(user.role) ? PANEL_ROLES : [...PANEL_ROLES, user.role];
    const saved = { email: user.email, full_name: user.full_name ?? '', role: user.role };
    // a refused profile form shows what was typed, so it can be corrected (refusedEdit)
    const { form, shown } = posted ? refusedEdit(PROFILE_FIELDS, posted, saved, refused) : { form: saved, shown: saved };
    renderAdmin(req, res, 'user', {
      section: 'users', subject: user, form, shown, links: await userAdmin.links(id), roles, passkeys: await passkeys.list(id),
      // docs/access.md: the user's groups, the systems their rules admit, and the groups to add
      userGroups: await access.groupsOf(id), usable: await access.clientsFor(id), groups: await access.listGroups(),
    },
      refused === undefined ? {} : refusedForm(refused));
  };

  const show: RequestHandler = (req, res) => renderDetail(req, res);

  /** A refused profile edit is shown on the same page, the field at fault marked. */
  const updateFailed = async (err: unknown, req: Request, res: Response, next: (e?: unknown) => void) => {
    if (!(err instanceof AppError) || err.status >= 500 || [401, 403, 404, 429].includes(err.status)) return next(err);
    await renderDetail(req, res, req.body as Record<string, unknown>, err);
  };

  const update: RequestHandler = async (req, res) => {
    const id = idParam(req);
    const form = input(res, userEditForm);
    const typed = { email: form.email, full_name: form.full_name, role: form.role };
    const edited = editedFields(PROFILE_FIELDS, typed, form);
    const shown = Object.fromEntries(edited.flatMap((f) => (form[`was_${f}`] === undefined ? [] : [[f, form[`was_${f}`]!]])));
    const changed = edited.length === 0 ? [] : await userAdmin.editProfile(id, Object.fromEntries(edited.map((f) => [f, typed[f]])), actorOf(req, res, 'admin_panel'), shown);
    flashNext(req, changed.length > 0
      ? { type: 'success', text: 'The profile was saved.' }
      : { type: 'info', text: 'Nothing changed: the profile already had these values.' });
    res.redirect(303, detailUrl(id));
  };

  const setActive: RequestHandler = async (req, res) => {
    const id = idParam(req);
    const active = input(res, activeForm).active === 'true';
    const user = await userAdmin.update(id, { active }, actorOf(req, res, 'admin_panel'));
    flashNext(req, { type: 'success', text: active ? `${user.username} is active again.` : `${user.username} is deactivated and gets no more tokens.` });
    res.redirect(303, detailUrl(id));
  };

  const unlock: RequestHandler = async (req, res) => {
    const id = idParam(req);
    const user = await userAdmin.unlock(id, actorOf(req, res, 'admin_panel'));
    flashNext(req, { type: 'success', text: `${user.username} is unlocked; the failed sign-in count starts again from zero.` });
    res.redirect(303, detailUrl(id));
  };

  const resetTwoFactor: RequestHandler = async (req, res) => {
    const id = idParam(req);
    const user = await userAdmin.resetTwoFactor(id, actorOf(req, res, 'admin_panel'));
    flashNext(req, { type: 'success', text: `Two-factor sign-in is off for ${user.username}; they can set it up again from their account.` });
    res.redirect(303, detailUrl(id));
  };

  /** Removes one of the user's passkeys (audited as passkey.removed, the administrator named); their password still signs them in. */
  const removePasskey: RequestHandler = async (req, res) => {
    const id = idParam(req);
    const user = await userAdmin.get(id);
    const { passkeyId } = passkeyParams.parse({ passkeyId: req.params.passkeyId });
    await passkeys.remove(user, passkeyId, { actor: actorOf(req, res, 'admin_panel') });
    flashNext(req, { type: 'success', text: `The passkey was removed; ${user.username} can no longer sign in with it.` });
    res.redirect(303, detailUrl(id));
  };

  /**
   * Sets a user's password. An administrator setting their own stays signed in here, under a
   * new session id, while every other session of theirs ends (as /account/password does), and
   * cannot ask themselves to change it again at the next sign-in: the form does not offer that
   * box on their own page, and a post with it is refused.
   */
  const setPassword: RequestHandler = async (req, res) => {
    const id = idParam(req);
    const form = input(res, userPasswordForm);
    const mustChange = checked(form.must_change);
    if (id === currentUser(res).id) {
      if (mustChange) {
        throw new AppError(409, 'cannot_require_own_change', 'You cannot require yourself to change your own password at the next sign-in. Set it without that box, or change it at /account/password.');
      }
      const { user: me, credentialsVersion } = await userAdmin.setPassword(id, { password: form.password, mustChange: false }, actorOf(req, res, 'admin_panel'), req.sessionID);
      // a new password always signs the user out, so there is a new version
      if (!(await renewSessionAfterChange(req, me, { twoFactorUsed: req.session.twoFactorUsed === true, credentialsVersion: credentialsVersion! }, logger))) {
        return renderChangedSignedOut(req, res, { heading: 'Your password was set', signIn: `/login?next=${encodeURIComponent(detailUrl(id))}` });
      }
      flashNext(req, { type: 'success', text: 'Your password was set. You are still signed in here; every other session of yours has been signed out.' });
      return res.redirect(303, detailUrl(id));
    }
    const { user } = await userAdmin.setPassword(id, { password: form.password, mustChange }, actorOf(req, res, 'admin_panel'));
    flashNext(req, {
      type: 'success',
      text: `The password of ${user.username} was set${mustChange ? ' and must be changed at the next sign-in' : ''}; their sessions have ended.`,
    });
    res.redirect(303, detailUrl(id));
  };

  return { list, showNew, create, createFailed, show, update, updateFailed, setActive, unlock, resetTwoFactor, removePasskey, setPassword };
}
