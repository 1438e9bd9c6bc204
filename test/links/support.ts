import { expect } from 'vitest';
import type { TestApp } from '../helpers/app.ts';
import { makeUser } from '../helpers/factories.ts';
import { formSession, hiddenField } from '../pages/form-session.ts';

/** Signs a new user with `role` in over the API; request options carrying the session cookie. */
export async function apiSession(app: TestApp, role: 'admin' | 'user') {
  const user = await makeUser(app, { role });
  const res = await app.http.post('/api/auth/login', { login: user.username, password: user.password });
  const cookie = ([] as string[]).concat(res.headers['set-cookie'] ?? []).find((c) => c.startsWith('auth.sid='))?.split(';')[0];
  expect(res.status, res.text).toBe(200);
  return { user, as: { headers: { cookie: cookie!, 'content-type': 'application/json' } } };
}

/** The claims of a JWT, without checking it (the service checks; tests read). */
export function claimsOf(token: string | null): Record<string, unknown> {
  return JSON.parse(Buffer.from(String(token).split('.')[1], 'base64url').toString());
}

/** A signed-in dashboard user in a browser-like form session, with helpers for its forms. */
export async function dashboardUser(app: TestApp, login: string, password: string) {
  const s = formSession(app.app);
  const page = await s.get('/login');
  const answer = await s.post('/login', { _csrf: hiddenField(page.text, '_csrf'), step: 'password', login, password });
  expect(answer.status, answer.text).toBe(303);
  expect(answer.headers.location).toBe('/dashboard');
  const csrf = hiddenField((await s.get('/dashboard')).text, '_csrf');
  return {
    session: s,
    /** The dashboard page as HTML. */
    page: async () => (await s.get('/dashboard')).text,
    /** Posts the link form; returns the flash message shown on the dashboard afterwards. */
    link: async (clientId: string, externalUsername: string) => {
      const r = await s.post('/dashboard/link', { _csrf: csrf, client_id: clientId, external_username: externalUsername });
      expect(r.status).toBe(303);
      return flashOf((await s.get('/dashboard')).text);
    },
    unlink: async (clientId: string) => {
      const r = await s.post('/dashboard/unlink', { _csrf: csrf, client_id: clientId });
      expect(r.status).toBe(303);
      return flashOf((await s.get('/dashboard')).text);
    },
    /** One-click sign-in: the token the redirect carries. */
    signIn: async (clientId: string) => {
      const r = await s.post('/dashboard/sign-in', { _csrf: csrf, client_id: clientId });
      expect(r.status).toBe(303);
      const token = new URL(r.headers.location!, 'http://x').searchParams.get('token');
      expect(token, `redirected to ${r.headers.location}`).toBeTruthy();
      return token!;
    },
  };
}

/** The text of the flash message(s) on a page. */
export function flashOf(html: string): string {
  const m = [...html.matchAll(/class="alert[^"]*"[^>]*>([\s\S]*?)<\/div>/g)].map((x) => x[1].replace(/<[^>]+>/g, '').replace(/\s+/g, ' ').trim());
  return m.join(' | ');
}

/** The link state shown on a system's dashboard card: none, pending or active. */
export function cardState(html: string, clientId: string): string | null {
  const m = html.match(new RegExp(`data-client-id="${clientId}" data-link-status="(\\w+)"`));
  return m ? m[1] : null;
}

/** Link audit rows of a user, oldest first, details parsed. */
export async function linkAudit(app: TestApp, userId: number) {
  const r = await app.db.query<{ action: string; outcome: string; client_id: string | null; details: any }>(
    `SELECT action, outcome, client_id, details FROM audit_log
      WHERE user_id = $1 AND action IN ('user.link_client', 'user.unlink_client', 'user.link_confirm', 'user.link_revoke') ORDER BY id`,
    [userId],
  );
  return r.rows.map((row) => ({ ...row, details: typeof row.details === 'string' ? JSON.parse(row.details) : row.details }));
}
