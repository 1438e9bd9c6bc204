import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp, unique } from '../helpers/app.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import { formSession, hiddenField } from '../pages/form-session.ts';
import { dashboardUser, flashOf } from './support.ts';

/**
 * The service hides whether an account exists (the same 401 sequence for unknown names; forgot
 * password always 202). The dashboard's link form refuses a claim of another account's username,
 * so it tells a signed-in user whether that account exists: it is under the per-user limit, as
 * the one-click sign-in (a token, an audit row and webhook deliveries each) and the sessions forms are.
 */
describe('the signed-in pages\' forms under the per-user limit', () => {
  let app: TestApp;
  beforeAll(async () => { app = await startTestApp({ RATE_LIMIT_USER_PER_MIN: '6' }); });
  afterAll(() => app.close());

  it('the link form answers no more probes than the limit allows', async () => {
    const client = await makeClient(app);
    const attacker = await makeUser(app);
    const u = await dashboardUser(app, attacker.username, attacker.password);
    const csrf = hiddenField(await u.page(), '_csrf');
    const answers: string[] = [];
    for (let i = 0; i < 9; i++) {
      const r = await u.session.post('/dashboard/link', { _csrf: csrf, client_id: client.client_id, external_username: unique('probe') });
      if (r.status === 429) {
        // the limit's own answer, as on the security page and the panel: a page saying so, and when to try again
        expect(Number(r.headers['retry-after'])).toBeGreaterThan(0);
        expect(r.text).toMatch(/Too many requests/);
        answers.push('limited');
        continue;
      }
      expect(r.status).toBe(303);
      expect(flashOf((await u.session.get(r.headers.location!)).text)).toMatch(/awaiting confirmation/);
      answers.push('answered');
    }
    expect(answers).toStrictEqual([...Array(6).fill('answered'), 'limited', 'limited', 'limited']);
    const other = await dashboardUser(app, (await makeUser(app)).username, 'correct horse battery');
    const own = await other.session.post('/dashboard/link', { _csrf: hiddenField(await other.page(), '_csrf'), client_id: client.client_id, external_username: unique('own') });
    expect(flashOf((await other.session.get(own.headers.location!)).text), 'another user has a budget of their own').toMatch(/awaiting confirmation/);
  });

  it('so does the one-click sign-in', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app);
    await app.services.links.request(user, client.client_id, unique('name'), { ipAddress: '127.0.0.1', userAgent: null });
    const u = await dashboardUser(app, user.username, user.password);
    const csrf = hiddenField(await u.page(), '_csrf');
    const answers: string[] = [];
    for (let i = 0; i < 8; i++) {
      const r = await u.session.post('/dashboard/sign-in', { _csrf: csrf, client_id: client.client_id });
      answers.push(r.status === 303 && String(r.headers.location).startsWith(client.callback_url.split('?')[0]) ? 'token' : String(r.status));
    }
    expect(answers, 'six tokens, then 429').toStrictEqual([...Array(6).fill('token'), '429', '429']);
  });

  it('so does /sso/login visited while signed in, which issues the same token at once; the form itself is not limited', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app);
    const u = await dashboardUser(app, user.username, user.password);
    const statuses: number[] = [];
    for (let i = 0; i < 8; i++) statuses.push((await u.session.get(`/sso/login?client_id=${client.client_id}`)).status);
    expect(statuses, 'six tokens, then 429').toStrictEqual([...Array(6).fill(303), 429, 429]);
    const tokens = await app.db.query('SELECT 1 FROM sso_tokens WHERE user_id = $1', [user.id]);
    expect(tokens.rowCount).toBe(6);
    const anonymous = formSession(app.app);
    for (let i = 0; i < 8; i++) expect((await anonymous.get(`/sso/login?client_id=${client.client_id}`)).status, 'the sign-in form').toBe(200);
    // and the reference says so
    const op = (await app.http.get('/api/openapi.json')).body.paths['/sso/login'].get;
    expect(op.responses['429']).toBeDefined();
    expect(op.description).toContain('Rate limit: for a signed-in user, who gets a token at once, the user-management limit per user');
  });
});
