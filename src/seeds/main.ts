import { runSeed } from './run.ts';

/** `npm run seed` entry point: runSeed on this process's arguments and streams. */
const code = await runSeed(process.argv.slice(2), {
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
  env: process.env,
});
process.exitCode = code;
