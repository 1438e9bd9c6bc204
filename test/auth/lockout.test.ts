import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestApp, unique, type TestApp } from '../helpers/app.ts';
import { onPostgres } from '../helpers/db.ts';
import { makeUser } from '../helpers/factories.ts';
import { attemptRow, auditRows, deliveries, subscribe } from './support.ts';

describe('account lockout', () => {
  let app: TestApp;
  let webhookId: number;
  before(async () => {
    app = await startTestApp();
    webhookId = await subscribe(app, ['user.locked', 'user.login_failed']);
  });
  after(() => app.close());

  const login = (name: string, password: string) => app.http.post('/api/auth/login', { login: name, password });

  it('locks after 5 wrong passwords: the right one then gets 423 with remaining_minutes 30', async () => {
    const user = await makeUser(app);
    for (let i = 1; i <= 5; i++) {
      const r = await login(user.username, `wrong ${i}`);
      assert.equal(r.status, 401, `attempt ${i}`);
    }
    const right = await login(user.username, user.password);
    assert.equal(right.status, 423, right.text);
    assert.equal(right.body.error, 'account_locked');
    assert.equal(right.body.remaining_minutes, 30);
    assert.equal(typeof right.body.message, 'string');
    const viaToken = await app.http.post('/api/login', { username: user.username, password: user.password });
    assert.equal(viaToken.status, 423, 'the token login shares the counter');
  });

  it('does not count or extend on attempts during the lock', async () => {
    const user = await makeUser(app);
    for (let i = 0; i < 5; i++) await login(user.username, 'wrong');
    const before = await attemptRow(app, user.username);
    assert.equal(before?.failed_count, 5);
    assert.ok(before?.locked_until);
    await new Promise((r) => setTimeout(r, 20));
    const during = await login(user.username, 'wrong again');
    assert.equal(during.status, 423);
    const afterwards = await attemptRow(app, user.username);
    assert.equal(afterwards?.failed_count, 5, 'not counted');
    assert.equal(new Date(afterwards!.locked_until!).getTime(), new Date(before!.locked_until!).getTime(), 'not extended');
  });

  it('gives an unknown login name the same statuses and bodies as a known one (401 x5, then 423)', async () => {
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
    assert.deepEqual(unknown, known);
    assert.deepEqual(known.map((k) => (k as [number])[0]), [401, 401, 401, 401, 401, 423]);
  });

  it('treats Alice, ALICE and " alice" as one account with one counter', async () => {
    const name = unique('alice');
    const user = await makeUser(app, { username: name });
    const spellings = [name[0].toUpperCase() + name.slice(1), name.toUpperCase(), ` ${name}`, `${name.toUpperCase()} `];
    for (const spelling of spellings) {
      const ok = await login(spelling, user.password);
      assert.equal(ok.status, 200, `${JSON.stringify(spelling)} signs in`);
      assert.equal(ok.body.user.id, user.id);
    }
    for (const spelling of [...spellings, name]) assert.equal((await login(spelling, 'wrong')).status, 401);
    assert.equal((await attemptRow(app, name))?.failed_count, 5, 'one counter for every spelling');
    assert.equal((await login(name, user.password)).status, 423);
  });

  it('resets the counter on success', async () => {
    const user = await makeUser(app);
    for (let i = 0; i < 4; i++) await login(user.username, 'wrong');
    assert.equal((await login(user.username, user.password)).status, 200);
    assert.equal(await attemptRow(app, user.username), undefined);
    for (let i = 0; i < 4; i++) assert.equal((await login(user.username, 'wrong')).status, 401);
    assert.equal((await login(user.username, user.password)).status, 200, 'four more failures do not lock');
  });

  it('lets the user in after the cooldown and counts from zero again', async () => {
    const user = await makeUser(app);
    for (let i = 0; i < 5; i++) await login(user.username, 'wrong');
    assert.equal((await login(user.username, user.password)).status, 423);
    // the cooldown has elapsed: move the lock into the past instead of waiting 30 minutes
    await app.db.query("UPDATE login_attempts SET locked_until = now() - interval '1 second' WHERE login = $1", [user.username]);
    assert.equal((await login(user.username, 'wrong')).status, 401);
    assert.deepEqual(await attemptRow(app, user.username), { failed_count: 1, locked_until: null }, 'the counter started from zero');
    assert.equal((await login(user.username, user.password)).status, 200);
  });

  it('is cleared by `user unlock`', async () => {
    const user = await makeUser(app);
    for (let i = 0; i < 5; i++) await login(user.username, 'wrong');
    assert.equal((await login(user.username, user.password)).status, 423);
    await app.services.users.unlock(user.username.toUpperCase(), { via: 'cli' });
    assert.equal((await login(user.username, user.password)).status, 200);
  });

  it('counts wrong two-factor codes too (see two-factor tests) and audits the lockout, emitting user.locked', async () => {
    const user = await makeUser(app);
    for (let i = 0; i < 5; i++) await login(user.username, 'wrong');
    await login(user.username, user.password);
    const audit = await auditRows(app, user.username);
    const lock = audit.filter((r) => r.action === 'user.locked');
    assert.equal(lock.length, 1);
    assert.equal(lock[0].details.failed_count, 5);
    const reasons = audit.filter((r) => r.action === 'user.login').map((r) => r.details.reason);
    assert.deepEqual(reasons, ['invalid_password', 'invalid_password', 'invalid_password', 'invalid_password', 'invalid_password', 'account_locked']);
    const locked = (await deliveries(app, webhookId, 'user.locked')).filter((d) => d.user_id === user.id);
    assert.equal(locked.length, 1);
    assert.deepEqual(Object.keys(locked[0]).sort(), ['email', 'ip_address', 'locked_until', 'user_id']);
    assert.equal(locked[0].email, user.email);
    assert.equal(locked[0].ip_address, '127.0.0.1');
    const lockedUntil = new Date(locked[0].locked_until).getTime();
    assert.ok(Math.abs(lockedUntil - (Date.now() + 30 * 60_000)) < 60_000, 'locked for 30 minutes');
    const failed = (await deliveries(app, webhookId, 'user.login_failed')).filter((d) => d.user_id === user.id);
    assert.equal(failed.length, 6);
  });

  it('follows LOCKOUT_THRESHOLD and LOCKOUT_MINUTES', async () => {
    const custom = await startTestApp({ LOCKOUT_THRESHOLD: '2', LOCKOUT_MINUTES: '7' }, { db: app.db });
    try {
      const user = await makeUser(custom);
      for (let i = 0; i < 2; i++) assert.equal((await custom.http.post('/api/auth/login', { login: user.username, password: 'x' })).status, 401);
      const locked = await custom.http.post('/api/auth/login', { login: user.username, password: user.password });
      assert.equal(locked.status, 423);
      assert.equal(locked.body.remaining_minutes, 7);
    } finally {
      await custom.stop();
    }
  });

  it('counts no more than 5 of 20 concurrent wrong passwords and locks the account (PostgreSQL)', { skip: !onPostgres && 'needs PostgreSQL' }, async () => {
    const user = await makeUser(app);
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => login(user.username, `wrong ${i}`)));
    for (const a of answers) assert.ok(a.status === 401 || a.status === 423, `${a.status} ${a.text}`);
    const row = await attemptRow(app, user.username);
    assert.equal(row?.failed_count, 5);
    assert.ok(row?.locked_until && new Date(row.locked_until).getTime() > Date.now());
    const counted = (await auditRows(app, user.username)).filter((r) => r.action === 'user.login' && r.details.failed_count !== undefined);
    assert.ok(counted.length <= 5, `${counted.length} failures counted`);
    assert.equal((await auditRows(app, user.username)).filter((r) => r.action === 'user.locked').length, 1, 'locked once');
    assert.equal((await login(user.username, user.password)).status, 423);
  });
});
