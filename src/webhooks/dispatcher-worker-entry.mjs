// Entry of the webhook dispatcher thread from the TypeScript sources when its bundle cannot
// be written (thread-entry.ts). On Node 20 a worker's own entry file is loaded before the
// parent's `--import tsx` hooks apply to it, so the thread registers tsx itself and then
// loads the TypeScript module.
import { register } from 'tsx/esm/api';

register();
await import('./dispatcher-worker.ts');
