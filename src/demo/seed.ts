import { randomBytes } from 'node:crypto';
import type { Actor } from '../audit/actor.ts';
import type { Config } from '../config.ts';
import type { ClientService } from '../clients/service.ts';
import type { Deps } from '../context.ts';
import type { UserService } from '../users/service.ts';
import { findUserByUsername } from '../users/queries.ts';
import { runningServiceAddress } from './address.ts';
import { saveDemoCredentials } from './credentials.ts';

/** What the demo is made with: the client and user services (src/deps.ts builds them). */
export interface DemoServices {
  clients: ClientService;
  users: UserService;
  deps: Pick<Deps, 'config' | 'db'>;
}

export const DEMO_CLIENT_ID = 'demo';
export const DEMO_CLIENT_NAME = 'Demo client system';
export const DEMO_USERNAME = 'demo';

/** What the demo consists of; `password` is shown once and stored only as a bcrypt hash. */
export interface DemoSeedResult {
  client_id: string;
  client_name: string;
  callback_url: string;
  username: string;
  password: string;
  /** Open this to walk through the browser flow. */
  login_url: string;
  dashboard_url: string;
  created: { client: boolean; user: boolean };
}

const ACTOR: Actor = { via: 'cli', username: 'demo-seed' };

/** A password a person can type from the console: 4 groups of 4 letters/digits. */
function demoPassword(): string {
  const alphabet = 'abcdefghjkmnpqrstuvwxyz23456789';
  const bytes = randomBytes(16);
  const chars = [...bytes].map((b) => alphabet[b % alphabet.length]);
  return [0, 4, 8, 12].map((i) => chars.slice(i, i + 4).join('')).join('-');
}

/**
 * Creates (or refreshes) the demo: a client system `demo` whose callback is this service's
 * own /demo/callback page at `baseUrl`, its credentials saved in `dataDir` for that page, and
 * a user `demo` with a new random password. Running it again rotates the demo client's
 * secret and the demo user's password. Exported for `npm run admin -- demo`.
 */
export async function seedDemo(services: DemoServices, options: { baseUrl: string; dataDir?: string }): Promise<DemoSeedResult> {
  const { clients, users, deps } = services;
  const baseUrl = options.baseUrl.replace(/\/+$/, '');
  const dataDir = options.dataDir ?? deps.config.DATA_DIR;
  const callbackUrl = `${baseUrl}/demo/callback`;

  const password = demoPassword();
  const user = await findUserByUsername(deps.db, DEMO_USERNAME);
  if (user) {
    // as an administrator would: the new password audited and every session of the old one
    // ended, the account reactivated (audited when it was off) and unlocked
    await users.setPassword({ id: user.id }, { password }, ACTOR);
    await users.setActive(DEMO_USERNAME, true, ACTOR);
    await users.unlock(DEMO_USERNAME, ACTOR);
  } else {
    await users.createUser(
      { username: DEMO_USERNAME, email: 'demo@example.com', password, fullName: 'Demo User' },
      ACTOR,
    );
  }

  // the client last: a first start stopped in between leaves no client, so the next start is a
  // first start again and finishes the demo (the other way round it never did)
  const existing = await clients.findClient(DEMO_CLIENT_ID);
  let secret: string;
  if (existing) {
    await clients.updateClient(DEMO_CLIENT_ID, { callbackUrl, active: true }, ACTOR);
    secret = (await clients.rotateSecret(DEMO_CLIENT_ID, ACTOR)).secret;
  } else {
    secret = (await clients.createClient(
      { name: DEMO_CLIENT_NAME, callbackUrl, allowedIps: ['127.0.0.1', '::1'], clientId: DEMO_CLIENT_ID },
      ACTOR,
    )).secret;
  }
  await saveDemoCredentials(dataDir, { client_id: DEMO_CLIENT_ID, client_secret: secret });

  return {
    client_id: DEMO_CLIENT_ID,
    client_name: existing?.client_name ?? DEMO_CLIENT_NAME,
    callback_url: callbackUrl,
    username: DEMO_USERNAME,
    password,
    login_url: `${baseUrl}/sso/login?client_id=${DEMO_CLIENT_ID}&state=demo`,
    dashboard_url: `${baseUrl}/dashboard`,
    created: { client: !existing, user: !user },
  };
}

/**
 * The address the demo client's callback points at when `admin demo` is not told one: the
 * service's PUBLIC_URL; else the address the service running on this DATA_DIR listens on;
 * else the one the demo client already has (a shell without the service's PORT must not move
 * it); else PORT on loopback.
 */
export async function demoBaseUrl(services: Pick<DemoServices, 'clients'>, config: Pick<Config, 'PUBLIC_URL' | 'DATA_DIR' | 'PORT'>): Promise<{ url: string; from: string }> {
  if (config.PUBLIC_URL) return { url: config.PUBLIC_URL, from: 'PUBLIC_URL' };
  const running = await runningServiceAddress(config.DATA_DIR);
  if (running) return { url: running, from: 'the running service' };
  const existing = (await services.clients.findClient(DEMO_CLIENT_ID))?.callback_url;
  if (existing?.endsWith('/demo/callback')) return { url: existing.slice(0, -'/demo/callback'.length), from: 'the demo client\'s callback' };
  return { url: `http://127.0.0.1:${config.PORT}`, from: 'PORT' };
}

/**
 * At start: seeds the demo only on the embedded database (no DATABASE_URL), outside
 * production, when no client system exists yet. Returns the result, or null when it did
 * nothing. Never on PostgreSQL: there `npm run admin -- demo` asks for it explicitly.
 */
export async function seedDemoOnFirstStart(
  services: DemoServices,
  config: Pick<Config, 'DATABASE_URL' | 'NODE_ENV' | 'DATA_DIR'>,
  baseUrl: string,
): Promise<DemoSeedResult | null> {
  if (config.DATABASE_URL || config.NODE_ENV === 'production') return null;
  if ((await services.clients.listClients()).length > 0) return null;
  return seedDemo(services, { baseUrl, dataDir: config.DATA_DIR });
}

/** The console banner: the URL to open and the demo user's password (printed once). */
export function demoBanner(result: DemoSeedResult): string {
  const line = '-'.repeat(72);
  return [
    line,
    'Demo ready. Open this URL in a browser to sign in to the demo client system:',
    '',
    `  ${result.login_url}`,
    '',
    `  username: ${result.username}`,
    `  password: ${result.password}    (shown only now; \`npm run admin -- demo\` makes a new one)`,
    '',
    `Your dashboard (link systems, one-click sign-in): ${result.dashboard_url}`,
    line,
  ].join('\n');
}
