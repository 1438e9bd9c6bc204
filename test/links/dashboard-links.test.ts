import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import { apiSession, cardState, claimsOf, dashboardUser, flashOf, linkAudit } from './support.ts';

describe('dashboard links must be proven before their name goes into a token', () => {
  let app: TestApp;
  let http: TestApp['http'];
  beforeAll(async () => {
    app = await startTestApp();
    http = app.http;
  });
  afterAll(() => app.close());

  const validate = (client: { client_id: string; client_secret: string }, token: string) =>
    http.post('/api/sso/validate', { client_id: client.client_id, client_secret: client.client_secret, token });
  const confirm = (client: { client_id: string; client_secret: string }, body: Record<string, unknown>, localAddress?: string) =>
    http.post('/api/sso/links/confirm', { client_id: client.client_id, client_secret: client.client_secret, ...body }, localAddress ? { localAddress } : {});

  it('refuses the impersonation at every step: linking an administrator\'s name gives a token with the user\'s own name', async () => {
    const client = await makeClient(app);
    const boss = await makeUser(app, { role: 'admin' });
    const mallory = await makeUser(app);
    const m = await dashboardUser(app, mallory.username, mallory.password);

    // step 1: the link is accepted only as a pending claim
    expect(await m.link(client.client_id, 'root.admin')).toMatch(/awaiting confirmation/);
    expect(cardState(await m.page(), client.client_id)).toBe('pending');
    // step 2: the one-click sign-in names mallory, not the claimed name
    const token = await m.signIn(client.client_id);
    expect(claimsOf(token).username).toBe(mallory.username);
    const validated = await validate(client, token);
    expect(validated.status).toBe(200);
    expect(validated.body.user).toStrictEqual({ id: mallory.id, username: mallory.username, email: mallory.email, roles: [mallory.role], full_name: mallory.full_name });
    // step 3: mallory cannot prove it herself: not as a client without its secret, not as an administrator
    const noSecret = await confirm({ client_id: client.client_id, client_secret: 'guessed' }, { user_id: mallory.id, username: 'root.admin' });
    expect(noSecret.status).toBe(401);
    const asUser = await apiSession(app, 'user');
    const notAdmin = await http.post(`/api/admin/users/${mallory.id}/links/${client.client_id}/approve`, undefined, asUser.as);
    expect(notAdmin.status).toBe(403);
    // step 4: the real holder's claim is accepted alike, and once proven, mallory's can never be
    const bossSession = await dashboardUser(app, boss.username, boss.password);
    expect(await bossSession.link(client.client_id, 'Root.Admin')).toMatch(/Link requested: Root\.Admin is awaiting confirmation/);
    expect((await confirm(client, { user_id: boss.id, username: 'root.admin' })).status).toBe(200);
    const refused = await confirm(client, { user_id: mallory.id, username: 'root.admin' });
    expect([refused.status, refused.body.error]).toStrictEqual([409, 'link_name_taken']);
    const stillPending = await app.db.query("SELECT status FROM user_client_links WHERE user_id = $1 AND client_id = $2", [mallory.id, client.client_id]);
    expect(stillPending.rows).toStrictEqual([{ status: 'pending' }]);
    const again = await m.signIn(client.client_id);
    expect(claimsOf(again).username, 'still her own name').toBe(mallory.username);
  });

  it('puts the linked name in the token after the client system confirms the link, and says who proved it', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app);
    const u = await dashboardUser(app, user.username, user.password);
    await u.link(client.client_id, 'G.Hopper');
    expect(claimsOf(await u.signIn(client.client_id)).username).toBe(user.username);

    const wrongName = await confirm(client, { user_id: user.id, username: 'someone.else' });
    expect(wrongName.status).toBe(404);
    expect(wrongName.body.error).toBe('link_not_found');
    const unknownUser = await confirm(client, { user_id: 999999, username: 'g.hopper' });
    expect([unknownUser.status, unknownUser.body.error]).toStrictEqual([404, 'link_not_found']);

    // the user_id claim of a token is a string: accepted as well as the number
    const confirmed = await confirm(client, { user_id: String(user.id), username: 'g.hopper' });
    expect(confirmed.status, confirmed.text).toBe(200);
    expect(confirmed.body).toMatchObject({ user_id: user.id, client_id: client.client_id, external_username: 'g.hopper', status: 'active', confirmed_by: 'client' });

    const token = await u.signIn(client.client_id);
    expect(claimsOf(token).username, 'the confirmed spelling').toBe('g.hopper');
    const validated = await validate(client, token);
    expect(validated.status).toBe(200);
    expect(validated.body.user, 'validation names the user as the token does').toStrictEqual({ id: user.id, username: 'g.hopper', email: user.email, roles: [user.role], full_name: user.full_name });
    const audited = await app.db.query<{ username: string }>("SELECT username FROM audit_log WHERE action = 'token.validate' AND user_id = $1", [user.id]);
    expect(audited.rows.map((r) => r.username), 'the audit log keeps the account').toStrictEqual([user.username]);
    const issued = await app.db.query<{ username: string; details: any }>("SELECT username, details FROM audit_log WHERE action = 'token.issue' AND user_id = $1 ORDER BY id", [user.id]);
    expect(issued.rows.map((r) => [r.username, (typeof r.details === 'string' ? JSON.parse(r.details) : r.details).name_at_client]), 'and the name the token carried at the client beside it')
      .toStrictEqual([[user.username, undefined], [user.username, 'g.hopper']]);
    expect(cardState(await u.page(), client.client_id)).toBe('active');

    const twice = await confirm(client, { user_id: user.id, username: 'G.HOPPER' });
    expect(twice.status, 'confirming an active link again is harmless').toBe(200);
    const audit = await linkAudit(app, user.id);
    expect(audit.map((a) => [a.action, a.outcome, a.details.via])).toStrictEqual([
      ['user.link_client', 'success', 'page'],
      ['user.link_confirm', 'success', 'client'],
    ]);
  });

  it('lets a client system confirm only names at itself, and only from an allowed address', async () => {
    const shop = await makeClient(app);
    const wiki = await makeClient(app);
    const user = await makeUser(app);
    const u = await dashboardUser(app, user.username, user.password);
    await u.link(shop.client_id, 'ada');

    // the wiki's credentials speak for the wiki: the shop link is not its to confirm
    const other = await confirm(wiki, { user_id: user.id, username: 'ada' });
    expect([other.status, other.body.error]).toStrictEqual([404, 'link_not_found']);
    // a client_id in the body cannot redirect the confirmation: it is the credential
    const mixed = await http.post('/api/sso/links/confirm', { client_id: shop.client_id, client_secret: wiki.client_secret, user_id: user.id, username: 'ada' });
    expect(mixed.status).toBe(401);
    const elsewhere = await confirm(shop, { user_id: user.id, username: 'ada' }, '127.0.0.2');
    expect([elsewhere.status, elsewhere.body.error]).toStrictEqual([403, 'ip_not_allowed']);
    const status = await app.db.query('SELECT status FROM user_client_links WHERE user_id = $1', [user.id]);
    expect(status.rows).toStrictEqual([{ status: 'pending' }]);

    const pending = await http.post('/api/sso/links/pending', { client_id: shop.client_id, client_secret: shop.client_secret });
    expect(pending.status).toBe(200);
    expect(pending.body.links).toStrictEqual([{ user_id: user.id, account_username: user.username, external_username: 'ada', requested_at: expect.any(String) }]);
    const wikiPending = await http.post('/api/sso/links/pending', { client_id: wiki.client_id, client_secret: wiki.client_secret });
    expect(wikiPending.body.links).toStrictEqual([]);
  });

  it('gives a username at a client to one user only: claims are answered alike whoever holds the name, the proof decides', async () => {
    const client = await makeClient(app);
    const [first, second, third] = [await makeUser(app), await makeUser(app), await makeUser(app)];
    const a = await dashboardUser(app, first.username, first.password);
    const b = await dashboardUser(app, second.username, second.password);
    const c = await dashboardUser(app, third.username, third.password);

    const unclaimed = await a.link(client.client_id, 'shared.name');
    const whilePending = await b.link(client.client_id, 'shared.name');
    await confirm(client, { user_id: first.id, username: 'shared.name' });
    const whileHeld = await c.link(client.client_id, 'shared.name');
    // the same page whoever holds the name, bar the claimant's own username in "you sign in there as"
    const general = (text: string, u: { username: string }) => text.replace(u.username, 'ME');
    expect(general(whilePending, second), 'a pending claim of another user').toBe(general(unclaimed, first));
    expect(general(whileHeld, third), 'another user\'s proven link').toBe(general(unclaimed, first));
    for (const text of [whilePending, whileHeld]) expect(text).not.toContain(first.username);
    const rows = await app.db.query<{ user_id: number; status: string }>('SELECT user_id, status FROM user_client_links WHERE client_id = $1 ORDER BY user_id', [client.client_id]);
    expect(rows.rows).toStrictEqual([{ user_id: first.id, status: 'active' }, { user_id: second.id, status: 'pending' }, { user_id: third.id, status: 'pending' }]);
    expect((await linkAudit(app, second.id)).map((r) => [r.action, r.outcome])).toStrictEqual([['user.link_client', 'success']]);

    // the proof is refused to the client system and to an administrator: the name is the first user's
    const byClient = await confirm(client, { user_id: second.id, username: 'shared.name' });
    expect([byClient.status, byClient.body.error]).toStrictEqual([409, 'link_name_taken']);
    const boss = await apiSession(app, 'admin');
    const byAdmin = await http.post(`/api/admin/users/${third.id}/links/${client.client_id}/approve`, undefined, boss.as);
    expect([byAdmin.status, byAdmin.body.error]).toStrictEqual([409, 'link_name_taken']);
    expect(claimsOf(await b.signIn(client.client_id)).username, 'an unproven claim signs in as the user').toBe(second.username);
    expect(claimsOf(await a.signIn(client.client_id)).username).toBe('shared.name');
  });

  it('answers a claim of another user\'s username as one of an unknown name; a pending claim blocks neither a new account nor another claim', async () => {
    const client = await makeClient(app);
    const [owner, claimant] = [await makeUser(app), await makeUser(app)];
    const c = await dashboardUser(app, claimant.username, claimant.password);
    const nameOf = (text: string, name: string) => text.replace(name, 'NAME');
    const unknown = `nobody.${owner.id}x`;
    const ofUnknown = await c.link(client.client_id, unknown);
    const ofOwner = await c.link(client.client_id, owner.username);
    expect(nameOf(ofOwner, owner.username), 'another user\'s username').toBe(nameOf(ofUnknown, unknown));

    // the claimant's pending claim of "new.account…" stops no administrator and no other user
    const pendingName = `new.account.${owner.id}`;
    await c.link(client.client_id, pendingName);
    const boss = await apiSession(app, 'admin');
    const created = await http.post('/api/admin/users', { username: pendingName, email: `${pendingName}@example.com`, password: 'four unrelated words here' }, boss.as);
    expect(created.status, created.text).toBe(201);
    const other = await makeUser(app);
    const o = await dashboardUser(app, other.username, other.password);
    const unclaimedName = `free.${other.id}`;
    const claimedTwice = `claimed.${other.id}`;
    await c.link(client.client_id, claimedTwice);
    expect(nameOf(await o.link(client.client_id, claimedTwice), claimedTwice)).toBe(nameOf(await dashboardUser(app, owner.username, owner.password).then((d) => d.link(client.client_id, unclaimedName)), unclaimedName).replace(owner.username, other.username));
    const proven = await confirm(client, { user_id: other.id, username: claimedTwice });
    expect(proven.status, 'the other user\'s claim is proven though the claimant claimed it first').toBe(200);
  });

  it('keeps a linked name apart from other users\' own usernames, which tokens without a link carry', async () => {
    const client = await makeClient(app);
    const bob = await makeUser(app);
    const alice = await makeUser(app);
    const a = await dashboardUser(app, alice.username, alice.password);

    // bob's tokens at the client name him by his username: alice's claim of it is taken as any other, and never proven
    expect(await a.link(client.client_id, ` ${bob.username.toUpperCase()} `)).toMatch(/awaiting confirmation/);
    const refusedName = await confirm(client, { user_id: alice.id, username: bob.username });
    expect([refusedName.status, refusedName.body.error]).toStrictEqual([409, 'link_name_taken']);
    expect(await a.link(client.client_id, alice.username), 'her own name is hers to link').toMatch(/awaiting confirmation/);
    expect((await confirm(client, { user_id: alice.id, username: alice.username })).status).toBe(200);

    // a pending claim holds nothing: an account can be made with its name, and the claim is then never proven
    expect(await a.link(client.client_id, 'future.name')).toMatch(/awaiting confirmation/);
    await makeUser(app, { username: 'Future.Name' });
    const refused = await confirm(client, { user_id: alice.id, username: 'future.name' });
    expect([refused.status, refused.body.error]).toStrictEqual([409, 'link_name_taken']);
    expect(claimsOf(await a.signIn(client.client_id)).username, 'still her own name').toBe(alice.username);

    // a proven link's name cannot become a new account's username
    expect(await a.link(client.client_id, 'proven.name')).toMatch(/awaiting confirmation/);
    expect((await confirm(client, { user_id: alice.id, username: 'proven.name' })).status).toBe(200);
    await expect(makeUser(app, { username: 'Proven.Name' })).rejects.toMatchObject({ status: 409, code: 'username_taken' });
  });

  it('settles two users proving one name at the same moment in the database: one gets it', async () => {
    const client = await makeClient(app);
    const users = await Promise.all([makeUser(app), makeUser(app), makeUser(app)]);
    const ctx = { ipAddress: '127.0.0.1', userAgent: null };
    for (const u of users) await app.services.links.request(u, client.client_id, 'Race.Winner', ctx);
    const outcomes = await Promise.allSettled(users.map((u) => app.services.links.confirmByClient(client.client_id, u.id, 'race.winner', ctx)));
    expect(outcomes.filter((o) => o.status === 'fulfilled').length).toBe(1);
    for (const o of outcomes.filter((x) => x.status === 'rejected')) expect((o as PromiseRejectedResult).reason.code).toBe('link_name_taken');
    const rows = await app.db.query("SELECT 1 FROM user_client_links WHERE client_id = $1 AND status = 'active'", [client.client_id]);
    expect(rows.rowCount).toBe(1);
  });

  it('stops a link\'s name at once when the user withdraws it or links another name', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app);
    const u = await dashboardUser(app, user.username, user.password);
    await u.link(client.client_id, 'first.name');
    await confirm(client, { user_id: user.id, username: 'first.name' });
    const inFlight = await u.signIn(client.client_id);
    expect(claimsOf(inFlight).username).toBe('first.name');

    // another name: pending again, and the token carrying the old name dies
    expect(await u.link(client.client_id, 'second.name')).toMatch(/awaiting confirmation/);
    expect((await validate(client, inFlight)).body.error).toBe('token_revoked');
    expect(claimsOf(await u.signIn(client.client_id)).username).toBe(user.username);

    await confirm(client, { user_id: user.id, username: 'second.name' });
    const beforeWithdraw = await u.signIn(client.client_id);
    expect(claimsOf(beforeWithdraw).username).toBe('second.name');
    expect(await u.unlink(client.client_id)).toMatch(/The link was removed/);
    expect((await validate(client, beforeWithdraw)).body.error).toBe('token_revoked');
    expect(cardState(await u.page(), client.client_id)).toBe('none');

    const audit = await linkAudit(app, user.id);
    expect(audit.map((a) => a.action)).toStrictEqual(['user.link_client', 'user.link_confirm', 'user.link_client', 'user.link_confirm', 'user.unlink_client']);
    expect(audit[2].details).toMatchObject({ external_username: 'second.name', replaced: 'first.name', replaced_status: 'active' });
    expect(audit[4].details).toMatchObject({ external_username: 'second.name', status: 'active' });
  });

  it('refuses at validation a token whose link was revoked while it was being issued', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app);
    const u = await dashboardUser(app, user.username, user.password);
    await u.link(client.client_id, 'racer');
    await confirm(client, { user_id: user.id, username: 'racer' });
    const token = await u.signIn(client.client_id);
    // the revocation's own token invalidation ran before this token existed: only the link row is gone
    await app.db.query('DELETE FROM user_client_links WHERE user_id = $1', [user.id]);
    const answer = await validate(client, token);
    expect([answer.status, answer.body.error]).toStrictEqual([401, 'token_revoked']);
  });

  it('shows each link\'s state on the dashboard and lets the user withdraw a pending one', async () => {
    const pendingClient = await makeClient(app, { name: 'Pending System' });
    const activeClient = await makeClient(app, { name: 'Active System' });
    const user = await makeUser(app);
    const u = await dashboardUser(app, user.username, user.password);
    await u.link(pendingClient.client_id, 'p.name');
    await u.link(activeClient.client_id, 'a.name');
    await confirm(activeClient, { user_id: user.id, username: 'a.name' });
    const html = await u.page();
    expect(cardState(html, pendingClient.client_id)).toBe('pending');
    expect(cardState(html, activeClient.client_id)).toBe('active');
    expect(html).toMatch(/Awaiting confirmation by Pending System or an administrator; until then you sign in there as/);
    expect(html).toMatch(/aria-label="Withdraw the link to Pending System"/);
    expect(html).toMatch(/aria-label="Unlink Active System"/);
    expect(html).toMatch(/class="badge badge--pending">Pending</);

    expect(await u.unlink(pendingClient.client_id)).toMatch(/The link was removed/);
    expect(cardState(await u.page(), pendingClient.client_id)).toBe('none');
    const withdrawn = (await linkAudit(app, user.id)).at(-1)!;
    expect([withdrawn.action, withdrawn.client_id, withdrawn.details.status]).toStrictEqual(['user.unlink_client', pendingClient.client_id, 'pending']);
    // the name is free again for anyone
    const other = await makeUser(app);
    const o = await dashboardUser(app, other.username, other.password);
    expect(await o.link(pendingClient.client_id, 'p.name')).toMatch(/awaiting confirmation/);
    expect(flashOf(await o.page())).toBe('');
  });
});
