// The roles a user carries to client systems: one rule for every place that says them.

/** The form of a role (users.role; a client's allow_roles, migrations/0027, checks the same). */
export const ROLE = /^[a-z][a-z0-9_.-]{0,31}$/;

/** The prefix a group takes in a `roles` array. */
export const GROUP_ROLE_PREFIX = 'group:';

/**
 * The `roles` of a user, as SSO tokens carry them (claim `roles`), the validate answer gives
 * them (`user.roles`) and OpenID Connect's `roles` claim: the user's role, then each of their
 * groups as `group:NAME`, sorted by name (docs/access.md). A role never contains `:`, so the
 * two kinds never meet: `["user", "group:finance"]`.
 */
export function rolesOf(user: { role: string }, groups: readonly string[]): string[] {
  return [user.role, ...[...groups].sort().map((g) => `${GROUP_ROLE_PREFIX}${g}`)];
}
