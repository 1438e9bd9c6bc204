import type { Services } from '../deps.ts';
import { AppError } from '../http/errors.ts';
import { generateClientSecret, hashClientSecret } from '../clients/credentials.ts';
import { toPublicClient } from '../clients/shown.ts';
import { toPublicLink } from '../links/service.ts';
import { findUserByUsername } from '../users/queries.ts';
import type { UserRecord } from '../users/user.ts';
import { normalizeUsername } from '../validation/username.ts';
import { demoBanner, demoBaseUrl, seedDemo } from '../demo/seed.ts';
import type { PruneReport } from '../retention/pruner.ts';
import { pruneNow } from '../retention/service.ts';
import { listPasskeysCommand, removePasskeyCommand } from './passkey-commands.ts';
import type { CommandResult, ParsedArgs } from './command-types.ts';
import { accessOptions, ruleText, runAccessCommand } from './access-commands.ts';
import { USAGE } from './usage.ts';
import { list, oidcOptions, optionalText } from './client-options.ts';
import { exportSeed } from '../seeds/export.ts';

const ACTOR = { via: 'cli' as const, username: 'cli' };

export type { CommandResult, ParsedArgs };

/** Most links `link list` prints; past it, it says so and how to narrow the list. */
export const LINK_LIST_MAX = 1000;


/**
 * Whether the command only reads: it runs on the database as it is, and is refused on one
 * that has not been migrated, instead of creating the schema there (a shell pointed at the
 * wrong database would otherwise get the service's tables from a `client list`).
 */
export function readOnlyCommand(args: ParsedArgs): boolean {
  const key = args.words.slice(0, 2).join(' ');
  return key === 'client list' || key === 'client export' || key === 'link list' || key === 'user passkeys' || key === 'group list' || (key === 'prune' && args.options['dry-run'] === true);
}

function required(args: ParsedArgs, name: string): string {
  const v = args.options[name];
  if (typeof v !== 'string' || v.trim() === '') throw new AppError(400, 'usage', `--${name} is required`);
  return v;
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
  const access = await runAccessCommand(services, args);
  if (access) return access;
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
          initiateLoginUri: optionalText(args, 'initiate-login-uri'),
          ...oidcOptions(args),
          public: args.options.public === true,
          ...accessOptions(args),
        },
        ACTOR,
      );
      const oidc = { redirect_uris: client.redirect_uris, post_logout_redirect_uris: client.post_logout_redirect_uris, public: client.public, backchannel_logout_uri: client.backchannel_logout_uri };
      // a public client has no secret to show (src/clients/service.ts createClient)
      const json = {
        client_id: client.client_id, ...(client.public ? {} : { client_secret: secret }), client_name: client.client_name, callback_url: client.callback_url, allowed_ips: client.allowed_ips,
        ...(client.initiate_login_uri ? { initiate_login_uri: client.initiate_login_uri } : {}),
        ...oidc,
        allow_groups: client.allow_groups, allow_roles: client.allow_roles, listed: client.listed,
      };
      return {
        json,
        text: [
          `Created ${client.public ? 'public ' : ''}client ${client.client_id} (${client.client_name})`,
          `  callback_url:  ${client.callback_url}`,
          ...(client.initiate_login_uri ? [`  initiate_login_uri: ${client.initiate_login_uri}`] : []),
          ...(client.redirect_uris.length > 0 ? [`  redirect_uris: ${client.redirect_uris.join(', ')}`] : []),
          `  may be used by: ${ruleText(client)}`,
          ...(client.public
            ? ['', 'A public client has no secret: it signs users in with OpenID Connect and PKCE (S256).']
            : [
              `  allowed_ips:   ${client.allowed_ips.join(', ') || '(none: every caller is refused until you add one)'}`,
              `  client_secret: ${secret}`,
              '',
              'Store the secret now: it is shown only this once.',
            ]),
        ].join('\n'),
      };
    }
    case 'client rotate-secret': {
      const clientId = rest[0] ?? usage('client rotate-secret CLIENT_ID [--grace-seconds N]');
      const grace = args.options['grace-seconds'];
      if (grace !== undefined && (typeof grace !== 'string' || !/^\d{1,9}$/.test(grace))) usage('client rotate-secret CLIENT_ID [--grace-seconds N]  (N: whole seconds, 0 or more)');
      const { client, secret } = await services.clients.rotateSecret(clientId, ACTOR, { graceSeconds: grace === undefined ? 0 : Number(grace) });
      const until = client.previous_secret_expires_at ? new Date(client.previous_secret_expires_at).toISOString() : null;
      return {
        json: { client_id: client.client_id, client_secret: secret, previous_secret_expires_at: until },
        text: `New secret for ${client.client_id}: ${secret}\n${until ? `The old secret keeps working until ${until}.` : 'The old secret no longer works.'} This one is shown only this once.`,
      };
    }
    case 'client set-ips': {
      const [clientId, ...ips] = rest;
      const none = args.options.none === true;
      // An empty list admits nobody: a forgotten address must not lock every caller out, so
      // emptying the list is said with --none, never by giving no address.
      if (!clientId || (ips.length === 0 && !none) || (ips.length > 0 && none)) usage('client set-ips CLIENT_ID IP_OR_CIDR... | --none   (--none: admit nobody)');
      const client = await services.clients.updateClient(clientId, { allowedIps: ips, allowEverything: args.options['allow-everything'] === true }, ACTOR);
      return { json: { client_id: client.client_id, allowed_ips: client.allowed_ips }, text: `${client.client_id} allows: ${client.allowed_ips.join(', ') || '(nobody)'}` };
    }
    case 'client update': {
      const clientId = rest[0] ?? usage('client update CLIENT_ID [--name N] [--callback-url U] [--initiate-login-uri U] [--active true|false]');
      const active = args.options.active;
      if (active !== undefined && active !== 'true' && active !== 'false') usage('client update CLIENT_ID ... --active true|false');
      const patch = {
        clientName: typeof args.options.name === 'string' ? args.options.name.trim() : undefined,
        callbackUrl: typeof args.options['callback-url'] === 'string' ? args.options['callback-url'].trim() : undefined,
        // '' removes it
        initiateLoginUri: optionalText(args, 'initiate-login-uri'),
        active: active === undefined ? undefined : active === 'true',
        ...oidcOptions(args),
        ...accessOptions(args),
      };
      if (Object.values(patch).every((v) => v === undefined)) usage('client update CLIENT_ID [--name N] [--callback-url U] [--initiate-login-uri U] [--active true|false] (at least one)');
      if (patch.clientName !== undefined && (patch.clientName === '' || patch.clientName.length > 200)) {
        throw new AppError(400, 'invalid_name', '--name must be 1-200 characters');
      }
      const client = toPublicClient(await services.clients.updateClient(clientId, patch, ACTOR));
      return {
        json: client,
        text: `Updated ${client.client_id}: ${client.client_name}, ${client.active ? 'active' : 'inactive'}, callback ${client.callback_url}`
          + (client.initiate_login_uri ? `, initiate login ${client.initiate_login_uri}` : '') + `; may be used by ${ruleText(client)}`,
      };
    }
    case 'client export': {
      const exported = await exportSeed(services.deps.db);
      return { json: exported, text: exported.seed.trimEnd() };
    }
    case 'client list': {
      const clients = (await services.clients.listClients()).map(toPublicClient);
      const text = clients.length === 0
        ? 'No client systems.'
        : clients.map((c) => `${c.client_id}\t${c.client_name}\t${c.client_secret}\t${c.active ? 'active' : 'inactive'}\t${c.allowed_ips.join(',')}\t${c.callback_url}\t${ruleText(c)}`).join('\n');
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
    case 'user set-password': {
      const username = rest[0] ?? usage('user set-password USERNAME --password P [--must-change]');
      const mustChange = args.options['must-change'] === true;
      const user = await services.users.setPassword({ username }, { password: required(args, 'password'), mustChange }, ACTOR);
      return {
        json: { username: user.username, must_change_password: user.must_change_password },
        text: `Password of ${user.username} set${mustChange ? '; it must be changed at the next sign-in' : ''}. Their sessions have ended.`,
      };
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
      return {
        json: { username: r.username, locked: false, user_exists: r.exists },
        text: r.exists ? (r.cleared ? `${r.username} is unlocked` : `${r.username} was not locked`)
          : `No user is named ${r.username}; ${r.cleared ? 'failed sign-ins under that name were cleared' : 'no failed sign-ins were counted under that name'}`,
      };
    }
    case 'user passkeys': return listPasskeysCommand(services, rest[0] ?? usage('user passkeys USERNAME'));
    case 'user remove-passkey': {
      if (!rest[0] || !rest[1]) usage('user remove-passkey USERNAME ID');
      return removePasskeyCommand(services, rest[0], rest[1]);
    }
    case 'link list': {
      const status = args.options.status;
      if (status !== undefined && status !== 'pending' && status !== 'active') usage('link list [--status pending|active] [--client CLIENT_ID]');
      const clientId = typeof args.options.client === 'string' ? args.options.client : undefined;
      const found = await services.links.list({ status, clientId }, LINK_LIST_MAX + 1);
      const links = found.slice(0, LINK_LIST_MAX);
      const text = links.length === 0
        ? 'No links.'
        : links.map((l) => `${l.username}\t${l.client_id}\t${l.external_username}\t${l.status}\t${l.requested_at}`).join('\n');
      const notice = found.length > LINK_LIST_MAX
        ? `admin: only the first ${LINK_LIST_MAX} links (oldest request first) are listed; narrow the list with --status or --client`
        : undefined;
      return { json: links, text, notice };
    }
    case 'link approve':
    case 'link revoke': {
      const [username, clientId] = rest;
      if (!username || !clientId) usage(`${key} USERNAME CLIENT_ID`);
      const user = await findUserByUsername(services.deps.db, normalizeUsername(username));
      if (!user) throw new AppError(404, 'user_not_found', `No user ${normalizeUsername(username)}`);
      if (action === 'approve') {
        const name = args.options.name;
        if (name !== undefined && (typeof name !== 'string' || name === '')) usage('link approve USERNAME CLIENT_ID [--name NAME]');
        const link = await services.links.approve(user.id, clientId, ACTOR, name);
        return { json: toPublicLink(link), text: `${user.username} is ${link.external_username} at ${link.client_id} (active)` };
      }
      const { link, invalidatedTokens } = await services.links.revoke(user.id, clientId, ACTOR);
      return {
        json: { revoked: toPublicLink(link), invalidated_tokens: invalidatedTokens },
        text: `Revoked: ${user.username} is no longer ${link.external_username} at ${link.client_id} (${invalidatedTokens} unused token(s) invalidated)`,
      };
    }
    case 'demo': {
      const { config } = services.deps;
      if (config.NODE_ENV === 'production') throw new AppError(400, 'demo_in_production', 'The demo is never created in production');
      const given = typeof args.options['base-url'] === 'string' ? { url: args.options['base-url'], from: '--base-url' } : await demoBaseUrl(services, config);
      const result = await seedDemo(services, { baseUrl: given.url, dataDir: config.DATA_DIR });
      return { json: result, text: demoBanner(result), notice: `admin: the demo points at ${given.url} (from ${given.from}; --base-url URL to choose another)` };
    }
    case 'prune': {
      const report = await pruneNow(services.deps, { dryRun: args.options['dry-run'] === true, actor: ACTOR });
      return {
        json: { dry_run: report.dryRun, tables: report.counts, kept_forever: report.keptForever, left_to_other_instance: report.leftToOthers, not_permitted: report.notPermitted },
        text: pruneText(report),
      };
    }
    default:
      throw new AppError(400, 'usage', key ? `Unknown command: ${key}\n\n${USAGE}` : USAGE);
  }
}

/** The prune report as a table for people. */
function pruneText(report: PruneReport): string {
  const lines = [report.dryRun ? 'Dry run: nothing deleted. A pass now would delete:' : 'Deleted:'];
  for (const [table, n] of Object.entries(report.counts) as Array<[keyof PruneReport['counts'], number]>) {
    const note = report.keptForever.includes(table) ? '  (retention 0: kept forever)'
      : report.leftToOthers.includes(table) ? '  (another instance was pruning it: left to that one)'
      : report.notPermitted.includes(table) ? '  (the database user may not delete here: kept)' : '';
    lines.push(`  ${table.padEnd(20)}${String(n).padStart(10)}${note}`);
  }
  return lines.join('\n');
}

function usage(line: string): never {
  throw new AppError(400, 'usage', `Usage: npx auth-admin ${line}`);
}
