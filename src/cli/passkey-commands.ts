import type { Services } from '../deps.ts';
import { AppError } from '../http/errors.ts';
import { passkeyJson } from '../passkeys/schemas.ts';
import { findUserByUsername } from '../users/queries.ts';
import { normalizeUsername } from '../validation/username.ts';

const ACTOR = { via: 'cli' as const, username: 'cli' };

async function userNamed(services: Services, username: string) {
  const user = await findUserByUsername(services.deps.db, normalizeUsername(username));
  if (!user) throw new AppError(404, 'user_not_found', `No user ${normalizeUsername(username)}`);
  return user;
}

/** `user passkeys USERNAME`: the user's passkeys (id, name, created, last used). */
export async function listPasskeysCommand(services: Services, username: string) {
  const user = await userNamed(services, username);
  const passkeys = (await services.passkeys.list(user.id)).map(passkeyJson);
  const text = passkeys.length === 0
    ? `${user.username} has no passkeys`
    : passkeys.map((p) => `${p.id}\t${p.name}\tcreated ${p.created_at}\tlast used ${p.last_used_at ?? 'never'}`).join('\n');
  return { json: { username: user.username, passkeys }, text };
}

/** `user remove-passkey USERNAME ID`: removes one (audited as passkey.removed, via cli); the user keeps their password. */
export async function removePasskeyCommand(services: Services, username: string, idText: string) {
  const user = await userNamed(services, username);
  if (!/^[1-9]\d{0,8}$/.test(idText)) throw new AppError(400, 'invalid_id', 'The passkey id must be a positive integer (see: user passkeys USERNAME)');
  await services.passkeys.remove(user, Number(idText), { actor: ACTOR });
  return { json: { username: user.username, removed: Number(idText) }, text: `Removed passkey ${idText} of ${user.username}` };
}
