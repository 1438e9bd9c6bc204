import { createSecretKey, randomBytes, type KeyObject } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Config } from '../config.ts';

/**
 * The HMAC key for every token this service signs, built once as a KeyObject (jsonwebtoken
 * with a string key re-derives it on every call and is about 50x slower). JWT_SECRET when
 * set (required in production); otherwise a random key generated once and kept in DATA_DIR,
 * so tokens survive a restart of a development instance.
 */
export async function loadSigningKey(config: Pick<Config, 'JWT_SECRET' | 'DATA_DIR' | 'NODE_ENV'>): Promise<KeyObject> {
  if (config.JWT_SECRET) return createSecretKey(Buffer.from(config.JWT_SECRET, 'utf8'));
  const file = path.resolve(config.DATA_DIR, 'jwt.key');
  const existing = await readFile(file, 'utf8').catch(() => null);
  if (existing && existing.trim().length >= 43) return createSecretKey(Buffer.from(existing.trim(), 'base64url'));
  const key = randomBytes(32);
  await mkdir(path.dirname(file), { recursive: true });
  try {
    await writeFile(file, key.toString('base64url'), { flag: 'wx', mode: 0o600 });
    return createSecretKey(key);
  } catch {
    // another instance wrote it first: use theirs
    return createSecretKey(Buffer.from((await readFile(file, 'utf8')).trim(), 'base64url'));
  }
}
