import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = path.resolve(fileURLToPath(new URL('../../', import.meta.url)));
const TSX = ['--import', 'tsx'];
/** What `npm start` loads first: libuv's pool, where bcrypt hashes, below the event loop. */
export const POOL_PRIORITY = '--require=./scripts/pool-priority.cjs';

/** Runs the admin command line; resolves with its exit code and output. */
export function runCli(args: string[], env: Record<string, string | undefined>): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [...TSX, 'src/cli/main.ts', ...args], { cwd: ROOT, env: { ...process.env, ...env } }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr });
    });
  });
}

/**
 * Starts `src/server.ts` as a real process (with the preload `npm start` gives it, unless
 * `nodeFlags` says otherwise) with PORT=0 and waits for its "listening" log
 * line, which names the URL.
 */
export async function startServerProcess(env: Record<string, string | undefined>, nodeFlags: readonly string[] = [POOL_PRIORITY]): Promise<{
  child: ChildProcess; url: string; metricsUrl?: string; output: () => string; stop(): Promise<number | null>;
}> {
  const child = spawn(process.execPath, [...nodeFlags, ...TSX, 'src/server.ts'], {
    cwd: ROOT,
    env: { ...process.env, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const { url, metricsUrl, output } = await listeningUrl(child);
  return {
    child,
    url,
    metricsUrl,
    output,
    async stop() {
      if (child.exitCode !== null) return child.exitCode;
      child.kill('SIGTERM');
      const [code] = await once(child, 'exit');
      return code as number | null;
    },
  };
}

/**
 * Waits for a service process's "auth service listening" log line and returns the URL it
 * names (and its metrics listener's, when METRICS_PORT is set), with the process's output so far (stdout and stderr); rejects if the process exits
 * first or says nothing of the kind within 50 s (the embedded database under tsx has taken more
 * than 30 s to start on a 2-core machine busy with other tests; a test is given 60).
 */
export async function listeningUrl(child: ChildProcess): Promise<{ url: string; metricsUrl?: string; output: () => string }> {
  let out = '';
  let metricsUrl: string | undefined;
  const url = await new Promise<string>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      out += chunk.toString();
      const m = /"url":"(http:\/\/[^"]+)"(?:,"metrics_url":"(http:\/\/[^"]+)")?[^\n]*auth service listening/.exec(out);
      if (m) {
        metricsUrl = m[2];
        resolve(m[1]!);
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`server exited with ${code}: ${out}`)));
    setTimeout(() => reject(new Error(`server did not start: ${out}`)), 50_000).unref();
  });
  return { url, metricsUrl, output: () => out };
}
