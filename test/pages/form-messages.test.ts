import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeUser } from '../helpers/factories.ts';
import { signedIn } from '../admin/support.ts';
import { send } from '../helpers/http.ts';
import { formSession, hiddenField } from './form-session.ts';

/**
 * A value of the wrong type is refused in words a person reads (src/http/validate.ts), never
 * with zod's default text ("Invalid input: expected string, received array"): on a page, a
 * form field sent twice; in an API answer's details, a missing, repeated or mistyped field.
 */
describe('messages for values of the wrong type', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(() => app.close());

  it('a page form with a field sent twice says to give one value', async () => {
    const user = await makeUser(app);
    const s = formSession(app.app);
    const login = await s.get('/login');
    expect((await s.post('/login', { _csrf: hiddenField(login.text, '_csrf'), step: 'password', login: user.username, password: user.password })).status).toBe(303);
    const form = await s.get('/account/password');
    const body = new URLSearchParams([
      ['_csrf', hiddenField(form.text, '_csrf')],
      ['current_password', user.password],
      ['new_password', 'four unrelated words here'],
      ['new_password', 'four unrelated words there'],
      ['confirm_password', 'four unrelated words here'],
    ]).toString();
    const cookie = [...s.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
    const r = await send(app.app, '/account/password', {
      method: 'POST', body, headers: { accept: 'text/html', cookie, 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(r.status, r.text.slice(0, 300)).toBe(400);
    expect(r.text).toContain('Give one value, not a list');
    expect(r.text).not.toMatch(/Invalid input|expected string|received array/);
  });

  it('an API answer names what was wrong with each field in words', async () => {
    const r = await app.http.post('/api/auth/login', { login: ['alice', 'bob'], password: 5 });
    expect(r.status, r.text).toBe(400);
    expect(r.body.error).toBe('validation_error');
    expect(r.body.details).toStrictEqual([
      { path: 'login', message: 'Give one value, not a list' },
      { path: 'password', message: 'Must be text, not a number' },
    ]);
    // a number that is not the one wanted is not "a number, not a number"
    const limits = await app.http.get('/api/admin/audit?limit=abc', (await signedIn(app, 'admin')).as);
    expect(limits.status, limits.text).toBe(400);
    expect(limits.body.details?.[0]?.message ?? limits.body.message).not.toMatch(/not a number/);
    const missing = await app.http.post('/api/auth/login', { login: 'alice' });
    expect(missing.body.details).toStrictEqual([{ path: 'password', message: 'Required' }]);
  });

  it('a value out of range, not among the choices or of the wrong form is refused in words too', async () => {
    const admin = (await signedIn(app, 'admin')).as;
    const filters = await app.http.get('/api/admin/audit?outcome=bogus&limit=9999', admin);
    expect(filters.status, filters.text).toBe(400);
    expect(filters.body.details).toStrictEqual([
      { path: 'outcome', message: 'Must be one of: success, failure' },
      { path: 'limit', message: 'At most 500' },
    ]);
    const long = await app.http.post('/api/auth/login', { login: 'x'.repeat(300), password: '' });
    expect(long.body.details).toStrictEqual([
      { path: 'login', message: 'At most 254 characters' },
      { path: 'password', message: 'Must not be empty' },
    ]);
    // the page form: over-long values, which browsers never send through it, still get words
    const user = await makeUser(app);
    const s = formSession(app.app);
    const login = await s.get('/login');
    expect((await s.post('/login', { _csrf: hiddenField(login.text, '_csrf'), step: 'password', login: user.username, password: user.password })).status).toBe(303);
    const form = await s.get('/account/password');
    const r = await s.post('/account/password', {
      _csrf: hiddenField(form.text, '_csrf'), current_password: 'x'.repeat(1100), new_password: 'four unrelated words here', confirm_password: 'four unrelated words here',
    });
    expect(r.status, r.text.slice(0, 300)).toBe(400);
    expect(r.text).toContain('At most 1024 characters');
    expect(r.text).not.toMatch(/Too big|expected string|&lt;=/);
  });
});
