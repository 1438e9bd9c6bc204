import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, unique, type TestApp } from '../helpers/app.ts';
import { onPostgres } from '../helpers/db.ts';
import { makeUser } from '../helpers/factories.ts';
import { attemptRow, auditRows, deliveries, subscribe } from './support.ts';

describe('account lockout', () => {
  let app: TestApp;
  let webhookId: number;
  beforeAll(async () => {
    app = await startTestApp();
    webhookId = await subscribe(app, ['user.locked', 'user.login_failed']);
  });
  afterAll(() => app.close());

  const login = (name: string, password: string) => app.http.post('/api/auth/login', { login: name, password });

  it('locks after 5 wrong passwords: the fifth is a 401 that says so (locked, remaining_minutes 30), the sixth and the right one get 423', async () => {
    const user = await makeUser(app);
    for (let i = 1; i <= 4; i++) {
      const r = await login(user.username, `wrong ${i}`);
      expect(r.status, `attempt ${i}`).toBe(401);
      expect(r.body.attempts_remaining, `attempt ${i}`).toBe(5 - i);
    }
    const fifth = await login(user.username, 'wrong 5');
    expect(fifth.status, 'the fifth wrong password is a failed attempt with invalid credentials (SPEC 4.5, 7)').toBe(401);
    expect(fifth.body.error).toBe('invalid_credentials');
    expect(fifth.body, 'the attempt that locks is told at once').toMatchObject({ locked: true, remaining_minutes: 30, attempts_remaining: 0 });
    expect(fifth.body.message).toMatch(/now locked for 30 minutes/);
    const sixth = await login(user.username, 'wrong 6');
    expect([sixth.status, sixth.body.error, sixth.body.remaining_minutes]).toStrictEqual([423, 'account_locked', 30]);
    const right = await login(user.username, user.password);
    expect(right.status, right.text).toBe(423);
    expect(right.body.error).toBe('account_locked');
    expect(right.body.remaining_minutes).toBe(30);
    expect(typeof right.body.message).toBe('string');
    const viaToken = await app.http.post('/api/login', { username: user.username, password: user.password });
    expect(viaToken.status, 'the token login shares the counter').toBe(423);
  });

  it('answers the same on /api/login: the fifth wrong password 401 with locked and the minutes, the sixth 423', async () => {
    const user = await makeUser(app);
    const statuses: Array<[number, unknown]> = [];
    for (let i = 1; i <= 6; i++) {
      const r = await app.http.post('/api/login', { username: user.username, password: `wrong ${i}` });
      statuses.push([r.status, r.body.locked]);
      if (i === 5) expect(r.body).toMatchObject({ error: 'invalid_credentials', locked: true, remaining_minutes: 30 });
    }
    expect(statuses).toStrictEqual([[401, undefined], [401, undefined], [401, undefined], [401, undefined], [401, true], [423, undefined]]);
  });

  it('says in Retry-After how long the lock really lasts, in seconds; the body\'s minutes are rounded up', async () => {
    const user = await makeUser(app);
    for (let i = 1; i <= 5; i++) await login(user.username, `wrong ${i}`);
    await app.db.query("UPDATE login_attempts SET locked_until = now() + interval '61 seconds' WHERE login = $1", [user.username.toLowerCase()]);
    const r = await login(user.username, user.password);
    expect(r.status).toBe(423);
    expect(r.body.remaining_minutes, 'two minutes, rounded up').toBe(2);
    const retryAfter = Number(r.headers['retry-after']);
    expect(retryAfter, `Retry-After for a lock ending in 61 s: ${r.headers['retry-after']}`).toBeGreaterThanOrEqual(58);
    expect(retryAfter).toBeLessThanOrEqual(61);
  });

  it('does not count or extend on attempts during the lock', async () => {
    const user = await makeUser(app);
    for (let i = 0; i < 5; i++) await login(user.username, 'wrong');
    const before = await attemptRow(app, user.username);
    expect(before?.failed_count).toBe(5);
    expect(before?.locked_until).toBeTruthy();
    await new Promise((r) => setTimeout(r, 20));
    const during = await login(user.username, 'wrong again');
    expect(during.status).toBe(423);
    const afterwards = await attemptRow(app, user.username);
    expect(afterwards?.failed_count, 'not counted').toBe(5);
    expect(new Date(afterwards!.locked_until!).getTime(), 'not extended').toBe(new Date(before!.locked_until!).getTime());
  });

  it('gives an unknown login name the same statuses and bodies as a known one (401 x5, the fifth saying locked, then 423)', async () => {
    const user = await makeUser(app);
    const ghost = unique('ghost');
    const known: unknown[] = [];
    const unknown: unknown[] = [];
    for (let i = 0; i < 6; i++) {
      const a = await login(user.username, 'wrong');
      const b = await login(ghost, 'wrong');
      known.push([a.status, a.body]);
      unknown.push([b.status, b.body]);
    }
    expect(unknown).toStrictEqual(known);
    expect(known.map((k) => (k as [number])[0])).toStrictEqual([401, 401, 401, 401, 401, 423]);
    expect(known.map((k) => (k as [number, any])[1].attempts_remaining), 'both are warned alike').toStrictEqual([4, 3, 2, 1, 0, undefined]);
    expect(known.map((k) => (k as [number, any])[1].locked), 'both are told of the lock alike').toStrictEqual([undefined, undefined, undefined, undefined, true, undefined]);
  });

  it('treats Alice, ALICE and " alice" as one account with one counter', async () => {
    const name = unique('alice');
    const user = await makeUser(app, { username: name });
    const spellings = [name[0].toUpperCase() + name.slice(1), name.toUpperCase(), ` ${name}`, `${name.toUpperCase()} `];
    for (const spelling of spellings) {
      const ok = await login(spelling, user.password);
      expect(ok.status, `${JSON.stringify(spelling)} signs in`).toBe(200);
      expect(ok.body.user.id).toBe(user.id);
    }
    for (const spelling of spellings) expect((await login(spelling, 'wrong')).status).toBe(401);
    const fifth = await login(name, 'wrong');
    expect([fifth.status, fifth.body.locked], 'the fifth failure of any spelling locks').toStrictEqual([401, true]);
    expect((await attemptRow(app, name))?.failed_count, 'one counter for every spelling').toBe(5);
    expect((await login(name, user.password)).status).toBe(423);
  });

  it('resets the counter on success', async () => {
    const user = await makeUser(app);
    for (let i = 0; i < 4; i++) await login(user.username, 'wrong');
    expect((await login(user.username, user.password)).status).toBe(200);
    expect(await attemptRow(app, user.username)).toBe(undefined);
    for (let i = 0; i < 4; i++) expect((await login(user.username, 'wrong')).status).toBe(401);
    expect((await login(user.username, user.password)).status, 'four more failures do not lock').toBe(200);
  });

  it('lets the user in after the cooldown and counts from zero again', async () => {
    const user = await makeUser(app);
    for (let i = 0; i < 5; i++) await login(user.username, 'wrong');
    expect((await login(user.username, user.password)).status).toBe(423);
    // the cooldown has elapsed: move the lock into the past instead of waiting 30 minutes
    await app.db.query("UPDATE login_attempts SET locked_until = now() - interval '1 second' WHERE login = $1", [user.username]);
    expect((await login(user.username, 'wrong')).status).toBe(401);
    expect(await attemptRow(app, user.username), 'the counter started from zero').toStrictEqual({ failed_count: 1, locked_until: null });
    expect((await login(user.username, user.password)).status).toBe(200);
  });

  it('is cleared by `user unlock`', async () => {
    const user = await makeUser(app);
    for (let i = 0; i < 5; i++) await login(user.username, 'wrong');
    expect((await login(user.username, user.password)).status).toBe(423);
    await app.services.users.unlock(user.username.toUpperCase(), { via: 'cli' });
    expect((await login(user.username, user.password)).status).toBe(200);
  });

  it('counts wrong two-factor codes too (see two-factor tests) and audits the lockout, emitting user.locked', async () => {
    const user = await makeUser(app);
    for (let i = 0; i < 5; i++) await login(user.username, 'wrong');
    await login(user.username, user.password);
    const audit = await auditRows(app, user.username);
    const lock = audit.filter((r) => r.action === 'user.locked');
    expect(lock.length).toBe(1);
    expect(lock[0].details.failed_count).toBe(5);
    const reasons = audit.filter((r) => r.action === 'user.login').map((r) => r.details.reason);
    expect(reasons).toStrictEqual(['invalid_password', 'invalid_password', 'invalid_password', 'invalid_password', 'invalid_password', 'account_locked']);
    const locked = (await deliveries(app, webhookId, 'user.locked')).filter((d) => d.user_id === user.id);
    expect(locked.length).toBe(1);
    expect(Object.keys(locked[0]).sort()).toStrictEqual(['email', 'ip_address', 'locked_until', 'user_id']);
    expect(locked[0].email).toBe(user.email);
    expect(locked[0].ip_address).toBe('127.0.0.1');
    const lockedUntil = new Date(locked[0].locked_until).getTime();
    expect(Math.abs(lockedUntil - (Date.now() + 30 * 60_000)) < 60_000, 'locked for 30 minutes').toBeTruthy();
    const failed = (await deliveries(app, webhookId, 'user.login_failed')).filter((d) => d.user_id === user.id);
    expect(failed.length).toBe(6);
  });

  it('follows LOCKOUT_THRESHOLD and LOCKOUT_MINUTES', async () => {
    const custom = await startTestApp({ LOCKOUT_THRESHOLD: '2', LOCKOUT_MINUTES: '7' }, { db: app.db });
    try {
      const user = await makeUser(custom);
      const first = await custom.http.post('/api/auth/login', { login: user.username, password: 'x' });
      expect(first.status).toBe(401);
      expect(first.body.attempts_remaining).toBe(1);
      expect(first.body.message, 'the attempt before the lock warns').toMatch(/One more failed attempt locks the account for 7 minutes/);
      const second = await custom.http.post('/api/auth/login', { login: user.username, password: 'x' });
      expect([second.status, second.body.locked, second.body.remaining_minutes]).toStrictEqual([401, true, 7]);
      expect(second.body.message).toMatch(/now locked for 7 minutes/);
      const locked = await custom.http.post('/api/auth/login', { login: user.username, password: user.password });
      expect(locked.status).toBe(423);
      expect(locked.body.remaining_minutes).toBe(7);
    } finally {
      await custom.close();
    }
  });

  it.skipIf(!onPostgres && 'needs PostgreSQL')('counts no more than 5 of 20 concurrent wrong passwords and locks the account (PostgreSQL)', async () => {
    const user = await makeUser(app);
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => login(user.username, `wrong ${i}`)));
    for (const a of answers) expect(a.status === 401 || a.status === 423, `${a.status} ${a.text}`).toBeTruthy();
    const row = await attemptRow(app, user.username);
    expect(row?.failed_count).toBe(5);
    expect(row?.locked_until && new Date(row.locked_until).getTime() > Date.now()).toBeTruthy();
    const counted = (await auditRows(app, user.username)).filter((r) => r.action === 'user.login' && r.details.failed_count !== undefined);
    expect(counted.length <= 5, `${counted.length} failures counted`).toBeTruthy();
    expect((await auditRows(app, user.username)).filter((r) => r.action === 'user.locked').length, 'locked once').toBe(1);
    expect((await login(user.username, user.password)).status).toBe(423);
  });
});
