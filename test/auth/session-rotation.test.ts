import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, TEST_ENV, type TestApp } from '../helpers/app.ts';
import { makeUser } from '../helpers/factories.ts';
import { signIn } from './support.ts';

const OLD = TEST_ENV.SESSION_SECRET;
const NEW = 'the-new-session-secret-the-new-session-0123456789';

/** Rotating SESSION_SECRET: instances on one database with the session keys before and after. */
describe('session key rotation', () => {
  let before: TestApp; // SESSION_SECRET=OLD
  let rotated: TestApp; // SESSION_SECRET=NEW, SESSION_PREVIOUS_SECRETS=OLD
  let dropped: TestApp; // SESSION_SECRET=NEW alone
  beforeAll(async () => {
    before = await startTestApp();
    rotated = await startTestApp({ SESSION_SECRET: NEW, SESSION_PREVIOUS_SECRETS: OLD }, { db: before.db });
    dropped = await startTestApp({ SESSION_SECRET: NEW }, { db: before.db });
  });
  afterAll(async () => {
    await dropped?.close();
    await rotated?.close();
    await before?.close();
  });

  const me = (app: TestApp, cookie: string) => app.http.get('/api/user', { headers: { cookie } });

  it('keeps a user signed in before the rotation signed in, pages included', async () => {
    const user = await makeUser(before);
    const { cookie } = await signIn(before, user.username, user.password);
    expect(cookie).toBeTruthy();
    const r = await me(rotated, cookie!);
    expect(r.status, r.text).toBe(200);
    expect(r.body.username).toBe(user.username);
    const page = await rotated.http.get('/dashboard', { headers: { cookie: cookie!, accept: 'text/html' } });
    expect(page.status).toBe(200);
    expect(page.text).toContain(user.username);
  });

  it('signs new cookies with SESSION_SECRET only', async () => {
    const user = await makeUser(before);
    const { cookie } = await signIn(rotated, user.username, user.password);
    expect((await me(dropped, cookie!)).status, 'the new key alone accepts it').toBe(200);
    expect((await me(before, cookie!)).status, 'the old key alone does not').toBe(401);
  });

  it('signs out the users of a key once it is dropped', async () => {
    const user = await makeUser(before);
    const { cookie } = await signIn(before, user.username, user.password);
    expect((await me(dropped, cookie!)).status).toBe(401);
  });

  it('refuses a previous session secret shorter than 32 characters at start', async () => {
    await expect(startTestApp({ SESSION_PREVIOUS_SECRETS: `${OLD},short` }, { db: before.db })).rejects.toThrow(/SESSION_PREVIOUS_SECRETS: each secret must be at least 32 characters/);
  });
});
