import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeUser } from '../helpers/factories.ts';
import { totpCode } from '../auth/support.ts';
import { formSession, hiddenField } from './form-session.ts';

type Session = ReturnType<typeof formSession>;

/** The recovery codes a page shows (none: []). */
function shownCodes(html: string): string[] {
  return [...html.matchAll(/<li><code>([a-z0-9-]+)<\/code><\/li>/g)].map((m) => m[1]);
}

describe('the account security page (HTTP level)', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(() => app.close());

  /** Whether any stored session row holds `text`. */
  const sessionsHold = async (text: string) => JSON.stringify((await app.db.query<{ sess: unknown }>('SELECT sess FROM sessions')).rows).includes(text);

  /** A user signed in through /login with a two-step setup started on the page; returns the session, its CSRF token and the key. */
  async function startedSetup() {
    const user = await makeUser(app);
    const s = formSession(app.app);
    const login = await s.get('/login');
    const signedIn = await s.post('/login', { _csrf: hiddenField(login.text, '_csrf'), step: 'password', login: user.username, password: user.password });
    expect(signedIn.status, signedIn.text.slice(0, 300)).toBe(303);
    const csrf = hiddenField((await s.get('/account/security')).text, '_csrf');
    expect((await s.post('/account/security/totp/setup', { _csrf: csrf })).status).toBe(303);
    const secret = (await s.get('/account/security')).text.match(/data-field="totp-secret"[^>]*>([^<]*)</)![1].replace(/\s+/g, '');
    return { user, s, csrf, secret };
  }

  /** Turns two-step verification on through the page; returns the answer (with the codes). */
  async function enableOnPage(s: Session, csrf: string, password: string, secret: string) {
    const answer = await s.post('/account/security/totp/enable', { _csrf: csrf, current_password: password, code: await totpCode(secret, -1) });
    expect(answer.status, answer.text.slice(0, 300)).toBe(200);
    return answer;
  }

  it('shows the recovery codes of a double-submitted "turn on" in the answer to the form that made them, never in a session row', async () => {
    const { user, s, csrf, secret } = await startedSetup();
    const code = await totpCode(secret, -1);
    const send = () => s.post('/account/security/totp/enable', { _csrf: csrf, current_password: user.password, code });
    const answers = await Promise.all([send(), send()]);
    const shown = answers.filter((a) => a.status === 200);
    expect(shown.length, `answers: ${answers.map((a) => a.status)}`).toBe(1);
    const [page] = shown;
    expect(page.headers['cache-control']).toBe('no-store');
    const codes = shownCodes(page.text);
    expect(codes.length, 'the ten codes are on the page the form answers with').toBe(10);
    expect(page.text).toContain('Two-step verification is on.');
    expect(page.text, 'the page asks to be remembered at its own address').toContain('data-shown-at="/account/security#recovery-codes"');
    const other = answers.find((a) => a !== page)!;
    // the second waited for the first: "already on" (303 back to the page), or on PostgreSQL,
    // whose row lock it waited on, the code's time step already claimed (400 totp_reused)
    expect([303, 400], 'the second submit is refused').toContain(other.status);
    expect(shownCodes(other.text)).toStrictEqual([]);
    for (const c of codes) expect(await sessionsHold(c), 'no plain recovery code in a session row').toBe(false);

    const later = await s.get('/account/security');
    expect(shownCodes(later.text), 'shown once').toStrictEqual([]);
    expect(later.text).toContain('10 of 10 recovery codes unused.');
    // the codes shown are the account's: one of them makes new ones
    const renewed = await s.post('/account/security/recovery-codes', { _csrf: csrf, code: codes[0] });
    expect(renewed.status, renewed.text.slice(0, 300)).toBe(200);
  });

  it('shows new recovery codes in the answer to their form (200, no-store), once, never in a session row', async () => {
    const { user, s, csrf, secret } = await startedSetup();
    const old = shownCodes((await enableOnPage(s, csrf, user.password, secret)).text);
    const renewed = await s.post('/account/security/recovery-codes', { _csrf: csrf, code: old[2] });
    expect(renewed.status, renewed.text.slice(0, 300)).toBe(200);
    expect(renewed.headers['cache-control']).toBe('no-store');
    const codes = shownCodes(renewed.text);
    expect(codes.length).toBe(10);
    expect(codes.filter((c) => old.includes(c))).toStrictEqual([]);
    expect(renewed.text).toContain('New recovery codes were created. The old ones no longer work.');
    expect(renewed.text).toContain('data-shown-at="/account/security#recovery-codes"');
    for (const c of codes) expect(await sessionsHold(c)).toBe(false);
    const later = await s.get('/account/security');
    expect(shownCodes(later.text)).toStrictEqual([]);
    expect(later.text).toContain('10 of 10 recovery codes unused.');
  });
});
