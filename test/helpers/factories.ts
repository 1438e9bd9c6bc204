import type { Queryable } from '../../src/db/db.ts';
import type { TestApp } from './app.ts';
import { unique } from './app.ts';

const CLI = { via: 'cli' as const, username: 'test' };

/** Registers a client system; returns its id and the plain secret. */
export async function makeClient(
  app: TestApp,
  options: { allowedIps?: string[]; callbackUrl?: string; name?: string; initiateLoginUri?: string } = {},
): Promise<{ client_id: string; client_secret: string; client_name: string; callback_url: string }> {
  const { client, secret } = await app.services.clients.createClient(
    {
      name: options.name ?? unique('Client '),
      callbackUrl: options.callbackUrl ?? 'https://client.example/sso/callback?from=auth',
      allowedIps: options.allowedIps ?? ['127.0.0.1', '::1'],
      initiateLoginUri: options.initiateLoginUri,
    },
    CLI,
  );
  return { client_id: client.client_id, client_secret: secret, client_name: client.client_name, callback_url: client.callback_url };
}

export const TEST_PASSWORD = 'correct horse battery';

/** Creates a user with TEST_PASSWORD (unless given another). */
export async function makeUser(
  app: TestApp,
  options: { username?: string; password?: string; role?: string; active?: boolean; email?: string; fullName?: string } = {},
) {
  const username = options.username ?? unique('user');
  const user = await app.services.users.createUser(
    {
      username,
      email: options.email ?? `${username.toLowerCase()}@example.com`,
      password: options.password ?? TEST_PASSWORD,
      role: options.role,
      fullName: options.fullName ?? `Test ${username}`,
      active: options.active,
    },
    CLI,
  );
  return { ...user, password: options.password ?? TEST_PASSWORD };
}

/**
 * A user and a client system both named `name`, written straight into the database: for
 * data-layer tests that run without the service (no password or secret is ever checked).
 */
export async function insertUserAndClient(db: Queryable, name: string): Promise<{ userId: number; clientId: string }> {
  const user = await db.query<{ id: number }>(
    "INSERT INTO users (username, email, password_hash) VALUES ($1, $1 || '@example.com', 'x') RETURNING id", [name]);
  await db.query(
    // the database requires a hex SHA-256 as secret_hash (migrations/0002): this one is of "x"
    "INSERT INTO clients (client_id, client_name, secret_hash, secret_last4, callback_url) VALUES ($1, $1, encode(sha256('x'), 'hex'), 'abcd', 'https://' || $1 || '.example/cb')",
    [name]);
  return { userId: user.rows[0].id, clientId: name };
}
