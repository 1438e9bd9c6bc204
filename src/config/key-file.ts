import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { createWhole } from './create-whole.ts';

/** 32 random bytes in base64url (43 characters), as this module writes them; anything else is no key. */
const KEY_TEXT = /^[A-Za-z0-9_-]{43,}$/;

/**
 * The key kept in `file` for an instance configured without a secret (development): made
 * once, then read by every later start and every instance sharing the directory. The key is
 * created whole (createWhole: the first instance wins and the others read its key), so the
 * name never holds an empty or partial key that another instance could read. A file that holds no key (emptied,
 * or cut short by a crash of a version that wrote it in place) is replaced, never used: an
 * HMAC key of zero bytes would let anyone sign tokens. (Two instances replacing such a file
 * at the same moment can each keep its own key until their next start; development only.)
 */
export function developmentKey(file: string): string {
  const read = (): string | null => {
    try {
      const text = readFileSync(file, 'utf8').trim();
      return KEY_TEXT.test(text) ? text : null;
    } catch {
      return null;
    }
  };
  const existing = read();
  if (existing) return existing;
  mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const key = randomBytes(32).toString('base64url');
  if (createWhole(file, key, 0o600)) return key;
  const theirs = read();
  if (theirs) return theirs;
  // the name holds no key: replaced whole (a rename replaces it in one step)
  const temp = `${file}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
  try {
    writeFileSync(temp, key, { mode: 0o600 });
    renameSync(temp, file);
    return read() ?? key;
  } finally {
    rmSync(temp, { force: true });
  }
}
