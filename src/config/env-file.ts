import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parseEnv } from 'node:util';

/** The environment file named could not be read; the message names it. */
export class EnvFileError extends Error {}

/** What loadEnvFile did: the file it read (null when there was none) and the keys it set. */
export interface EnvFileResult {
  path: string | null;
  applied: string[];
}

/**
 * Reads `.env` from the working directory (or the file ENV_FILE names) into `env` when it
 * exists: the service, the admin command line, migrate and seed all start with this, so
 * they see the same configuration. A variable already set in the real environment wins;
 * one set to the empty string counts as unset (as everywhere in the configuration), so the
 * file's value applies. A missing file is not an error; an unreadable one is.
 */
export function loadEnvFile(env: Record<string, string | undefined> = process.env, cwd = process.cwd()): EnvFileResult {
  const named = env.ENV_FILE?.trim();
  const file = path.resolve(cwd, named || '.env');
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    // without ENV_FILE a missing .env is the normal case; a named file must exist
    if ((err as NodeJS.ErrnoException).code === 'ENOENT' && !named) return { path: null, applied: [] };
    throw new EnvFileError(`Cannot read the environment file ${file}: ${(err as Error).message}`);
  }
  const applied: string[] = [];
  for (const [key, value] of Object.entries(parseEnv(text))) {
    const current = env[key];
    if (current !== undefined && current.trim() !== '') continue;
    env[key] = value;
    applied.push(key);
  }
  return { path: file, applied };
}
