import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import { normalizeUsername } from '../../src/validation/username.ts';
import { claimsOf, dashboardUser } from './support.ts';

/**
 * Account usernames and link names are keyed by one normalization (src/validation/username.ts:
 * toLowerCase, which lower-cases a word-final capital sigma to ς, where PostgreSQL's lower()
 * gives σ). 'ΣΟΦΟΣ' is the account σοφος's own username at sign-in, so it is "another user's
 * username" to the link checks too (migrations/0014_name_keys_and_event_locks.sql).
 */
describe('a linked name and an account username that normalize alike', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(() => app.close());

  const validate = (client: { client_id: string; client_secret: string }, token: string) =>
    app.http.post('/api/sso/validate', { client_id: client.client_id, client_secret: client.client_secret, token });

  it('never proves a claim of another user\'s username written in capitals (Greek final sigma)', async () => {
    const client = await makeClient(app);
    const tag = randomBytes(3).toString('hex');
    const sophos = await makeUser(app, { username: `s${tag}.σοφος`, email: `sophos-${tag}@example.com` });
    expect(sophos.username).toMatch(/ς$/);
    const mallory = await makeUser(app);
    const m = await dashboardUser(app, mallory.username, mallory.password);

    const claimed = sophos.username.toUpperCase(); // 'ΣΟΦΟΣ…Σ': the service's own normalization makes it sophos's name
    expect(normalizeUsername(claimed)).toBe(sophos.username);
    expect(await m.link(client.client_id, claimed)).toMatch(/awaiting confirmation/);
    const confirmed = await app.http.post('/api/sso/links/confirm', { client_id: client.client_id, client_secret: client.client_secret, user_id: mallory.id, username: claimed });
    expect([confirmed.status, confirmed.body.error]).toStrictEqual([409, 'link_name_taken']);
  });

  it('never lets two users\' tokens at one client carry one (normalized) name', async () => {
    const client = await makeClient(app);
    const tag = randomBytes(3).toString('hex');
    const sophos = await makeUser(app, { username: `t${tag}.σοφος`, email: `sophos2-${tag}@example.com` });
    const mallory = await makeUser(app);
    const m = await dashboardUser(app, mallory.username, mallory.password);
    const s = await dashboardUser(app, sophos.username, sophos.password);

    expect(await m.link(client.client_id, sophos.username.toUpperCase())).toMatch(/awaiting confirmation/);
    // a client system vouching for the name (it folds case as this service does) cannot prove it: it is sophos's
    const confirmed = await app.http.post('/api/sso/links/confirm', { client_id: client.client_id, client_secret: client.client_secret, user_id: mallory.id, username: sophos.username.toUpperCase() });
    expect([confirmed.status, confirmed.body.error], confirmed.text).toStrictEqual([409, 'link_name_taken']);
    expect(claimsOf(await m.signIn(client.client_id)).username).toBe(mallory.username);
    expect(await s.link(client.client_id, sophos.username)).toMatch(/awaiting confirmation/);
    const fromSophos = (await validate(client, await s.signIn(client.client_id))).body.user.username;
    expect(normalizeUsername(fromSophos)).toBe(sophos.username);
  });

  it('keys a linked name as sign-in normalizes it, whatever the database\'s lower() says', async () => {
    const client = await makeClient(app);
    const holder = await makeUser(app);
    const h = await dashboardUser(app, holder.username, holder.password);
    const name = `K${randomBytes(3).toString('hex')}.ΣΟΦΟΣ`;
    expect(await h.link(client.client_id, name)).toMatch(/awaiting confirmation/);
    const row = (await app.db.query<{ username_key: string }>('SELECT username_key FROM user_client_links WHERE user_id = $1', [holder.id])).rows[0];
    expect(row.username_key).toBe(normalizeUsername(name));
    expect(row.username_key).toMatch(/ς$/);
  });

  it('refuses a new account whose username is a name linked (proven) at a client system, in capitals', async () => {
    const client = await makeClient(app);
    const tag = randomBytes(3).toString('hex');
    const holder = await makeUser(app);
    const h = await dashboardUser(app, holder.username, holder.password);
    const name = `L${tag}.ΛΟΓΟΣ`;
    expect(await h.link(client.client_id, name)).toMatch(/awaiting confirmation/);
    const proven = await app.http.post('/api/sso/links/confirm', { client_id: client.client_id, client_secret: client.client_secret, user_id: holder.id, username: name });
    expect(proven.status, proven.text).toBe(200);
    // 'λογος…ς' is the stored form of the name linked above (normalizeUsername)
    await expect(makeUser(app, { username: name, email: `logos-${tag}@example.com` })).rejects.toMatchObject({ status: 409, code: 'username_taken' });
  });
});
