import type { Services } from '../deps.ts';
import { AppError } from '../http/errors.ts';
import { findUserByUsername } from '../users/queries.ts';
import { normalizeUsername } from '../validation/username.ts';
import type { CommandResult, ParsedArgs } from './command-types.ts';
import { list } from './client-options.ts';

const ACTOR = { via: 'cli' as const, username: 'cli' };

/** The usage lines of the access commands (docs/access.md). */
export const ACCESS_USAGE = `  group create NAME          a group (lower-case letters, digits, . _ -)
  group delete NAME          its memberships go with it; refused while a client's rule names it
  group list
  user add-to-group USERNAME GROUP
  user remove-from-group USERNAME GROUP`;

/**
 * A client's access rule and listing from `client create|update` options: --allow-group and
 * --allow-role (repeatable; each replaces that list), --open-to-all (clears both: every active
 * user), --listed true|false. Undefined fields are left as they are.
 */
export function accessOptions(args: ParsedArgs): { allowGroups?: string[]; allowRoles?: string[]; listed?: boolean } {
  const groups = list(args.options['allow-group']);
  const roles = list(args.options['allow-role']);
  const open = args.options['open-to-all'] === true;
  if (open && (groups.length > 0 || roles.length > 0)) usage('client update CLIENT_ID --open-to-all   (not with --allow-group or --allow-role)');
  const listed = args.options.listed;
  if (listed !== undefined && listed !== 'true' && listed !== 'false') usage('client update CLIENT_ID --listed true|false');
  return {
    allowGroups: open ? [] : groups.length > 0 ? groups : undefined,
    allowRoles: open ? [] : roles.length > 0 ? roles : undefined,
    listed: listed === undefined ? undefined : listed === 'true',
  };
}

/** The rule as a line for people. */
export function ruleText(c: { allow_groups: string[]; allow_roles: string[]; listed: boolean }): string {
  const parts = [...c.allow_groups.map((g) => `group ${g}`), ...c.allow_roles.map((r) => `role ${r}`)];
  return `${parts.length === 0 ? 'every active user' : parts.join(', ')}${c.listed ? '' : ' (not listed on the dashboard)'}`;
}

/** Runs a group or membership command, or null when `args` is none of them. */
export async function runAccessCommand(services: Services, args: ParsedArgs): Promise<CommandResult | null> {
  const [group, action, ...rest] = args.words;
  const key = `${group ?? ''} ${action ?? ''}`.trim();
  switch (key) {
    case 'group create': {
      const name = rest[0] ?? usage('group create NAME');
      const created = await services.access.createGroup(name, ACTOR);
      return { json: created, text: `Created group ${created.name}` };
    }
    case 'group delete': {
      const name = rest[0] ?? usage('group delete NAME');
      const gone = await services.access.deleteGroup(name, ACTOR);
      return { json: { name: gone.name, deleted: true, members: gone.members }, text: `Deleted group ${gone.name} (${gone.members} member(s) taken out)` };
    }
    case 'group list': {
      const groups = await services.access.listGroups();
      return { json: groups, text: groups.length === 0 ? 'No groups.' : groups.map((g) => `${g.name}\t${g.members} member(s)`).join('\n') };
    }
    case 'user add-to-group':
    case 'user remove-from-group': {
      const [username, name] = rest;
      if (!username || !name) usage(`${key} USERNAME GROUP`);
      const user = await findUserByUsername(services.deps.db, normalizeUsername(username));
      if (!user) throw new AppError(404, 'user_not_found', `No user ${normalizeUsername(username)}`);
      const add = action === 'add-to-group';
      const r = add ? await services.access.addToGroup(user.id, name, ACTOR) : await services.access.removeFromGroup(user.id, name, ACTOR);
      const text = add
        ? (r.changed ? `${r.username} is now in ${r.group}` : `${r.username} was already in ${r.group}`)
        : (r.changed ? `${r.username} is no longer in ${r.group}` : `${r.username} was not in ${r.group}`);
      return { json: { username: r.username, group: r.group, member: r.member, changed: r.changed, groups: await services.access.groupsOf(user.id) }, text };
    }
    default:
      return null;
  }
}

function usage(line: string): never {
  throw new AppError(400, 'usage', `Usage: npx auth-admin ${line}`);
}
