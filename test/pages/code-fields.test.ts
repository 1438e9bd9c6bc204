import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeUser } from '../helpers/factories.ts';
import { totpCode } from '../auth/support.ts';
import { formSession, hiddenField } from './form-session.ts';

/** The tag of the input with this id in a page ('' when there is none). */
function field(html: string, id: string): string {
  return html.match(new RegExp(`<input[^>]*id="${id}"[^>]*>`))?.[0] ?? '';
}

describe('code fields of the pages', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(() => app.close());

  it('lets a keyboard type letters in every code field that takes a recovery code (inputmode text, one-time-code)', async () => {
    const user = await makeUser(app);
    const ctx = { ipAddress: '127.0.0.1', userAgent: null };
    const { secret } = await app.services.auth.twoFactor.startSetup(user, ctx, { kind: 'session', sid: 'test-setup' });
    await app.services.auth.twoFactor.enable(user, await totpCode(secret, -1), ctx, { kind: 'session', sid: 'test-setup' });

    const s = formSession(app.app);
    const login = await s.get('/login?next=/account/security');
    const step = await s.post('/login', { _csrf: hiddenField(login.text, '_csrf'), step: 'password', login: user.username, password: user.password, next: '/account/security' });
    const codeStep = step.status === 303 ? (await s.get(step.headers.location!)).text : step.text;
    expect(codeStep, 'the sign-in page asks for the code').toContain('Enter one of your recovery codes instead');
    expect(field(codeStep, 'code')).toContain('inputmode="text"');
    expect(field(codeStep, 'code')).toContain('autocomplete="one-time-code"');

    const hidden = [...codeStep.matchAll(/type="hidden" name="([^"]+)"/g)].map((m) => [m[1], hiddenField(codeStep, m[1])]);
    const signedIn = await s.post('/login', { ...Object.fromEntries(hidden), code: await totpCode(secret) });
    expect(signedIn.status, signedIn.text.slice(0, 300)).toBe(303);
    const security = (await s.get('/account/security')).text;
    for (const id of ['recovery-code', 'disable-code']) {
      expect(field(security, id), id).toContain('inputmode="text"');
      expect(field(security, id), id).toContain('autocomplete="one-time-code"');
    }
  });
});
