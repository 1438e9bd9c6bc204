import { runAdmin } from '../../src/cli/run.ts';
import type { TestApp } from './app.ts';
import { TEST_ENV } from './app.ts';

/** What one command printed and its exit status. */
export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs one admin command in-process on the test app's database (the same code the real
 * command line runs, without a process start per command). `env` adds configuration keys.
 */
export async function admin(app: Pick<TestApp, 'db' | 'config'>, args: string[], env: Record<string, string> = {}): Promise<CliResult> {
  let stdout = '';
  let stderr = '';
  const code = await runAdmin(args, {
    stdout: (text) => void (stdout += text),
    stderr: (text) => void (stderr += text),
    env: { ...TEST_ENV, DATA_DIR: app.config.DATA_DIR, ...env },
    db: app.db,
  });
  return { code, stdout, stderr };
}
