import { generate } from 'otplib';
import { expect } from 'vitest';
import type { TestApp } from '../helpers/app.ts';
import { makeUser } from '../helpers/factories.ts';
import type { HttpResponse } from '../helpers/http.ts';

/** The `auth.sid=...` pair of a response's Set-Cookie, or undefined. */
export function sessionCookie(res: HttpResponse): string | undefined {
  const all = ([] as string[]).concat(res.headers['set-cookie'] ?? []);
  return all.find((c) => c.startsWith('auth.sid='))?.split(';')[0];
}

/** Signs in through POST /api/auth/login; returns the response and the session cookie. */
export async function signIn(app: TestApp, login: string, password: string, extra: Record<string, unknown> = {}) {
  const res = await app.http.post('/api/auth/login', { login, password, ...extra });
  return { res, cookie: sessionCookie(res) };
}

/** Subscribes a (never answering) receiver to `events`, so the outbox writes delivery rows we can read. */
export async function subscribe(app: TestApp, events: string[]): Promise<number> {
  const r = await app.db.query<{ id: number }>(
    `INSERT INTO webhooks (url, events, secret) VALUES ('http://127.0.0.1:9/hook', $1, 'sixteen-chars-secret') RETURNING id`,
    [events],
  );
  return r.rows[0].id;
}

/** The data of every delivery of `event` to webhook `webhookId`, oldest first. */
export async function deliveries(app: TestApp, webhookId: number, event: string): Promise<any[]> {
  const r = await app.db.query<{ data: any }>(
    'SELECT data FROM webhook_deliveries WHERE webhook_id = $1 AND event = $2 ORDER BY created_at, id',
    [webhookId, event],
  );
  return r.rows.map((row) => (typeof row.data === 'string' ? JSON.parse(row.data) : row.data));
}

/** Audit rows of a user name (normalized), oldest first. */
export async function auditRows(app: TestApp, username: string): Promise<Array<{ action: string; outcome: string; details: any; ip_address: string }>> {
  const r = await app.db.query<{ action: string; outcome: string; details: any; ip_address: string }>(
    'SELECT action, outcome, details, ip_address FROM audit_log WHERE username = $1 ORDER BY id',
    [username],
  );
  return r.rows.map((row) => ({ ...row, details: typeof row.details === 'string' ? JSON.parse(row.details) : row.details }));
}

/**
 * The TOTP code of `secret` `steps` time steps from now. Close to the end of a step it
 * first waits for the next one, so the server (which accepts one step either side) checks
 * the code in the step it was computed in, even on a slow machine.
 */
export async function totpCode(secret: string, steps = 0): Promise<string> {
  const leftInStep = 30_000 - (Date.now() % 30_000);
  if (leftInStep < 3_000) await new Promise((r) => setTimeout(r, leftInStep + 50));
  return generate({ secret, epoch: Math.floor(Date.now() / 1000) + steps * 30 });
}

/** The failed-login row of a login name. */
export async function attemptRow(app: TestApp, login: string): Promise<{ failed_count: number; locked_until: Date | null } | undefined> {
  const r = await app.db.query<{ failed_count: number; locked_until: Date | null }>(
    'SELECT failed_count, locked_until FROM login_attempts WHERE login = $1',
    [login],
  );
  return r.rows[0];
}

/**
 * A user with two-factor on (through the API), signed in by session: the enabling code used
 * the previous time step, so the current one is still fresh.
 */
export async function enrolledUser(app: TestApp) {
  const user = await makeUser(app);
  const { cookie } = await signIn(app, user.username, user.password);
  const headers = { cookie: cookie! };
  const setup = await app.http.post('/api/user/2fa/setup', undefined, { headers });
  expect(setup.status, setup.text).toBe(200);
  const secret = setup.body.secret as string;
  const enabled = await app.http.post('/api/user/2fa/enable', { code: await totpCode(secret, -1), current_password: user.password }, { headers });
  expect(enabled.status, enabled.text).toBe(200);
  return { user, secret, headers, setup: setup.body, recoveryCodes: enabled.body.recovery_codes as string[] };
}
