import { usePrivateUmask } from '../config/private-dir.ts';
import { runAdmin } from './run.ts';

usePrivateUmask(); // what a command creates in DATA_DIR (the embedded database, keys, the demo's credentials) is this user's alone

/** The admin command line's entry point: runAdmin on this process's arguments and streams. */
const code = await runAdmin(process.argv.slice(2), {
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
  env: process.env,
});
process.exitCode = code;
