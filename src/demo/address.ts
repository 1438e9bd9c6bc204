import { mkdir, readFile, rename, unlink, writeFile } from 'node:fs/promises';
import path from 'node:path';

/**
 * Where the running service listens, kept in DATA_DIR (mode 0600) while it runs, so the
 * command line can tell it: `npm run admin -- demo` in a shell without the service's PORT
 * points the demo client at the port the service really listens on (src/cli/commands.ts).
 */
const FILE = 'service-address.json';

interface ServiceAddress {
  pid: number;
  url: string;
}

function addressPath(dataDir: string): string {
  return path.resolve(dataDir, FILE);
}

/** Records this process's address (atomically: write then rename). */
export async function saveServiceAddress(dataDir: string, url: string): Promise<void> {
  const file = addressPath(dataDir);
  await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  const tmp = `${file}.${process.pid}.tmp`;
  await writeFile(tmp, `${JSON.stringify({ pid: process.pid, url } satisfies ServiceAddress)}\n`, { mode: 0o600 });
  await rename(tmp, file);
}

/** Removes the record, if it is still this process's (another instance may have started since). */
export async function removeServiceAddress(dataDir: string): Promise<void> {
  const found = await readRecord(dataDir);
  if (found?.pid === process.pid) await unlink(addressPath(dataDir)).catch(() => {});
}

/** The address of the service running on this DATA_DIR, or null when none is recorded or its process is gone. */
export async function runningServiceAddress(dataDir: string): Promise<string | null> {
  const found = await readRecord(dataDir);
  if (!found || !isAlive(found.pid)) return null;
  return found.url;
}

async function readRecord(dataDir: string): Promise<ServiceAddress | null> {
  try {
    const parsed = JSON.parse(await readFile(addressPath(dataDir), 'utf8')) as Partial<ServiceAddress>;
    if (!Number.isInteger(parsed.pid) || typeof parsed.url !== 'string' || !/^https?:\/\//.test(parsed.url)) return null;
    return { pid: parsed.pid!, url: parsed.url };
  } catch {
    return null;
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'; // alive, another user's
  }
}
