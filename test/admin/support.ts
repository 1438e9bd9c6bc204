import type { TestApp } from '../helpers/app.ts';
import { makeUser } from '../helpers/factories.ts';
import type { RequestOptions } from '../helpers/http.ts';
import { signIn } from '../auth/support.ts';
import { formSession, hiddenField } from '../pages/form-session.ts';

/** A signed-in person: their record and the session cookie as request headers. */
export interface SignedIn {
  user: Awaited<ReturnType<typeof makeUser>>;
  cookie: string;
  as: RequestOptions;
}

/** Creates a user with `role` and signs them in through POST /api/auth/login. */
export async function signedIn(app: TestApp, role: 'admin' | 'user' = 'admin'): Promise<SignedIn> {
  const user = await makeUser(app, { role });
  const { res, cookie } = await signIn(app, user.username, user.password);
  if (res.status !== 200 || !cookie) throw new Error(`sign-in failed: ${res.status} ${res.text}`);
  // A same-origin script says what it sends; a cookie-carrying POST without it is refused (CSRF).
  return { user, cookie, as: { headers: { cookie, 'content-type': 'application/json' } } };
}

/** Audit rows of an action, newest first, details parsed. */
export async function auditOf(app: TestApp, action: string): Promise<Array<{ user_id: number | null; username: string | null; client_id: string | null; details: any }>> {
  const r = await app.db.query<{ user_id: number | null; username: string | null; client_id: string | null; details: any }>(
    'SELECT user_id, username, client_id, details FROM audit_log WHERE action = $1 ORDER BY id DESC',
    [action],
  );
  return r.rows.map((row) => ({ ...row, details: typeof row.details === 'string' ? JSON.parse(row.details) : row.details }));
}

/** A browser (formSession) signed in as `user` through the sign-in page, for the admin panel's pages and forms. */
export async function panelSession(app: TestApp, user: { username: string; password: string }) {
  const s = formSession(app.app);
  const page = await s.get('/login');
  const res = await s.post('/login', { _csrf: hiddenField(page.text, '_csrf'), step: 'password', login: user.username, password: user.password });
  if (res.status !== 303) throw new Error(`sign-in failed: ${res.status}`);
  return s;
}
