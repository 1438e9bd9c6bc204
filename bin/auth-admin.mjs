#!/usr/bin/env node
// The admin command line as an installed command (`npx auth-admin client list --json | jq`):
// no npm banner on stdout. Runs the compiled dist/cli/main.js when there is one, else the
// TypeScript source through tsx.
import { existsSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';

const compiled = fileURLToPath(new URL('../dist/cli/main.js', import.meta.url));
if (existsSync(compiled)) {
  await import(pathToFileURL(compiled).href);
} else {
  const { register } = await import('tsx/esm/api');
  register();
  await import('../src/cli/main.ts');
}
