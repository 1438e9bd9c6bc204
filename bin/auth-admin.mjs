#!/usr/bin/env node
// The admin command line as an installed command (`npx auth-admin client list --json | jq`):
// no npm banner on stdout. It starts like `npm run admin`: the compiled dist/cli/main.js in
// production or when it is fresh, else the TypeScript sources through tsx (scripts/launch.mjs).
process.argv.splice(2, 0, 'cli/main');
await import('../scripts/launch.mjs');
