import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeUser } from '../helpers/factories.ts';
import { formSession, hiddenField } from '../pages/form-session.ts';
import { signedIn, type SignedIn } from '../admin/support.ts';

/** A base64 PNG data: URL of `chars` characters (random bytes, as compressed image data look). */
function dataLogo(chars: number): string {
  const prefix = 'data:image/png;base64,';
  const b64 = randomBytes(Math.floor(((chars - prefix.length) / 4) * 3)).toString('base64');
  return prefix + b64;
}

/**
 * The client form sends the logo and the allow list again with every save; urlencoded, they
 * can outgrow a form body of 16 KiB though the API and the form's own limits accept them.
 * Found by a review helper.
 */
describe('a client whose logo and allow list the API accepted', () => {
  let app: TestApp;
  let admin: SignedIn;
  let adminUser: Awaited<ReturnType<typeof makeUser>>;
  beforeAll(async () => {
    app = await startTestApp();
    adminUser = await makeUser(app, { role: 'admin' });
    admin = await signedIn(app);
  });
  afterAll(() => app?.close());

  it('can still be edited (renamed) in the panel with the form as the page renders it', async () => {
    const logo = dataLogo(14_900); // under MAX_LOGO_URL_LENGTH (15000) and the form's own maxlength
    const created = await app.http.post('/api/admin/clients', {
      client_name: 'Shop', callback_url: 'https://shop.example/sso/callback',
      allowed_ips: Array.from({ length: 24 }, (_, i) => `2001:db8:4a2:${(0x100 + i).toString(16)}::/64`), logo_url: logo,
    }, admin.as);
    expect(created.status, created.text).toBe(201);
    const id = created.body.client_id;

    const s = formSession(app.app);
    const login = await s.get('/login');
    expect((await s.post('/login', { _csrf: hiddenField(login.text, '_csrf'), step: 'password', login: adminUser.username, password: adminUser.password })).status).toBe(303);
    const page = await s.get(`/admin/clients/${id}`);
    expect(page.status).toBe(200);
    expect(page.text.includes(logo), 'the edit form holds the logo').toBe(true);

    // what a browser sends for the edit form: every field as rendered, only the name changed
    const saved = await s.post(`/admin/clients/${id}`, {
      _csrf: hiddenField(page.text, '_csrf'),
      client_name: 'Shop (renamed)',
      callback_url: 'https://shop.example/sso/callback',
      allowed_ips: created.body.allowed_ips.join('\r\n'),
      logo_url: logo,
    });
    expect(saved.status, saved.text.slice(0, 300)).toBe(303);
    expect((await app.http.get(`/api/admin/clients/${id}`, admin.as)).body.client_name).toBe('Shop (renamed)');
  });
});
