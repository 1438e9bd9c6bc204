import type { Request, RequestHandler, Response } from 'express';
import type { KoaContextWithOIDC } from 'oidc-provider';
import { endSession } from '../auth/session.ts';
import type { AuthService } from '../auth/service.ts';
import type { ClientService } from '../clients/service.ts';
import { clientIp } from '../http/client-ip.ts';
import { AppError } from '../http/errors.ts';
import type { OidcService } from '../oidc/service.ts';
import type { UserRecord } from '../users/user.ts';
import type { OidcLoginTarget } from './login-target.ts';
import { allowFormTargets } from './security.ts';

const EXPIRED = 'This sign-in has expired or was already completed. Go back to the application and sign in again.';

/**
 * The OpenID Connect authorization request this sign-in page belongs to (GET and POST
 * /oidc/interaction/:uid), as the login target the password form and its two-factor step
 * work with (src/pages/login.ts): the same page, limits, lock counter and completion as every
 * other sign-in. A consent step is never shown: the client systems are registered by the
 * administrators, so what they ask for is granted at once.
 */
export function oidcTarget(s: { oidc: OidcService; clients: Pick<ClientService, 'findClient'> }): RequestHandler {
  return async (req, res, next) => {
    const provider = await s.oidc.provider();
    let details: Awaited<ReturnType<typeof provider.interactionDetails>>;
    try {
      details = await provider.interactionDetails(req, res);
    } catch {
      throw new AppError(400, 'interaction_expired', EXPIRED);
    }
    if (details.uid !== req.params.uid) throw new AppError(400, 'interaction_expired', EXPIRED);
    const client = await s.clients.findClient(String(details.params.client_id));
    if (!client || !client.active) {
      throw new AppError(400, 'unknown_client', 'The system that sent you here is not a registered, active client system. Please contact its administrator.');
    }
    res.setHeader('Cache-Control', 'no-store');
    if (details.prompt.name === 'consent') {
      const accountId = details.session?.accountId;
      if (!accountId) throw new AppError(400, 'interaction_expired', EXPIRED);
      const grant = (details.grantId ? await provider.Grant.find(details.grantId) : undefined)
        ?? new provider.Grant({ accountId, clientId: client.client_id });
      const missing = details.prompt.details as { missingOIDCScope?: string[]; missingOIDCClaims?: string[]; missingResourceScopes?: Record<string, string[]> };
      if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
      if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
      for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes ?? {})) grant.addResourceScope(indicator, scopes.join(' '));
      const grantId = await grant.save();
      const to = await provider.interactionResult(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
      return res.redirect(303, to);
    }
    const reasons = details.prompt.reasons;
    const target: OidcLoginTarget = {
      kind: 'oidc',
      uid: details.uid,
      client,
      redirectUri: String(details.params.redirect_uri),
      forceLogin: reasons.includes('login_prompt') || reasons.includes('max_age'),
      async finish(request: Request, response: Response, user: UserRecord) {
        // a browser signed in already is held to the client's access rule here (a password or
        // passkey sign-in was, before its session: src/auth/service.ts, src/passkeys/service.ts)
        if (!(await s.oidc.admits(request, user, client.client_id))) return target.deny(request, response, `You do not have access to ${client.client_name}`);
        const ts = request.session?.authTime ?? Math.floor(Date.now() / 1000);
        const to = await provider.interactionResult(request, response, { login: { accountId: String(user.id), ts } }, { mergeWithLastSubmission: false });
        response.redirect(303, to);
      },
      async deny(request: Request, response: Response, description: string) {
        const to = await provider.interactionResult(request, response, { error: 'access_denied', error_description: description }, { mergeWithLastSubmission: false });
        response.setHeader('Cache-Control', 'no-store');
        response.redirect(303, to);
      },
    };
    res.locals.loginTarget = target;
    next();
  };
}

/** Renders a view into the provider's answer (the provider writes it, Koa style). */
function renderInto(ctx: KoaContextWithOIDC, view: string, locals: Record<string, unknown>): Promise<void> {
  const req = ctx.req as Request;
  return new Promise((resolve, reject) => {
    req.app.render(view, { user: undefined, csrfToken: '', flash: [], ...locals }, (err, html) => {
      if (err) return reject(err);
      ctx.type = 'html';
      ctx.body = html;
      resolve();
    });
  });
}

/**
 * The pages the provider shows, in the service's look: its errors (an unknown client, a
 * redirect URI that is not registered: shown, never redirected to) and the confirmation of
 * an RP-initiated sign-out, which also ends the browser's session at the service.
 */
export function oidcViews(auth: Pick<AuthService, 'logoutUser'>) {
  return {
    async renderError(ctx: KoaContextWithOIDC, out: { error: string; error_description?: string }) {
      await renderInto(ctx, 'error', {
        status: ctx.status || 400,
        title: 'This sign-in cannot continue',
        message: out.error_description ?? out.error,
      });
    },
    async logoutSource(ctx: KoaContextWithOIDC, form: string) {
      // the confirmation's form goes on to the client's registered post-logout URI
      allowFormTargets(ctx.res as Response, ['post_logout_redirect_uri']);
      await renderInto(ctx, 'oidc-logout', { form, clientName: ctx.oidc.client?.clientName ?? null });
    },
    async postLogoutSuccessSource(ctx: KoaContextWithOIDC) {
      await renderInto(ctx, 'signed-out', {});
    },
    /** RP-initiated logout confirmed: the browser's session at the service ends too. */
    async endServiceSession(req: Request): Promise<void> {
      const userId = req.session?.userId;
      if (typeof userId === 'number') {
        await auth.logoutUser({ userId, ipAddress: clientIp(req), userAgent: req.get('user-agent') ?? null, via: 'oidc', endSessionId: req.sessionID });
      }
      await endSession(req);
    },
  };
}
