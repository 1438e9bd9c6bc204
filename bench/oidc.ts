/**
 * npm run bench:oidc: the OpenID Connect token endpoint's three hot flows, the service beside
 * two bare oidc-provider instances, measured in one run on this machine.
 *
 * Three processes serve side by side:
 *  - ours: the service as it is deployed (dist/server.js after `npm run build`; BENCH_FROM_SOURCE=1
 *    runs src/server.ts through tsx) on a fresh PostgreSQL database;
 *  - memory: this file again (OIDC_BENCH_ROLE=memory), a bare oidc-provider with its default
 *    in-memory adapter (the library's MemoryAdapter, on a larger store than its default LRU of 1,000);
 *  - postgres: this file again (OIDC_BENCH_ROLE=postgres), a bare oidc-provider with the minimal
 *    PostgreSQL adapter below (PgAdapter: one table oidc_bench_ref, id/kind/payload jsonb/
 *    expires_at/grant_id/uid/user_code/consumed, a pg.Pool of 20 as the service's) in the same database.
 * The bare providers are configured as the service configures its own (src/oidc/provider.ts):
 * the same oidc-provider, one RSA 2048 (RS256, the ID tokens' algorithm) and one P-256 key,
 * opaque access and refresh tokens, refresh-token rotation, the same lifetimes, scopes and
 * claims, and one confidential client authenticating with client_secret_basic (as the service's
 * client systems do). What they do not have is what the service adds to every answer: the
 * client read from its table and its secret checked against the stored SHA-256 hash and allow
 * list, the user and the client's access rule read for every issue (findAccount), the audit
 * entry of every issue and refresh. Their account is a constant.
 *
 * How the codes are made (each is single use, so a new batch before every redemption phase):
 *  - ours: user `bench` signs in once over HTTP (POST /api/auth/login, its cookie kept), then
 *    each code is one authorization request over HTTP as a browser makes it (GET /oidc/auth
 *    with scope `openid offline_access` and prompt=consent, then the interaction page, which
 *    grants at once for a signed-in user, then the resumed authorization, whose redirect to the
 *    client's callback carries the code), OIDC_BENCH_MINTERS at a time;
 *  - memory and postgres: minted in the provider's process through its models (per code a Grant
 *    with `openid offline_access` and `new provider.AuthorizationCode({...}).save()`, the fields
 *    an authorization gives it), asked for by POST /bench/mint, outside the timing.
 *
 * Then, for each of the three in turn and in OIDC_BENCH_ROUNDS rounds (default 2, alternating:
 * the machine's speed drifts), autocannon at OIDC_BENCH_CONNECTIONS (default 32) connections
 * sends every code of the batch once (OIDC_BENCH_CODES, default 2000; ours' batch is what its
 * flows made in OIDC_BENCH_MINT_SECONDS, default 30, when that is fewer): `grant_type=
 * authorization_code` (an access, refresh and ID token each); then every refresh token those
 * answers gave once (`grant_type=refresh_token`, rotated); then every access token of both
 * (2 per code) once to the introspection endpoint. Each run reports answers / (last answer -
 * start) as req/s, autocannon's p99 latency (whole ms) and the serving process's CPU time per
 * answer (/proc/PID/stat). Printed: every run, then per flow the medians of the rounds, with
 * ours ÷ postgres (goal >= 1.0) beside the in-memory figure.
 *
 * DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres) names the server; the
 * benchmark creates and drops its own database there.
 */
import { type ChildProcess } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Adapter, AdapterPayload } from 'oidc-provider';
import pg from 'pg';
import {
  benchDatabase, benchServiceEnv, cpuMicros, createBenchClient, DEFAULT_ADMIN_URL, loadUntilLastAnswer, NODE_FLAGS, ROOT, SERVICE_ROOT, serviceEntry,
  startProcess, stopProcess, median,
} from './support.ts';

const ROLE = process.env.OIDC_BENCH_ROLE ?? 'main';
const CODES = Number(process.env.OIDC_BENCH_CODES ?? 2000);
const ROUNDS = Number(process.env.OIDC_BENCH_ROUNDS ?? 2);
const CONNECTIONS = Number(process.env.OIDC_BENCH_CONNECTIONS ?? 32);
/** Authorization requests in flight while ours' codes are collected. */
const MINTERS = Number(process.env.OIDC_BENCH_MINTERS ?? 8);
/**
 * How long ours' codes are collected at most (seconds; default half a code's lifetime): on a
 * slow machine 2,000 flows took longer than the 60 s a code lives, and the first ones had
 * expired (invalid_grant) before they were redeemed.
 */
const MINT_SECONDS = Number(process.env.OIDC_BENCH_MINT_SECONDS ?? 30);
const REDIRECT_URI = 'https://bench.example/cb';
const SCOPE = 'openid offline_access';
const BENCH_PASSWORD = 'quiet harbor lantern 42'; // createBenchClient's user `bench`
/** The service's lifetimes (src/oidc/provider.ts). */
const TTL = { AuthorizationCode: 60, AccessToken: 3600, IdToken: 3600, RefreshToken: 14 * 86_400, Grant: 14 * 86_400, Interaction: 3600, Session: 86_400 };

// ---------------------------------------------------------------------------------------------
// The reference: a bare oidc-provider (OIDC_BENCH_ROLE=memory or postgres), its own process.

/** The minimal PostgreSQL adapter of the reference: one table, one statement per method. */
const REF_TABLE = `CREATE TABLE IF NOT EXISTS oidc_bench_ref (
  id text NOT NULL, kind text NOT NULL, payload jsonb NOT NULL, expires_at timestamptz NOT NULL,
  grant_id text, uid text, user_code text, consumed boolean NOT NULL DEFAULT false, PRIMARY KEY (kind, id));
CREATE INDEX IF NOT EXISTS oidc_bench_ref_grant ON oidc_bench_ref (grant_id);
CREATE INDEX IF NOT EXISTS oidc_bench_ref_uid ON oidc_bench_ref (uid);
CREATE INDEX IF NOT EXISTS oidc_bench_ref_user_code ON oidc_bench_ref (user_code)`;

function pgAdapter(pool: pg.Pool) {
  const row = (r: pg.QueryResult<{ payload: AdapterPayload; consumed: boolean }>) => {
    const found = r.rows[0];
    if (!found) return undefined;
    return found.consumed ? { ...found.payload, consumed: true } : found.payload;
  };
  return class PgAdapter implements Adapter {
    constructor(private readonly kind: string) {}
    async upsert(id: string, payload: AdapterPayload, expiresIn: number) {
      await pool.query(
        `INSERT INTO oidc_bench_ref (id, kind, payload, expires_at, grant_id, uid, user_code)
         VALUES ($1, $2, $3, now() + make_interval(secs => $4), $5, $6, $7)
         ON CONFLICT (kind, id) DO UPDATE SET payload = EXCLUDED.payload, expires_at = EXCLUDED.expires_at,
           grant_id = EXCLUDED.grant_id, uid = EXCLUDED.uid, user_code = EXCLUDED.user_code`,
        [id, this.kind, JSON.stringify(payload), expiresIn, payload.grantId ?? null, payload.uid ?? null, payload.userCode ?? null],
      );
    }
    async find(id: string) {
      return row(await pool.query('SELECT payload, consumed FROM oidc_bench_ref WHERE kind = $1 AND id = $2 AND expires_at > now()', [this.kind, id]));
    }
    async findByUid(uid: string) {
      return row(await pool.query('SELECT payload, consumed FROM oidc_bench_ref WHERE kind = $1 AND uid = $2 AND expires_at > now()', [this.kind, uid]));
    }
    async findByUserCode(userCode: string) {
      return row(await pool.query('SELECT payload, consumed FROM oidc_bench_ref WHERE kind = $1 AND user_code = $2 AND expires_at > now()', [this.kind, userCode]));
    }
    async consume(id: string) {
      await pool.query('UPDATE oidc_bench_ref SET consumed = true WHERE kind = $1 AND id = $2', [this.kind, id]);
    }
    async destroy(id: string) {
      await pool.query('DELETE FROM oidc_bench_ref WHERE kind = $1 AND id = $2', [this.kind, id]);
    }
    async revokeByGrantId(grantId: string) {
      await pool.query('DELETE FROM oidc_bench_ref WHERE kind = $1 AND grant_id = $2', [this.kind, grantId]);
    }
  };
}

/** The service's key set (src/oidc/keys.ts generateKeys): RSA 2048 for RS256, P-256 for ES256. */
function signingKeys() {
  const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ format: 'jwk' });
  const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'jwk' });
  return [{ ...rsa, kid: 'rsa', alg: 'RS256', use: 'sig' }, { ...ec, kid: 'ec', alg: 'ES256', use: 'sig' }];
}

async function serveReference(kind: 'memory' | 'postgres') {
  const { default: Provider } = await import('oidc-provider');
  let pool: pg.Pool | undefined;
  // the library's own in-memory adapter, on a store of 1,000,000 entries: its default store
  // keeps the 1,000 most recent (an LRU), fewer than one batch's codes and tokens
  let memoryAdapter: ((model: string) => Adapter) | undefined;
  if (kind === 'memory') {
    const lib = 'oidc-provider/lib/';
    const { default: MemoryAdapter } = await import(`${lib}adapters/memory_adapter.js`);
    const { default: LRU } = await import(`${lib}helpers/lru.js`);
    const store = new LRU({ maxSize: 1_000_000 });
    memoryAdapter = (model) => new MemoryAdapter(model, store);
  }
  if (kind === 'postgres') {
    pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 20 });
    await pool.query(REF_TABLE);
  }
  const clientId = process.env.OIDC_BENCH_CLIENT_ID!;
  const port = Number(process.env.PORT);
  const issuer = `http://127.0.0.1:${port}`;
  const provider = new Provider(issuer, {
    adapter: pool ? pgAdapter(pool) : memoryAdapter,
    clients: [{
      client_id: clientId, client_secret: process.env.OIDC_BENCH_CLIENT_SECRET!, redirect_uris: [REDIRECT_URI],
      grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'], id_token_signed_response_alg: 'RS256',
      token_endpoint_auth_method: 'client_secret_basic',
    }],
    jwks: { keys: signingKeys() as never },
    cookies: { keys: [randomBytes(32).toString('hex')] },
    async findAccount(_ctx, id) {
      return { accountId: id, claims: async () => ({ sub: id, name: 'Bench', preferred_username: 'bench', email: 'bench@example.com', roles: ['user'] }) };
    },
    claims: { openid: ['sub', 'roles'], profile: ['name', 'preferred_username'], email: ['email'] },
    scopes: ['openid', 'offline_access', 'profile', 'email'],
    conformIdTokenClaims: false,
    responseTypes: ['code'],
    clientAuthMethods: ['client_secret_basic', 'client_secret_post', 'none'],
    enabledJWA: { idTokenSigningAlgValues: ['RS256', 'ES256'] },
    pkce: { required: (_ctx, client) => client.clientAuthMethod === 'none' },
    features: { devInteractions: { enabled: false }, introspection: { enabled: true }, revocation: { enabled: true } },
    rotateRefreshToken: true,
    ttl: TTL,
  });
  provider.on('server_error', (_ctx, err) => console.error(err));
  const callback = provider.callback();

  /**
   * `n` authorization codes of account 1 for the client, as an authorization would store them,
   * each with a grant of its own (the in-memory adapter's work per write grows with the tokens
   * of a grant).
   */
  const mint = async (n: number): Promise<string[]> => {
    const client = (await provider.Client.find(clientId))!;
    const authTime = Math.floor(Date.now() / 1000);
    const codes: string[] = [];
    for (let i = 0; i < n; i++) {
      const grant = new provider.Grant({ accountId: '1', clientId });
      grant.addOIDCScope(SCOPE);
      const grantId = await grant.save();
      const code = new provider.AuthorizationCode({
        accountId: '1', authTime, client, grantId, redirectUri: REDIRECT_URI, scope: SCOPE,
        sessionUid: randomBytes(16).toString('base64url'), sid: randomBytes(16).toString('base64url'), expiresWithSession: false,
      } as never);
      codes.push(await code.save());
    }
    return codes;
  };

  http.createServer((req, res) => {
    if (req.method === 'POST' && req.url?.startsWith('/bench/mint?n=')) {
      mint(Number(req.url.slice('/bench/mint?n='.length))).then(
        (codes) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(codes)),
        (err) => res.writeHead(500).end(String(err?.stack ?? err)),
      );
      return;
    }
    void callback(req, res);
  }).listen(port, '127.0.0.1');
}

// ---------------------------------------------------------------------------------------------
// The benchmark.

interface Target {
  name: 'ours' | 'postgres' | 'memory';
  pid: number;
  base: string;
  /** Where the provider is mounted: /oidc in the service, / in the bare ones. */
  prefix: string;
  codes(n: number): Promise<string[]>;
}

interface Figures {
  run: string;
  'req/s': number;
  p99_ms: number;
  'cpu µs/req': number;
  non2xx: number;
  errors: number;
  requests: number;
}

/** A browser's cookies, good enough for one host: name → value, whatever the path. */
class CookieJar {
  private readonly cookies = new Map<string, string>();
  take(res: Response) {
    for (const line of res.headers.getSetCookie()) {
      const [pair] = line.split(';', 1);
      const at = pair.indexOf('=');
      const name = pair.slice(0, at).trim();
      const value = pair.slice(at + 1).trim();
      if (/expires=Thu, 01 Jan 1970/i.test(line) || value === '') this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
  }
  header() {
    return [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
  }
}

/**
 * Ours' codes over HTTP: the authorization requests a signed-in browser makes, one code each
 * (GET /oidc/auth, the interaction page, the resumed authorization). Each in-flight request
 * has its own jar, starting from the signed-in cookies (the interaction cookies differ).
 */
async function collectCodes(base: string, signedIn: string, clientId: string, n: number): Promise<string[]> {
  const codes: string[] = [];
  let started = 0;
  const one = async (): Promise<string> => {
    const jar = new CookieJar();
    let cookie = signedIn;
    let url = `${base}/oidc/auth?${new URLSearchParams({ client_id: clientId, response_type: 'code', redirect_uri: REDIRECT_URI, scope: SCOPE, prompt: 'consent', state: randomBytes(8).toString('hex') })}`;
    for (let hop = 0; hop < 8; hop++) {
      const res = await fetch(url, { redirect: 'manual', headers: { cookie } });
      jar.take(res);
      await res.arrayBuffer();
      const location = res.headers.get('location');
      if (!location) throw new Error(`authorization stopped at ${url}: ${res.status}`);
      const to = new URL(location, base);
      if (to.href.startsWith(REDIRECT_URI)) {
        const code = to.searchParams.get('code');
        if (!code) throw new Error(`no code: ${to.href}`);
        return code;
      }
      url = `${base}${to.pathname}${to.search}`;
      cookie = [signedIn, jar.header()].filter(Boolean).join('; ');
    }
    throw new Error('too many redirects');
  };
  const until = performance.now() + MINT_SECONDS * 1000;
  await Promise.all(Array.from({ length: MINTERS }, async () => {
    while (started < n && performance.now() < until) {
      started++;
      codes.push(await one());
    }
  }));
  if (codes.length < n) console.log(`note: ours: ${codes.length} of ${n} codes made in ${MINT_SECONDS} s (OIDC_BENCH_MINT_SECONDS; a code lives ${TTL.AuthorizationCode} s): the batch is those`);
  return codes;
}

const form = (params: Record<string, string>) => new URLSearchParams(params).toString();

/** Sends each body once, CONNECTIONS at a time; every answer's body to `onBody`. */
async function measure(run: string, target: Target, endpoint: string, basic: string, bodies: string[], onBody?: (status: number, body: string) => void): Promise<Figures> {
  if (bodies.length === 0) throw new Error(`${run}: nothing to send (no codes were made, or no answer gave a token)`);
  const before = cpuMicros(target.pid);
  let next = 0;
  let firstWrong: string | undefined;
  const { result, seconds } = await loadUntilLastAnswer({
    // a batch cut short by OIDC_BENCH_MINT_SECONDS may be smaller than the connections (autocannon refuses that)
    url: `${target.base}${target.prefix}${endpoint}`, method: 'POST', connections: Math.min(CONNECTIONS, bodies.length), amount: bodies.length,
    headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: basic },
    requests: [{ setupRequest: (req: any) => ({ ...req, body: bodies[next++] }) }],
  }, (status, body) => {
    if (status !== 200) firstWrong ??= `${status} ${body.slice(0, 300)}`;
    onBody?.(status, body);
  });
  if (firstWrong) console.log(`note: ${run}: not every answer was 200, the first: ${firstWrong}`);
  return {
    run,
    'req/s': Math.round(result.requests.total / seconds),
    p99_ms: result.latency.p99,
    'cpu µs/req': Math.round((cpuMicros(target.pid) - before) / Math.max(1, result.requests.total)),
    non2xx: result.non2xx,
    errors: result.errors,
    requests: result.requests.total,
  };
}

const FLOWS = ['code', 'refresh', 'introspect'] as const;
type Flow = (typeof FLOWS)[number];

/** One round on one target: a batch of codes, redeemed; the refresh tokens, used; the access tokens, introspected. */
async function round(target: Target, basic: string, n: number, label: string): Promise<Record<Flow, Figures>> {
  const codes = await target.codes(n);
  const refreshTokens: string[] = [];
  const accessTokens: string[] = [];
  const keep = (status: number, body: string) => {
    if (status !== 200) return;
    const answer = JSON.parse(body);
    if (answer.refresh_token) refreshTokens.push(answer.refresh_token);
    if (answer.access_token) accessTokens.push(answer.access_token);
  };
  const code = await measure(`${target.name}: authorization_code ${label}`, target, '/token', basic,
    codes.map((c) => form({ grant_type: 'authorization_code', code: c, redirect_uri: REDIRECT_URI })), keep);
  const refresh = await measure(`${target.name}: refresh_token ${label}`, target, '/token', basic,
    refreshTokens.splice(0).map((t) => form({ grant_type: 'refresh_token', refresh_token: t })), keep);
  let inactive = 0;
  const introspect = await measure(`${target.name}: introspection ${label}`, target, '/token/introspection', basic,
    accessTokens.map((t) => form({ token: t })), (status, body) => {
      if (status === 200 && JSON.parse(body).active !== true) inactive++;
    });
  if (inactive > 0) console.log(`note: ${target.name} ${label}: ${inactive} access tokens were not active`);
  return { code, refresh, introspect };
}

async function main() {
  const adminUrl = process.env.DATABASE_URL ?? DEFAULT_ADMIN_URL;
  const db = await benchDatabase(adminUrl, 'auth_bench_oidc');
  const children: ChildProcess[] = [];
  try {
    const entry = serviceEntry();
    const service = await startProcess(entry, benchServiceEnv(db.url), '/readyz', SERVICE_ROOT);
    children.push(service.child);
    console.log(`service: ${path.join(SERVICE_ROOT, entry)}`);
    console.log(`node options of every process: ${NODE_FLAGS.join(' ') || '(none)'}`);
    const base = `http://127.0.0.1:${service.port}`;
    const { creds } = createBenchClient(db.url);
    const basic = `Basic ${Buffer.from(`${encodeURIComponent(creds.client_id)}:${encodeURIComponent(creds.client_secret)}`).toString('base64')}`;

    // user `bench` signs in once; its session cookie is every authorization's
    const login = await fetch(`${base}/api/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ login: 'bench', password: BENCH_PASSWORD }) });
    if (login.status !== 200) throw new Error(`sign-in failed: ${login.status} ${await login.text()}`);
    const jar = new CookieJar();
    jar.take(login);
    const signedIn = jar.header();

    const self = path.relative(ROOT, fileURLToPath(import.meta.url));
    const refEnv = (role: string) => ({ OIDC_BENCH_ROLE: role, DATABASE_URL: db.url, NODE_ENV: 'development', OIDC_BENCH_CLIENT_ID: creds.client_id, OIDC_BENCH_CLIENT_SECRET: creds.client_secret });
    const memory = await startProcess(self, refEnv('memory'), '/.well-known/openid-configuration');
    children.push(memory.child);
    const postgres = await startProcess(self, refEnv('postgres'), '/.well-known/openid-configuration');
    children.push(postgres.child);
    const minted = (port: number) => async (n: number) => {
      const r = await fetch(`http://127.0.0.1:${port}/bench/mint?n=${n}`, { method: 'POST' });
      if (!r.ok) throw new Error(`minting failed: ${await r.text()}`);
      return (await r.json()) as string[];
    };
    const targets: Target[] = [
      { name: 'ours', pid: service.child.pid!, base, prefix: '/oidc', codes: (n) => collectCodes(base, signedIn, creds.client_id, n) },
      { name: 'postgres', pid: postgres.child.pid!, base: `http://127.0.0.1:${postgres.port}`, prefix: '', codes: minted(postgres.port) },
      { name: 'memory', pid: memory.child.pid!, base: `http://127.0.0.1:${memory.port}`, prefix: '', codes: minted(memory.port) },
    ];

    // a short warm-up of each (JIT, pools, caches), not reported
    for (const t of targets) await round(t, basic, Math.min(200, CODES), 'warm-up');

    const rows: Figures[] = [];
    const results: Record<Target['name'], Array<Record<Flow, Figures>>> = { ours: [], postgres: [], memory: [] };
    for (let r = 1; r <= ROUNDS; r++) {
      for (const t of (r % 2 ? targets : [...targets].reverse())) {
        const figures = await round(t, basic, CODES, `#${r}`);
        results[t.name].push(figures);
        rows.push(figures.code, figures.refresh, figures.introspect);
      }
    }
    console.table(rows);
    const at = (name: Target['name'], flow: Flow, key: 'req/s' | 'p99_ms' | 'cpu µs/req') => median(results[name].map((f) => f[flow][key]));
    const labels: Record<Flow, string> = { code: 'authorization_code', refresh: 'refresh_token', introspect: 'introspection' };
    const summary = FLOWS.map((flow) => ({
      flow: labels[flow],
      'ours req/s': at('ours', flow, 'req/s'),
      'ours p99 ms': at('ours', flow, 'p99_ms'),
      'ours µs/req': at('ours', flow, 'cpu µs/req'),
      'pg-ref req/s': at('postgres', flow, 'req/s'),
      'pg-ref p99 ms': at('postgres', flow, 'p99_ms'),
      'pg-ref µs/req': at('postgres', flow, 'cpu µs/req'),
      'ours ÷ pg-ref': Number((at('ours', flow, 'req/s') / at('postgres', flow, 'req/s')).toFixed(2)),
      'memory req/s': at('memory', flow, 'req/s'),
      'memory p99 ms': at('memory', flow, 'p99_ms'),
    }));
    console.log(`Medians of ${ROUNDS} rounds, ${CODES} codes a batch, ${CONNECTIONS} connections (goal: ours ÷ pg-ref >= 1.0):`);
    console.table(summary);
    const wrong = rows.reduce((n, f) => n + f.non2xx + f.errors, 0);
    if (wrong > 0) console.log(`note: ${wrong} answers were not 200`);
  } finally {
    await Promise.all(children.map(stopProcess));
    await db.drop();
  }
}

if (ROLE === 'memory' || ROLE === 'postgres') {
  // an exit, not a death by signal: with BENCH_CPU_PROF, V8 writes the reference's profile too
  process.once('SIGTERM', () => process.exit(0));
  serveReference(ROLE).catch((err) => {
    console.error(err);
    process.exit(1);
  });
} else {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
