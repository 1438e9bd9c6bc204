import { readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';

/**
 * The demo client's own credentials. The demo callback page validates tokens the way a real
 * client system does, over HTTP with client_id and client_secret, so it needs the plain
 * secret, which the database only holds hashed. It is kept in DATA_DIR (mode 0600) next to
 * the development keys, so `npm run admin -- demo` and the running service share it.
 */
export interface DemoCredentials {
  client_id: string;
  client_secret: string;
}

const FILE = 'demo-client.json';

/** Where the demo credentials live. */
export function demoCredentialsPath(dataDir: string): string {
  return path.resolve(dataDir, FILE);
}

/** Stores the demo client's credentials (atomically: write then rename). */
export async function saveDemoCredentials(dataDir: string, credentials: DemoCredentials): Promise<void> {
  const file = demoCredentialsPath(dataDir);
  const tmp = `${file}.${process.pid}.tmp`;
  await writeFile(tmp, `${JSON.stringify(credentials)}\n`, { mode: 0o600 });
  await rename(tmp, file);
}

/** The stored demo credentials, or null when this instance has none. */
export async function readDemoCredentials(dataDir: string): Promise<DemoCredentials | null> {
  try {
    const parsed = JSON.parse(await readFile(demoCredentialsPath(dataDir), 'utf8')) as Partial<DemoCredentials>;
    if (typeof parsed.client_id !== 'string' || typeof parsed.client_secret !== 'string') return null;
    return { client_id: parsed.client_id, client_secret: parsed.client_secret };
  } catch {
    return null;
  }
}
