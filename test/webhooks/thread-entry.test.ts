import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { dispatcherThreadEntry } from '../../src/webhooks/thread-entry.ts';

const warnings: unknown[] = [];
const logger = { warn: (...args: unknown[]) => void warnings.push(args) };

describe('the module a dispatcher thread starts from, run from the TypeScript sources', () => {
  it('is one bundle of the thread code per process, under node_modules/.cache, named by its content', async () => {
    const entry = dispatcherThreadEntry(logger);
    expect(warnings, 'bundled, not the tsx fallback').toStrictEqual([]);
    expect(dispatcherThreadEntry(logger), 'the same file for every thread').toBe(entry);
    const file = fileURLToPath(entry);
    expect(file).toMatch(/\/node_modules\/\.cache\/auth-service\/dispatcher-worker-[0-9a-f]{16}\.mjs$/);
    const code = await readFile(file, 'utf8');
    for (const source of ['src/webhooks/dispatcher-worker.ts', 'src/webhooks/dispatcher.ts', 'src/webhooks/sender.ts', 'src/db/postgres.ts']) {
      expect(code, `holds ${source}`).toContain(`// ${source}`);
    }
    expect(code, 'packages stay imports, resolved from node_modules').toMatch(/from "pg"/);
  });

  it('starts a thread that loads the whole dispatcher without registering tsx', async () => {
    // A database nobody serves: the thread still loads every module, starts the dispatcher
    // (whose polls fail and are logged) and stops when told, exiting 0. A module that cannot
    // load is an 'error' event and exit code 1.
    const thread = new Worker(dispatcherThreadEntry(logger), {
      workerData: {
        connectionString: 'postgres://nobody@127.0.0.1:9/none', logLevel: 'silent',
        config: { NODE_ENV: 'test', WEBHOOK_ALLOW_PRIVATE: true, WEBHOOK_TIMEOUT_MS: 500, WEBHOOK_BACKOFF_MS: 10 },
      },
      stdout: true, stderr: true,
    });
    const errors: string[] = [];
    thread.on('error', (err) => errors.push(err.message));
    const exited = new Promise<number>((resolve) => thread.once('exit', resolve));
    thread.postMessage({ type: 'stop' });
    expect(await exited, 'it ran and stopped when told').toBe(0);
    expect(errors, 'no module failed to load').toStrictEqual([]);
  });
});
