import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { generate } from 'otplib';
import { startTestApp, type TestApp, unique } from '../helpers/app.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import { formSession, hiddenField } from './form-session.ts';

type Client = Awaited<ReturnType<typeof makeClient>>;

const loginPath = (client: Client, extra: Record<string, string> = {}) =>
  `/sso/login?${new URLSearchParams({ client_id: client.client_id, ...extra })}`;

/** Opens the sign-in page and submits it; returns the session and the answer to the form. */
async function submitLogin(app: TestApp, client: Client, login: string, password: string, extra: Record<string, string> = {}) {
  const s = formSession(app.url);
  const page = await s.get(loginPath(client, extra.state ? { state: extra.state } : {}));
  assert.equal(page.status, 200, page.text);
  const answer = await s.post('/sso/login', {
    _csrf: hiddenField(page.text, '_csrf'), step: 'password', client_id: client.client_id, login, password, ...extra,
  });
  return { s, page, answer };
}

function registeredTarget(location: string | undefined): string {
  assert.ok(location, 'a Location header');
  const url = new URL(location);
  return `${url.origin}${url.pathname}`;
}

describe('the sign-in page (HTTP level)', () => {
  let app: TestApp;
  before(async () => {
    app = await startTestApp();
  });
  after(() => app.close());

  it('answers a missing, unknown or inactive client_id with a 400 page, never a redirect', async () => {
    const inactive = await makeClient(app);
    await app.services.clients.updateClient(inactive.client_id, { active: false }, { via: 'cli' });
    const s = formSession(app.url);
    for (const path of ['/sso/login', '/sso/login?client_id=', `/sso/login?client_id=${unique('nope')}`, loginPath(inactive),
      '/sso/login?client_id=a&client_id=b', `/sso/login?client_id=${unique('nope')}&redirect_uri=https%3A%2F%2Fevil.example%2F`]) {
      const res = await s.get(path);
      assert.equal(res.status, 400, path);
      assert.equal(res.headers.location, undefined, path);
      assert.match(String(res.headers['content-type']), /text\/html/);
      assert.match(res.text, /<h1[^>]*>This link does not work<\/h1>/);
      assert.doesNotMatch(res.text, /name="password"/);
    }
  });

  it('signs in with the form: 303 to the registered callback with token and state, no-store, no-referrer; the token validates once', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app);
    const { answer } = await submitLogin(app, client, user.username, user.password, { state: 'xyz 123' });
    assert.equal(answer.status, 303, answer.text);
    assert.equal(answer.headers['cache-control'], 'no-store');
    assert.equal(answer.headers['referrer-policy'], 'no-referrer');
    const location = new URL(answer.headers.location!);
    assert.equal(registeredTarget(answer.headers.location), 'https://client.example/sso/callback');
    assert.equal(location.searchParams.get('from'), 'auth', 'the registered query is kept');
    assert.equal(location.searchParams.get('state'), 'xyz 123');
    const token = location.searchParams.get('token')!;
    const creds = { client_id: client.client_id, client_secret: client.client_secret };
    const first = await app.http.post('/api/sso/validate', { ...creds, token });
    assert.equal(first.status, 200, first.text);
    assert.equal(first.body.user.username, user.username);
    const second = await app.http.post('/api/sso/validate', { ...creds, token });
    assert.equal(second.body.error, 'token_already_used');
  });

  it('redirects a browser that has a session at once, without the form', async () => {
    const client = await makeClient(app);
    const other = await makeClient(app);
    const user = await makeUser(app);
    const { s } = await submitLogin(app, client, user.username, user.password);
    const again = await s.get(loginPath(other, { state: 's2' }));
    assert.equal(again.status, 303);
    assert.equal(registeredTarget(again.headers.location), 'https://client.example/sso/callback');
    assert.equal(new URL(again.headers.location!).searchParams.get('state'), 's2');
    const claims = JSON.parse(Buffer.from(new URL(again.headers.location!).searchParams.get('token')!.split('.')[1], 'base64url').toString());
    assert.equal(claims.client_id, other.client_id);
    assert.equal(claims.username, user.username);
  });

  it('ignores every parameter that tries to name another redirect target', async () => {
    const client = await makeClient(app, { callbackUrl: 'https://registered.example/cb' });
    const user = await makeUser(app);
    const injected = {
      redirect_uri: 'https://evil.example/steal', redirect_url: 'https://evil.example/steal', callback_url: 'https://evil.example/steal',
      return_to: '//evil.example', next: 'https://evil.example', url: 'https://evil.example',
    };
    const s = formSession(app.url);
    const page = await s.get(loginPath(client, injected));
    assert.equal(page.status, 200);
    assert.doesNotMatch(page.text, /evil\.example/);
    const answer = await s.post(`/sso/login?${new URLSearchParams(injected)}`, {
      _csrf: hiddenField(page.text, '_csrf'), step: 'password', client_id: client.client_id,
      login: user.username, password: user.password, ...injected,
    });
    assert.equal(answer.status, 303);
    assert.equal(registeredTarget(answer.headers.location), 'https://registered.example/cb');
    const signedIn = await s.get(loginPath(client, injected));
    assert.equal(registeredTarget(signedIn.headers.location), 'https://registered.example/cb');
  });

  it('refuses the form without its CSRF token, or with a wrong one, and signs nobody in', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app);
    const s = formSession(app.url);
    const page = await s.get(loginPath(client));
    const fields = { step: 'password', client_id: client.client_id, login: user.username, password: user.password };
    for (const attempt of [fields, { ...fields, _csrf: 'x'.repeat(64) }, { ...fields, _csrf: '' }]) {
      const res = await s.post('/sso/login', attempt);
      assert.equal(res.status, 403, res.text);
      assert.equal(res.headers.location, undefined);
      assert.match(res.text, /This form has expired/);
    }
    // a token from another session does not help either
    const stranger = formSession(app.url);
    const strangerPage = await stranger.get(loginPath(client));
    const crossed = await s.post('/sso/login', { ...fields, _csrf: hiddenField(strangerPage.text, '_csrf') });
    assert.equal(crossed.status, 403);
    assert.equal((await s.get('/dashboard')).headers.location, '/login');
    const audit = await app.db.query("SELECT count(*)::int AS n FROM audit_log WHERE action = 'user.login' AND user_id = $1", [user.id]);
    assert.equal(audit.rows[0].n, 0, 'the password was never even checked');
    assert.ok(page.text.includes('name="_csrf"'));
  });

  it('keeps wrong credentials on the page: 401 with one message for a wrong password and an unknown user', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app);
    const wrong = await submitLogin(app, client, user.username, 'not the password');
    const unknown = await submitLogin(app, client, unique('ghost'), 'not the password');
    for (const { answer } of [wrong, unknown]) {
      assert.equal(answer.status, 401);
      assert.equal(answer.headers.location, undefined);
      assert.match(answer.text, /The username or password is incorrect\./);
      assert.match(answer.text, /name="password"/);
    }
    assert.match(wrong.answer.text, new RegExp(`value="${user.username}"`), 'the username stays filled in');
    assert.doesNotMatch(wrong.answer.text, /not the password/, 'the password is never echoed');
  });

  it('shows a locked account as 423 with the minutes left', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app);
    for (let i = 0; i < app.config.LOCKOUT_THRESHOLD; i++) await submitLogin(app, client, user.username, `wrong-${i}`);
    const { answer } = await submitLogin(app, client, user.username, user.password);
    assert.equal(answer.status, 423);
    assert.match(answer.text, /locked; try again in 30 minutes\./);
  });

  it('asks users with two-factor for a code in a second step that carries no password', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app);
    const record = (await app.services.auth.activeUser(user.id))!;
    const { secret } = await app.services.auth.twoFactor.startSetup(record, { ipAddress: '127.0.0.1', userAgent: null });
    // enable with the previous step's code, so the current step is still unused for the sign-in
    await app.services.auth.twoFactor.enable(record, await generate({ secret, epoch: Math.floor(Date.now() / 1000) - 30 }), { ipAddress: '127.0.0.1', userAgent: null });

    const { s, answer: step2 } = await submitLogin(app, client, user.username, user.password, { state: 'st' });
    assert.equal(step2.status, 200);
    assert.match(step2.text, /Two-step verification/);
    assert.match(step2.text, /autocomplete="one-time-code"/);
    assert.ok(!step2.text.includes(user.password), 'the password is not in the page');
    const session = await app.db.query<{ sess: unknown }>('SELECT sess FROM sessions');
    assert.ok(!JSON.stringify(session.rows).includes(user.password), 'nor in plain text in the session store');

    const fields = { _csrf: hiddenField(step2.text, '_csrf'), step: 'totp', client_id: client.client_id, state: 'st', pending_key: hiddenField(step2.text, 'pending_key') };
    const wrong = await s.post('/sso/login', { ...fields, code: '000000' === (await generate({ secret })) ? '111111' : '000000' });
    assert.equal(wrong.status, 401);
    assert.match(wrong.text, /That code is not valid/);
    assert.match(wrong.text, /name="code"/, 'still the second step');

    const forged = await s.post('/sso/login', { ...fields, pending_key: Buffer.alloc(32).toString('base64url'), code: await generate({ secret }) });
    assert.equal(forged.status, 400, 'a pending sign-in opens only with its own key');

    const again = await submitLogin(app, client, user.username, user.password, { state: 'st' });
    const ok = await again.s.post('/sso/login', {
      _csrf: hiddenField(again.answer.text, '_csrf'), step: 'totp', client_id: client.client_id, state: 'st',
      pending_key: hiddenField(again.answer.text, 'pending_key'), code: await generate({ secret }),
    });
    assert.equal(ok.status, 303, ok.text);
    assert.equal(registeredTarget(ok.headers.location), 'https://client.example/sso/callback');
    assert.equal(new URL(ok.headers.location!).searchParams.get('state'), 'st');
  });

  it('sends security headers on every page: CSP without inline script, frame-ancestors none, nosniff', async () => {
    const client = await makeClient(app);
    const s = formSession(app.url);
    for (const path of [loginPath(client), '/login', '/sso/login', '/no/such/page', '/sso/logout']) {
      const res = await s.get(path);
      const csp = String(res.headers['content-security-policy']);
      assert.match(csp, /frame-ancestors 'none'/, path);
      assert.match(csp, /script-src 'self'(;|$)/, path);
      assert.match(csp, /default-src 'self'/, path);
      assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/, path);
      assert.equal(res.headers['x-content-type-options'], 'nosniff', path);
      assert.equal(res.headers['x-frame-options'], 'DENY', path);
      assert.doesNotMatch(res.text, /<script(?![^>]*\bsrc=)/, `${path}: no inline script`);
    }
    const page = await s.get(loginPath(client));
    assert.match(String(page.headers['content-security-policy']), /form-action 'self' https:\/\/client\.example(;|$)/);
    const css = await s.get('/assets/css/app.css');
    assert.equal(css.status, 200);
    assert.match(String(css.headers['content-type']), /text\/css/);
  });

  it('GET /sso/logout ends the session and invalidates the unused tokens', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app);
    const { s, answer } = await submitLogin(app, client, user.username, user.password);
    const token = new URL(answer.headers.location!).searchParams.get('token')!;
    const out = await s.get('/sso/logout');
    assert.equal(out.status, 200);
    assert.match(out.text, /You have signed out/);
    const validated = await app.http.post('/api/sso/validate', { client_id: client.client_id, client_secret: client.client_secret, token });
    assert.equal(validated.status, 401);
    assert.equal(validated.body.error, 'token_revoked');
    const back = await s.get(loginPath(client));
    assert.equal(back.status, 200, 'the form again, not a redirect');
    assert.match(back.text, /name="password"/);
  });

  it('shows error pages to browsers and JSON to API callers', async () => {
    const page = await formSession(app.url).get('/no/such/page');
    assert.equal(page.status, 404);
    assert.match(page.text, /Page not found/);
    const api = await app.http.get('/api/no/such/route');
    assert.equal(api.status, 404);
    assert.equal(api.body.error, 'not_found');
  });
});

describe('the sign-in page under the login rate limit', () => {
  let app: TestApp;
  before(async () => {
    app = await startTestApp({ RATE_LIMIT_LOGIN_PER_MIN: '2' });
  });
  after(() => app.close());

  it('renders the page with status 429 and the message once the limit is used up', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app);
    await submitLogin(app, client, user.username, 'wrong-1');
    await submitLogin(app, client, user.username, 'wrong-2');
    const { answer } = await submitLogin(app, client, user.username, user.password);
    assert.equal(answer.status, 429);
    assert.ok(Number(answer.headers['retry-after']) > 0);
    assert.match(answer.text, /Too many sign-in attempts from your network/);
    assert.match(answer.text, /name="password"/, 'the form stays');
  });
});
