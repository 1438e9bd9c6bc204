import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generate } from 'otplib';
import { startTestApp, type TestApp, unique } from '../helpers/app.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import { formSession, hiddenField } from './form-session.ts';

type Client = Awaited<ReturnType<typeof makeClient>>;

const loginPath = (client: Client, extra: Record<string, string> = {}) =>
  `/sso/login?${new URLSearchParams({ client_id: client.client_id, ...extra })}`;

/** Opens the sign-in page and submits it; returns the session and the answer to the form. */
async function submitLogin(app: TestApp, client: Client, login: string, password: string, extra: Record<string, string> = {}) {
  const s = formSession(app.app);
  const page = await s.get(loginPath(client, extra.state ? { state: extra.state } : {}));
  expect(page.status, page.text).toBe(200);
  const answer = await s.post('/sso/login', {
    _csrf: hiddenField(page.text, '_csrf'), step: 'password', client_id: client.client_id, login, password, ...extra,
  });
  return { s, page, answer };
}

function registeredTarget(location: string | undefined): string {
  expect(location, 'a Location header').toBeTruthy();
  const url = new URL(location!);
  return `${url.origin}${url.pathname}`;
}

describe('the sign-in page (HTTP level)', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(() => app.close());

  it('answers a missing, unknown or inactive client_id with a 400 page, never a redirect', async () => {
    const inactive = await makeClient(app);
    await app.services.clients.updateClient(inactive.client_id, { active: false }, { via: 'cli' });
    const s = formSession(app.app);
    for (const path of ['/sso/login', '/sso/login?client_id=', `/sso/login?client_id=${unique('nope')}`, loginPath(inactive),
      '/sso/login?client_id=a&client_id=b', `/sso/login?client_id=${unique('nope')}&redirect_uri=https%3A%2F%2Fevil.example%2F`]) {
      const res = await s.get(path);
      expect(res.status, path).toBe(400);
      expect(res.headers.location, path).toBe(undefined);
      expect(String(res.headers['content-type'])).toMatch(/text\/html/);
      expect(res.text).toMatch(/<h1[^>]*>This link does not work<\/h1>/);
      expect(res.text).not.toMatch(/name="password"/);
    }
  });

  it('signs in with the form: 303 to the registered callback with token and state, no-store, no-referrer; the token (a version-7 jti) validates once', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app);
    const { answer } = await submitLogin(app, client, user.username, user.password, { state: 'xyz 123' });
    expect(answer.status, answer.text).toBe(303);
    expect(answer.headers['cache-control']).toBe('no-store');
    expect(answer.headers['referrer-policy']).toBe('no-referrer');
    const location = new URL(answer.headers.location!);
    expect(registeredTarget(answer.headers.location)).toBe('https://client.example/sso/callback');
    expect(location.searchParams.get('from'), 'the registered query is kept').toBe('auth');
    expect(location.searchParams.get('state')).toBe('xyz 123');
    const token = location.searchParams.get('token')!;
    // the page's tokens are written where the API's are: a version-7 jti, at the index's right edge
    const { jti } = JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString());
    expect(jti).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(Math.abs(Number.parseInt(jti.replace(/-/g, '').slice(0, 12), 16) - Date.now())).toBeLessThan(60_000);
    const creds = { client_id: client.client_id, client_secret: client.client_secret };
    const first = await app.http.post('/api/sso/validate', { ...creds, token });
    expect(first.status, first.text).toBe(200);
    expect(first.body.user.username).toBe(user.username);
    const second = await app.http.post('/api/sso/validate', { ...creds, token });
    expect(second.body.error).toBe('token_already_used');
  });

  it('sends the browser to the registered callback with its query as registered, token and state appended', async () => {
    const client = await makeClient(app, { callbackUrl: 'https://client.example/cb?a=%20b+c&next=%2fhome' });
    const user = await makeUser(app);
    const { answer } = await submitLogin(app, client, user.username, user.password, { state: 'xyz 1+2' });
    expect(answer.status, answer.text).toBe(303);
    expect(answer.headers.location).toMatch(/^https:\/\/client\.example\/cb\?a=%20b\+c&next=%2fhome&token=[\w.-]+&state=xyz%201%2B2$/);
  });

  it('redirects a browser that has a session at once, without the form', async () => {
    const client = await makeClient(app);
    const other = await makeClient(app);
    const user = await makeUser(app);
    const { s } = await submitLogin(app, client, user.username, user.password);
    const again = await s.get(loginPath(other, { state: 's2' }));
    expect(again.status).toBe(303);
    expect(registeredTarget(again.headers.location)).toBe('https://client.example/sso/callback');
    expect(new URL(again.headers.location!).searchParams.get('state')).toBe('s2');
    const claims = JSON.parse(Buffer.from(new URL(again.headers.location!).searchParams.get('token')!.split('.')[1], 'base64url').toString());
    expect(claims.client_id).toBe(other.client_id);
    expect(claims.username).toBe(user.username);
  });

  it('ignores every parameter that tries to name another redirect target', async () => {
    const client = await makeClient(app, { callbackUrl: 'https://registered.example/cb' });
    const user = await makeUser(app);
    const injected = {
      redirect_uri: 'https://evil.example/steal', redirect_url: 'https://evil.example/steal', callback_url: 'https://evil.example/steal',
      return_to: '//evil.example', next: 'https://evil.example', url: 'https://evil.example',
    };
    const s = formSession(app.app);
    const page = await s.get(loginPath(client, injected));
    expect(page.status).toBe(200);
    expect(page.text).not.toMatch(/evil\.example/);
    const answer = await s.post(`/sso/login?${new URLSearchParams(injected)}`, {
      _csrf: hiddenField(page.text, '_csrf'), step: 'password', client_id: client.client_id,
      login: user.username, password: user.password, ...injected,
    });
    expect(answer.status).toBe(303);
    expect(registeredTarget(answer.headers.location)).toBe('https://registered.example/cb');
    const signedIn = await s.get(loginPath(client, injected));
    expect(registeredTarget(signedIn.headers.location)).toBe('https://registered.example/cb');
  });

  it('refuses the form without its CSRF token, or with a wrong one, and signs nobody in', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app);
    const s = formSession(app.app);
    const page = await s.get(loginPath(client));
    const fields = { step: 'password', client_id: client.client_id, login: user.username, password: user.password };
    for (const attempt of [fields, { ...fields, _csrf: 'x'.repeat(64) }, { ...fields, _csrf: '' }]) {
      const res = await s.post('/sso/login', attempt);
      expect(res.status, res.text).toBe(403);
      expect(res.headers.location).toBe(undefined);
      expect(res.text).toMatch(/This form has expired/);
    }
    // a token from another session does not help either
    const stranger = formSession(app.app);
    const strangerPage = await stranger.get(loginPath(client));
    const crossed = await s.post('/sso/login', { ...fields, _csrf: hiddenField(strangerPage.text, '_csrf') });
    expect(crossed.status).toBe(403);
    expect((await s.get('/dashboard')).headers.location).toBe('/login');
    const audit = await app.db.query("SELECT count(*)::int AS n FROM audit_log WHERE action = 'user.login' AND user_id = $1", [user.id]);
    expect(audit.rows[0].n, 'the password was never even checked').toBe(0);
    expect(page.text.includes('name="_csrf"')).toBeTruthy();
  });

  it('keeps wrong credentials on the page: 401 with one message for a wrong password and an unknown user', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app);
    const wrong = await submitLogin(app, client, user.username, 'not the password');
    const unknown = await submitLogin(app, client, unique('ghost'), 'not the password');
    for (const { answer } of [wrong, unknown]) {
      expect(answer.status).toBe(401);
      expect(answer.headers.location).toBe(undefined);
      expect(answer.text).toMatch(/The username or password is incorrect\./);
      expect(answer.text).toMatch(/name="password"/);
    }
    expect(wrong.answer.text, 'the username stays filled in').toMatch(new RegExp(`value="${user.username}"`));
    expect(wrong.answer.text, 'the password is never echoed').not.toMatch(/not the password/);
  });

  it('answers the fifth wrong password 401, saying in words that the account is now locked and for how long, then 423 (both sign-in forms, any name)', async () => {
    const client = await makeClient(app);
    for (const form of ['client', 'service'] as const) {
      const user = await makeUser(app);
      for (const login of [user.username, `nobody-${user.username}`]) {
        const statuses: number[] = [];
        let fifth = '';
        for (let i = 1; i <= 6; i++) {
          if (form === 'client') {
            const { answer } = await submitLogin(app, client, login, `wrong-${i}`);
            statuses.push(answer.status);
            if (i === 5) fifth = answer.text;
          } else {
            const s = formSession(app.app);
            const page = await s.get('/login');
            const answer = await s.post('/login', { _csrf: hiddenField(page.text, '_csrf'), step: 'password', login, password: `wrong-${i}` });
            statuses.push(answer.status);
            if (i === 5) fifth = answer.text;
          }
        }
        expect(statuses, `${form} form, ${login}`).toStrictEqual([401, 401, 401, 401, 401, 423]);
        expect(fifth).toContain('The username or password is incorrect. Too many failed attempts: this account is now locked for 30 minutes.');
      }
    }
  });

  it('shows a locked account as 423 with the minutes left', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app);
    for (let i = 0; i < app.config.LOCKOUT_THRESHOLD; i++) await submitLogin(app, client, user.username, `wrong-${i}`);
    const { answer } = await submitLogin(app, client, user.username, user.password);
    expect(answer.status).toBe(423);
    expect(answer.text).toMatch(/locked; try again in 30 minutes\./);
  });

  it('asks users with two-factor for a code in a second step that carries no password', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app);
    const record = (await app.services.auth.activeUser(user.id))!;
    const { secret } = await app.services.auth.twoFactor.startSetup(record, { ipAddress: '127.0.0.1', userAgent: null }, { kind: 'session', sid: 'test-setup' });
    // enable with the previous step's code, so the current step is still unused for the sign-in
    await app.services.auth.twoFactor.enable(record, await generate({ secret, epoch: Math.floor(Date.now() / 1000) - 30 }), { ipAddress: '127.0.0.1', userAgent: null }, { kind: 'session', sid: 'test-setup' });

    const { s, answer: step2 } = await submitLogin(app, client, user.username, user.password, { state: 'st' });
    expect(step2.status).toBe(200);
    expect(step2.text).toMatch(/Two-step verification/);
    expect(step2.text).toMatch(/autocomplete="one-time-code"/);
    expect(!step2.text.includes(user.password), 'the password is not in the page').toBeTruthy();
    const session = await app.db.query<{ sess: unknown }>('SELECT sess FROM sessions');
    expect(!JSON.stringify(session.rows).includes(user.password), 'nor in plain text in the session store').toBeTruthy();

    const fields = { _csrf: hiddenField(step2.text, '_csrf'), step: 'totp', client_id: client.client_id, state: 'st', pending_key: hiddenField(step2.text, 'pending_key') };
    const wrong = await s.post('/sso/login', { ...fields, code: '000000' === (await generate({ secret })) ? '111111' : '000000' });
    expect(wrong.status).toBe(401);
    expect(wrong.text).toMatch(/That code is not valid/);
    expect(wrong.text, 'still the second step').toMatch(/name="code"/);

    const forged = await s.post('/sso/login', { ...fields, pending_key: Buffer.alloc(32).toString('base64url'), code: await generate({ secret }) });
    expect(forged.status, 'a pending sign-in opens only with its own key').toBe(400);

    const again = await submitLogin(app, client, user.username, user.password, { state: 'st' });
    const ok = await again.s.post('/sso/login', {
      _csrf: hiddenField(again.answer.text, '_csrf'), step: 'totp', client_id: client.client_id, state: 'st',
      pending_key: hiddenField(again.answer.text, 'pending_key'), code: await generate({ secret }),
    });
    expect(ok.status, ok.text).toBe(303);
    expect(registeredTarget(ok.headers.location)).toBe('https://client.example/sso/callback');
    expect(new URL(ok.headers.location!).searchParams.get('state')).toBe('st');
  });

  it('sends security headers on every page: CSP without inline script, frame-ancestors none, nosniff', async () => {
    const client = await makeClient(app);
    const s = formSession(app.app);
    for (const path of [loginPath(client), '/login', '/sso/login', '/no/such/page', '/sso/logout']) {
      const res = await s.get(path);
      const csp = String(res.headers['content-security-policy']);
      expect(csp, path).toMatch(/frame-ancestors 'none'/);
      expect(csp, path).toMatch(/script-src 'self'(;|$)/);
      expect(csp, path).toMatch(/default-src 'self'/);
      expect(csp, path).not.toMatch(/unsafe-inline|unsafe-eval/);
      expect(res.headers['x-content-type-options'], path).toBe('nosniff');
      expect(res.headers['x-frame-options'], path).toBe('DENY');
      expect(res.text, `${path}: no inline script`).not.toMatch(/<script(?![^>]*\bsrc=)/);
    }
    const page = await s.get(loginPath(client));
    // its form ends at the client's callback, which may send the browser on anywhere (browsers apply form-action to that chain)
    expect(String(page.headers['content-security-policy'])).not.toMatch(/form-action/);
    expect(String(page.headers['content-security-policy'])).toMatch(/default-src 'self'.*script-src 'self'/);
    expect(String((await s.get('/login')).headers['content-security-policy']), 'a sign-in for this service alone keeps it').toMatch(/form-action 'self'(;|$)/);
    const css = await s.get('/assets/css/app.css');
    expect(css.status).toBe(200);
    expect(String(css.headers['content-type'])).toMatch(/text\/css/);
  });

  it('GET /sso/logout ends the session and invalidates the unused tokens', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app);
    const { s, answer } = await submitLogin(app, client, user.username, user.password);
    const token = new URL(answer.headers.location!).searchParams.get('token')!;
    const out = await s.get('/sso/logout');
    expect(out.status).toBe(200);
    expect(out.text).toMatch(/You have signed out/);
    const validated = await app.http.post('/api/sso/validate', { client_id: client.client_id, client_secret: client.client_secret, token });
    expect(validated.status).toBe(401);
    expect(validated.body.error).toBe('token_revoked');
    const back = await s.get(loginPath(client));
    expect(back.status, 'the form again, not a redirect').toBe(200);
    expect(back.text).toMatch(/name="password"/);
  });

  it('POST /api/sso/logout with a token from a browser sign-in ends that browser\'s session, not the user\'s others', async () => {
    const portal = await makeClient(app);
    const shop = await makeClient(app);
    const user = await makeUser(app);
    const { s, answer } = await submitLogin(app, portal, user.username, user.password);
    expect(answer.status, answer.text).toBe(303);
    const token = new URL(answer.headers.location!).searchParams.get('token')!;
    expect((await app.http.post('/api/sso/validate', { client_id: portal.client_id, client_secret: portal.client_secret, token })).status).toBe(200);
    // the same browser signs in at a second client without a password (single sign-on): a token in flight
    const atShop = await s.get(loginPath(shop));
    expect(atShop.status, 'signed in: straight on to the client').toBe(303);
    const shopToken = new URL(atShop.headers.location!).searchParams.get('token')!;
    const elsewhere = await submitLogin(app, shop, user.username, user.password);
    expect(elsewhere.answer.status, 'another browser of the same user').toBe(303);

    const out = await app.http.post('/api/sso/logout', { client_id: portal.client_id, client_secret: portal.client_secret, token });
    expect(out.status, out.text).toBe(200);
    expect(out.body).toStrictEqual({ success: true, invalidated_tokens: 2 });

    const back = await s.get(loginPath(portal));
    expect(back.status, 'this browser is asked for the password again').toBe(200);
    expect(back.text).toMatch(/name="password"/);
    const shopCheck = await app.http.post('/api/sso/validate', { client_id: shop.client_id, client_secret: shop.client_secret, token: shopToken });
    expect(shopCheck.body.error, 'the session ended: its unused tokens die with it').toBe('token_revoked');
    const other = await elsewhere.s.get(loginPath(portal));
    expect(other.status, 'the other browser stays signed in').toBe(303);

    const audit = await app.db.query<{ details: Record<string, unknown>; client_id: string }>(
      "SELECT details, client_id FROM audit_log WHERE action = 'user.logout' AND user_id = $1", [user.id]);
    expect(audit.rows.map((r) => [r.client_id, r.details.via, r.details.session_ended])).toStrictEqual([[portal.client_id, 'client', true]]);
    const again = await app.http.post('/api/sso/logout', { client_id: portal.client_id, client_secret: portal.client_secret, token });
    expect(again.body, 'a second logout: the token the other browser was just given').toStrictEqual({ success: true, invalidated_tokens: 1 });
    expect((await elsewhere.s.get(loginPath(portal))).status, 'and ends no session').toBe(303);
  });

  it('POST /api/sso/logout still ends that browser\'s session after its id was renewed for the same user (a password change, a second sign-in)', async () => {
    const shop = await makeClient(app);
    const user = await makeUser(app);
    const { s, answer } = await submitLogin(app, shop, user.username, user.password);
    expect(answer.status, answer.text).toBe(303);
    const token = new URL(answer.headers.location!).searchParams.get('token')!;
    expect((await app.http.post('/api/sso/validate', { client_id: shop.client_id, client_secret: shop.client_secret, token })).status).toBe(200);
    // the same browser, still signed in, changes the password: it stays signed in here, under a new session id
    const form = await s.get('/account/password');
    const changed = await s.post('/account/password', {
      _csrf: hiddenField(form.text, '_csrf'), current_password: user.password,
      new_password: 'four unrelated words here', confirm_password: 'four unrelated words here',
    });
    expect(changed.status, changed.text.slice(0, 300)).toBe(303);
    expect((await s.get('/dashboard')).status, 'still signed in in this browser').toBe(200);
    // and signs in again as the same user: another new id
    const dashboard = await s.get('/dashboard');
    const before = s.cookies.get('auth.sid');
    expect((await s.post('/login', { _csrf: hiddenField(dashboard.text, '_csrf'), step: 'password', login: user.username, password: 'four unrelated words here' })).status).toBe(303);
    expect(s.cookies.get('auth.sid'), 'a new session id').not.toBe(before);

    const out = await app.http.post('/api/sso/logout', { client_id: shop.client_id, client_secret: shop.client_secret, token });
    expect(out.status, out.text).toBe(200);
    const back = await s.get(loginPath(shop));
    expect(back.status, 'this browser is asked for the password again (not a 303 with a fresh token)').toBe(200);
    expect(back.text).toMatch(/name="password"/);
  });

  it('shows error pages to browsers and JSON to API callers', async () => {
    const page = await formSession(app.app).get('/no/such/page');
    expect(page.status).toBe(404);
    expect(page.text).toMatch(/Page not found/);
    const api = await app.http.get('/api/no/such/route');
    expect(api.status).toBe(404);
    expect(api.body.error).toBe('not_found');
  });
});

describe('the sign-in page under the login rate limit', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp({ RATE_LIMIT_LOGIN_PER_MIN: '2' });
  });
  afterAll(() => app.close());

  it('renders the page with status 429 and the message once the limit is used up', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app);
    await submitLogin(app, client, user.username, 'wrong-1');
    await submitLogin(app, client, user.username, 'wrong-2');
    const { answer } = await submitLogin(app, client, user.username, user.password);
    expect(answer.status).toBe(429);
    expect(Number(answer.headers['retry-after']) > 0).toBeTruthy();
    expect(answer.text).toMatch(/Too many sign-in attempts from your network/);
    expect(answer.text, 'the form stays').toMatch(/name="password"/);
  });
});
