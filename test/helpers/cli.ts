import { type CliIo, runAdmin } from '../../src/cli/run.ts';
import type { TestApp } from './app.ts';
import { TEST_ENV } from './app.ts';

/** What one command printed and its exit status. */
export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a command function (runAdmin, runSeed) with its output collected. */
export async function captured<Io extends CliIo>(
  command: (argv: string[], io: Io) => Promise<number>,
  argv: string[],
  io: Omit<Io, 'stdout' | 'stderr'>,
): Promise<CliResult> {
  let stdout = '';
  let stderr = '';
  const code = await command(argv, { ...io, stdout: (text: string) => void (stdout += text), stderr: (text: string) => void (stderr += text) } as Io);
  return { code, stdout, stderr };
}

/**
 * Runs one admin command in-process on the test app's database (the same code the real
 * command line runs, without a process start per command). `env` adds configuration keys.
 */
export function admin(app: Pick<TestApp, 'db' | 'config'>, args: string[], env: Record<string, string> = {}): Promise<CliResult> {
  return captured(runAdmin, args, { env: { ...TEST_ENV, DATA_DIR: app.config.DATA_DIR, ...env }, db: app.db });
}
