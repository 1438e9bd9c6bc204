import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db, Queryable, Transaction } from '../../src/db/db.ts';
import { createMigratedDatabase } from '../helpers/app.ts';
import { basicAuth } from '../helpers/http.ts';
import { startIssuer, startReceiver } from './support.ts';

const CLI = { via: 'cli' as const, username: 'test' };
const PASSWORD = 'correct horse battery staple';

/**
 * `db` with every statement's SQL written to `seen` (a transaction's too), while `recording.on`;
 * each statement is sent `state.delayMs` late (a database across a network, where requests'
 * statements overlap; in process the embedded database answers each before the next is asked).
 */
function recording(db: Db) {
  const seen: string[] = [];
  const state = { on: false, delayMs: 0 };
  const note = (sql: string) => { if (state.on) seen.push(sql.replace(/\s+/g, ' ')); };
  const wrap = <Q extends Queryable>(q: Q): Q => new Proxy(q, {
    get(target, prop, receiver) {
      if (prop === 'query') {
        return async (sql: string, ...rest: unknown[]) => {
          note(sql);
          if (state.delayMs > 0) await new Promise((resolve) => setTimeout(resolve, state.delayMs));
          return (target.query as (...a: unknown[]) => unknown)(sql, ...rest);
        };
      }
      if (prop === 'transaction') return (fn: (tx: Transaction) => Promise<unknown>) => (target as unknown as Db).transaction((tx) => fn(wrap(tx)));
      const value = Reflect.get(target, prop, receiver);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  return { db: wrap(db), seen, state };
}

/** Minimal cookie jar: the cookies a fetch answer set, for the next request. */
function jar() {
  const cookies = new Map<string, string>();
  return {
    take(res: Response) {
      for (const line of res.headers.getSetCookie()) {
        const [pair] = line.split(';', 1);
        const at = pair.indexOf('=');
        cookies.set(pair.slice(0, at).trim(), pair.slice(at + 1).trim());
      }
    },
    header: () => [...cookies].map(([k, v]) => `${k}=${v}`).join('; '),
  };
}

/**
 * What the OpenID Connect token endpoints cost in statements: the client's row read once per
 * request (the secret is checked against the row the provider was given), the user and the
 * client's access rule in one statement, and no browser session read for a request that carries
 * client credentials or a bearer token, even with the browser's cookies.
 */
describe('OpenID Connect token endpoints: statements per request', () => {
  let t: Awaited<ReturnType<typeof createMigratedDatabase>>;
  let rec: ReturnType<typeof recording>;
  let service: Awaited<ReturnType<typeof startIssuer>>;
  let rp: Awaited<ReturnType<typeof startReceiver>>;
  let client: { id: string; secret: string };
  let basic: string;
  beforeAll(async () => {
    t = await createMigratedDatabase();
    rec = recording(t.db);
    service = await startIssuer({}, { db: rec.db });
    rp = await startReceiver();
    const created = await service.app.services.clients.createClient({ name: 'Shop', callbackUrl: `${rp.origin}/cb`, allowedIps: ['127.0.0.1', '::1'] }, CLI);
    client = { id: created.client.client_id, secret: created.secret };
    basic = basicAuth(client.id, client.secret);
    await service.app.services.users.createUser({ username: 'ada', email: 'ada@example.com', password: PASSWORD, fullName: 'Ada' }, CLI);
  });
  afterAll(async () => {
    await rp?.close();
    await service?.close();
    await t?.drop();
  });

  /** The browser's cookies after the sign-in (sent along on the token requests: they must not be read). */
  let browser = '';
  /** A code for `ada`, as a signed-in browser gets one (sign-in, /oidc/auth, the interaction, the resumed authorization). */
  const code = async (): Promise<string> => {
    const cookies = jar();
    const login = await fetch(`${service.issuer}/api/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ login: 'ada', password: PASSWORD }) });
    expect(login.status).toBe(200);
    cookies.take(login);
    let url = `${service.issuer}/oidc/auth?${new URLSearchParams({ client_id: client.id, response_type: 'code', redirect_uri: `${rp.origin}/cb`, scope: 'openid offline_access', prompt: 'consent', state: randomBytes(4).toString('hex') })}`;
    for (let hop = 0; hop < 8; hop++) {
      const res = await fetch(url, { redirect: 'manual', headers: { cookie: cookies.header() } });
      cookies.take(res);
      await res.arrayBuffer();
      const to = new URL(res.headers.get('location') ?? '', service.issuer);
      if (to.origin === rp.origin) {
        browser = cookies.header();
        return to.searchParams.get('code')!;
      }
      url = to.href;
    }
    throw new Error('no code');
  };

  /** A POST to the provider with the client's credentials, and the signed-in browser's cookies as a browser would send them. */
  const post = (path: string, body: Record<string, string>, authorization = basic) =>
    fetch(`${service.issuer}/oidc${path}`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', authorization, cookie: browser }, body: new URLSearchParams(body) });

  /** The statements `fn` ran. */
  const statementsOf = async (fn: () => Promise<void>): Promise<string[]> => {
    rec.seen.length = 0;
    rec.state.on = true;
    try {
      await fn();
    } finally {
      rec.state.on = false;
    }
    return [...rec.seen];
  };
  /** The statements that read the client's row (FROM clients), or that name `table` at all. */
  const clientReads = (statements: string[]) => statements.filter((s) => /\bFROM clients\b/.test(s));
  const naming = (statements: string[], table: string) => statements.filter((s) => new RegExp(`\\b${table}\\b`).test(s));
  /** The statements that read oidc_artefacts (codes, tokens, grants). */
  const artefactReads = (statements: string[]) => statements.filter((s) => /^\s*SELECT\b[\s\S]*\bFROM oidc_artefacts\b/.test(s));

  it('redeems a code reading the client once, the user with the access rule once, and no session', async () => {
    const given = await code();
    let tokens: { access_token: string; refresh_token: string; id_token: string } | undefined;
    const statements = await statementsOf(async () => {
      const res = await post('/token', { grant_type: 'authorization_code', code: given, redirect_uri: `${rp.origin}/cb` });
      expect(res.status).toBe(200);
      tokens = await res.json();
    });
    expect(tokens?.id_token, 'the grant was answered').toBeTypeOf('string');
    expect(clientReads(statements), 'the client row read once: the secret is checked against it').toHaveLength(1);
    expect(naming(statements, 'users'), 'the user and the access rule in one statement').toHaveLength(1);
    expect(naming(statements, 'sessions'), 'no browser session looked up').toHaveLength(0);
  });

  it('refreshes and introspects reading the client once each, and no session', async () => {
    const res = await post('/token', { grant_type: 'authorization_code', code: await code(), redirect_uri: `${rp.origin}/cb` });
    const tokens = (await res.json()) as { access_token: string; refresh_token: string };
    const refresh = await statementsOf(async () => {
      const r = await post('/token', { grant_type: 'refresh_token', refresh_token: tokens.refresh_token });
      expect(r.status).toBe(200);
    });
    expect(clientReads(refresh)).toHaveLength(1);
    expect(naming(refresh, 'sessions')).toHaveLength(0);
    const introspection = await statementsOf(async () => {
      const r = await post('/token/introspection', { token: tokens.access_token });
      expect(r.status).toBe(200);
      expect(((await r.json()) as { active: boolean }).active).toBe(true);
    });
    expect(clientReads(introspection)).toHaveLength(1);
    expect(naming(introspection, 'sessions')).toHaveLength(0);
    // the token looked up as an access and as a refresh token, with its grant: one statement (src/oidc/adapter.ts)
    expect(artefactReads(introspection), 'the token and its grant read together').toHaveLength(1);
    expect(artefactReads(refresh), 'the refresh token and its grant read together').toHaveLength(1);
  });

  it('reads the grant again in the next request: a grant revoked after one introspection makes the next inactive', async () => {
    const res = await post('/token', { grant_type: 'authorization_code', code: await code(), redirect_uri: `${rp.origin}/cb` });
    const tokens = (await res.json()) as { access_token: string; refresh_token: string };
    const introspect = async () => ((await (await post('/token/introspection', { token: tokens.access_token })).json()) as { active: boolean }).active;
    expect(await introspect()).toBe(true);
    // revoking the refresh token revokes its grant, and with it the access token issued under it
    expect((await post('/token/revocation', { token: tokens.refresh_token, token_type_hint: 'refresh_token' })).status).toBe(200);
    expect(await introspect()).toBe(false);
  });

  it('serves refreshes that arrive together with fewer statements than one at a time, each with its own tokens', async () => {
    const grants: Array<{ refresh_token: string }> = [];
    for (let i = 0; i < 9; i++) {
      const res = await post('/token', { grant_type: 'authorization_code', code: await code(), redirect_uri: `${rp.origin}/cb` });
      grants.push((await res.json()) as { refresh_token: string });
    }
    const refresh = async (token: string) => {
      const r = await post('/token', { grant_type: 'refresh_token', refresh_token: token });
      expect(r.status).toBe(200);
      return ((await r.json()) as { refresh_token: string }).refresh_token;
    };
    const refreshesAudited = async () => (await t.db.query<{ n: number }>("SELECT count(*)::int AS n FROM audit_log WHERE action = 'oidc.refresh'")).rows[0].n;
    const before = await refreshesAudited();
    const alone = await statementsOf(async () => { await refresh(grants[0].refresh_token); });
    const rotated: string[] = [];
    rec.state.delayMs = 10;
    const together = await statementsOf(async () => { rotated.push(...await Promise.all(grants.slice(1).map((g) => refresh(g.refresh_token)))); })
      .finally(() => { rec.state.delayMs = 0; });
    expect(new Set(rotated).size, 'eight new refresh tokens').toBe(8);
    // the codes, grants and tokens (oidc_artefacts), the accounts and the audit rows are read and
    // written by statements the requests share (src/oidc/adapter.ts, src/oidc/service.ts, src/audit/writer.ts)
    expect(naming(together, 'oidc_artefacts').length).toBeLessThan(8 * naming(alone, 'oidc_artefacts').length);
    expect(naming(together, 'audit_log').length).toBeLessThan(8 * naming(alone, 'audit_log').length);
    expect(naming(together, 'users').length, 'the accounts with their access rule').toBeLessThan(8 * naming(alone, 'users').length);
    expect(await refreshesAudited() - before, 'every refresh audited, its own row').toBe(9);
  });

  it('gives tokens to one of two requests redeeming one code together, invalid_grant to the other', async () => {
    const given = await code();
    const answers = await Promise.all([0, 1].map(async () => {
      const r = await post('/token', { grant_type: 'authorization_code', code: given, redirect_uri: `${rp.origin}/cb` });
      return { status: r.status, body: (await r.json()) as { error?: string } };
    }));
    expect(answers.map((a) => a.status).sort()).toStrictEqual([200, 400]);
    expect(answers.find((a) => a.status === 400)!.body.error).toBe('invalid_grant');
  });

  it('still refuses a wrong secret, and an old one after a regeneration, on the row it read', async () => {
    const wrong = basicAuth(client.id, 'not-the-secret');
    const refused = await statementsOf(async () => {
      const r = await post('/token/introspection', { token: 'x' }, wrong);
      expect(r.status).toBe(401);
    });
    expect(clientReads(refused)).toHaveLength(1);
    const { secret } = await service.app.services.clients.rotateSecret(client.id, CLI, { graceSeconds: 0 });
    expect((await post('/token/introspection', { token: 'x' })).status, 'the old secret').toBe(401);
    const fresh = basicAuth(client.id, secret);
    expect((await post('/token/introspection', { token: 'x' }, fresh)).status, 'the new one, at once').toBe(200);
    basic = fresh;
  });

  it('answers userinfo for a bearer token without reading the browser session sent along', async () => {
    const res = await post('/token', { grant_type: 'authorization_code', code: await code(), redirect_uri: `${rp.origin}/cb` });
    const { access_token: accessToken } = (await res.json()) as { access_token: string };
    const statements = await statementsOf(async () => {
      const r = await fetch(`${service.issuer}/oidc/me`, { headers: { authorization: `Bearer ${accessToken}`, cookie: browser } });
      const body = await r.text();
      expect(r.status, body).toBe(200);
      expect((JSON.parse(body) as { sub: string }).sub).toBeTypeOf('string');
    });
    expect(naming(statements, 'sessions')).toHaveLength(0);
  });
});
