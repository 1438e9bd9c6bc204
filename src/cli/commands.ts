import type { Services } from '../deps.ts';
import { AppError } from '../http/errors.ts';
import { generateClientSecret, hashClientSecret } from '../clients/credentials.ts';
import { toPublicClient } from '../clients/service.ts';
import type { UserRecord } from '../users/queries.ts';
import { demoBanner, seedDemo } from '../demo/seed.ts';

const ACTOR = { via: 'cli' as const, username: 'cli' };

/** A command's result: the JSON document for --json, and lines for people. */
export interface CommandResult {
  json: unknown;
  text: string;
}

/** Parsed command line: positional words and options (repeatable ones as arrays). */
export interface ParsedArgs {
  words: string[];
  options: Record<string, string | boolean | string[] | undefined>;
}

export const USAGE = `Usage: npm run admin -- <command> [--json]

  client create --name NAME --callback-url URL [--allow-ip IP_OR_CIDR]... [--id CLIENT_ID]
  client rotate-secret CLIENT_ID
  client update CLIENT_ID [--name N] [--callback-url U] [--active true|false]
  client new-secret          a fresh secret and its secret_hash, for a seed file (no database)
  client set-ips CLIENT_ID IP_OR_CIDR...
  client list
  user create --username U --email E --password P [--role R] [--full-name N] [--inactive]
  user set-active USERNAME true|false
  user unlock USERNAME
  demo [--base-url URL]      create (or refresh) the demo client and user; not in production`;

function required(args: ParsedArgs, name: string): string {
  const v = args.options[name];
  if (typeof v !== 'string' || v.trim() === '') throw new AppError(400, 'usage', `--${name} is required`);
  return v;
}

function list(v: ParsedArgs['options'][string]): string[] {
  return Array.isArray(v) ? v : typeof v === 'string' ? [v] : [];
}

function publicUser(u: UserRecord) {
  return { id: u.id, username: u.username, email: u.email, role: u.role, full_name: u.full_name, active: u.active };
}

/**
 * A command that needs no database (`client new-secret`), or null. The secret is printed
 * once and stored nowhere: a seed file holds only its hash.
 */
export function offlineCommand(args: ParsedArgs): CommandResult | null {
  if (args.words.length !== 2 || args.words[0] !== 'client' || args.words[1] !== 'new-secret') return null;
  const secret = generateClientSecret();
  const hash = hashClientSecret(secret);
  return {
    json: { client_secret: secret, secret_hash: hash },
    text: [
      `client_secret: ${secret}`,
      `secret_hash:   ${hash}`,
      '',
      'Give the secret to the client system; put only secret_hash in the seed file.',
    ].join('\n'),
  };
}

/** Runs one admin command against the services. Throws AppError for bad input. */
export async function runCommand(services: Services, args: ParsedArgs): Promise<CommandResult> {
  const [group, action, ...rest] = args.words;
  const key = `${group ?? ''} ${action ?? ''}`.trim();
  switch (key) {
    case 'client create': {
      const { client, secret } = await services.clients.createClient(
        {
          name: required(args, 'name'),
          callbackUrl: required(args, 'callback-url'),
          allowedIps: list(args.options['allow-ip']),
          clientId: typeof args.options.id === 'string' ? args.options.id : undefined,
          allowEverything: args.options['allow-everything'] === true,
        },
        ACTOR,
      );
      const json = { client_id: client.client_id, client_secret: secret, client_name: client.client_name, callback_url: client.callback_url, allowed_ips: client.allowed_ips };
      return {
        json,
        text: [
          `Created client ${client.client_id} (${client.client_name})`,
          `  callback_url:  ${client.callback_url}`,
          `  allowed_ips:   ${client.allowed_ips.join(', ') || '(none: every caller is refused until you add one)'}`,
          `  client_secret: ${secret}`,
          '',
          'Store the secret now: it is shown only this once.',
        ].join('\n'),
      };
    }
    case 'client rotate-secret': {
      const clientId = rest[0] ?? usage('client rotate-secret CLIENT_ID');
      const { client, secret } = await services.clients.rotateSecret(clientId, ACTOR);
      return {
        json: { client_id: client.client_id, client_secret: secret },
        text: `New secret for ${client.client_id}: ${secret}\nThe old secret no longer works. This one is shown only this once.`,
      };
    }
    case 'client set-ips': {
      const [clientId, ...ips] = rest;
      if (!clientId) usage('client set-ips CLIENT_ID IP_OR_CIDR...');
      const client = await services.clients.updateClient(clientId, { allowedIps: ips, allowEverything: args.options['allow-everything'] === true }, ACTOR);
      return { json: { client_id: client.client_id, allowed_ips: client.allowed_ips }, text: `${client.client_id} allows: ${client.allowed_ips.join(', ') || '(nobody)'}` };
    }
    case 'client update': {
      const clientId = rest[0] ?? usage('client update CLIENT_ID [--name N] [--callback-url U] [--active true|false]');
      const active = args.options.active;
      if (active !== undefined && active !== 'true' && active !== 'false') usage('client update CLIENT_ID ... --active true|false');
      const patch = {
        clientName: typeof args.options.name === 'string' ? args.options.name.trim() : undefined,
        callbackUrl: typeof args.options['callback-url'] === 'string' ? args.options['callback-url'].trim() : undefined,
        active: active === undefined ? undefined : active === 'true',
      };
      if (Object.values(patch).every((v) => v === undefined)) usage('client update CLIENT_ID [--name N] [--callback-url U] [--active true|false] (at least one)');
      if (patch.clientName !== undefined && (patch.clientName === '' || patch.clientName.length > 200)) {
        throw new AppError(400, 'invalid_name', '--name must be 1-200 characters');
      }
      const client = toPublicClient(await services.clients.updateClient(clientId, patch, ACTOR));
      return {
        json: client,
        text: `Updated ${client.client_id}: ${client.client_name}, ${client.active ? 'active' : 'inactive'}, callback ${client.callback_url}`,
      };
    }
    case 'client list': {
      const clients = (await services.clients.listClients()).map(toPublicClient);
      const text = clients.length === 0
        ? 'No client systems.'
        : clients.map((c) => `${c.client_id}\t${c.client_name}\t${c.client_secret}\t${c.active ? 'active' : 'inactive'}\t${c.allowed_ips.join(',')}\t${c.callback_url}`).join('\n');
      return { json: clients, text };
    }
    case 'user create': {
      const user = await services.users.createUser(
        {
          username: required(args, 'username'),
          email: required(args, 'email'),
          password: required(args, 'password'),
          role: typeof args.options.role === 'string' ? args.options.role : undefined,
          fullName: typeof args.options['full-name'] === 'string' ? args.options['full-name'] : undefined,
          active: args.options.inactive !== true,
        },
        ACTOR,
      );
      return { json: publicUser(user), text: `Created user ${user.username} (id ${user.id}, role ${user.role}${user.active ? '' : ', inactive'})` };
    }
    case 'user set-active': {
      const [username, value] = rest;
      if (!username || !['true', 'false'].includes(value ?? '')) usage('user set-active USERNAME true|false');
      const user = await services.users.setActive(username, value === 'true', ACTOR);
      return { json: { username: user.username, active: user.active }, text: `${user.username} is now ${user.active ? 'active' : 'inactive'}` };
    }
    case 'user unlock': {
      const username = rest[0] ?? usage('user unlock USERNAME');
      const r = await services.users.unlock(username, ACTOR);
      return { json: { username: r.username, locked: false }, text: `${r.username} is unlocked` };
    }
    case 'demo': {
      const { config } = services.deps;
      if (config.NODE_ENV === 'production') throw new AppError(400, 'demo_in_production', 'The demo is never created in production');
      const baseUrl = typeof args.options['base-url'] === 'string' ? args.options['base-url'] : `http://127.0.0.1:${config.PORT}`;
      const result = await seedDemo(services, { baseUrl, dataDir: config.DATA_DIR });
      return { json: result, text: demoBanner(result) };
    }
    default:
      throw new AppError(400, 'usage', key ? `Unknown command: ${key}\n\n${USAGE}` : USAGE);
  }
}

function usage(line: string): never {
  throw new AppError(400, 'usage', `Usage: npm run admin -- ${line}`);
}
