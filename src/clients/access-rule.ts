import { AppError } from '../http/errors.ts';
import { ROLE } from '../users/roles.ts';
import type { AccessPatch } from './queries.ts';

/** The form of a group name (migrations/0027_groups_and_access.sql checks the same). */
export const GROUP_NAME = /^[a-z0-9][a-z0-9_.-]{0,63}$/;

/**
 * A client's access rule as given, checked for form (400 naming the entries refused) and
 * trimmed; whether each group exists is the database's check, whose message names it.
 */
export function checkAccessPatch(patch: AccessPatch): AccessPatch {
  const out: AccessPatch = {};
  if (patch.allowGroups !== undefined) {
    const groups = patch.allowGroups.map((g) => g.trim()).filter((g) => g !== '');
    const bad = groups.filter((g) => !GROUP_NAME.test(g));
    if (bad.length > 0) throw new AppError(400, 'invalid_group', `Not a group name (lower-case letters, digits, . _ -): ${bad.join(', ')}`);
    out.allowGroups = groups;
  }
  if (patch.allowRoles !== undefined) {
    const roles = patch.allowRoles.map((r) => r.trim()).filter((r) => r !== '');
    const bad = roles.filter((r) => !ROLE.test(r));
    if (bad.length > 0) throw new AppError(400, 'invalid_role', `Not a role (lower-case letters, digits, . _ -, up to 32): ${bad.join(', ')}`);
    out.allowRoles = roles;
  }
  if (patch.listed !== undefined) out.listed = patch.listed;
  return out;
}
