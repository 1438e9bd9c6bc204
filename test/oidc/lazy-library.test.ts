import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { prepareServerEnv, startServerProcess, type ServerProcess } from '../ops/helpers/child-service.ts';

const HOOK = pathToFileURL(path.join(import.meta.dirname, 'fixtures', 'record-loads.mjs')).href;

/**
 * oidc-provider is loaded by the first OpenID Connect request, not at start (src/oidc/library.ts):
 * a service nobody signs in to by OpenID Connect does not hold its code. The real entry point,
 * with a loader hook that writes down every oidc-provider module the process loads.
 */
describe('oidc-provider loaded at the first OpenID Connect request', () => {
  let prepared: Awaited<ReturnType<typeof prepareServerEnv>>;
  let server: ServerProcess;
  let loads: string;
  const loaded = () => (existsSync(loads) ? readFileSync(loads, 'utf8').split('\n').filter(Boolean) : []);
  beforeAll(async () => {
    prepared = await prepareServerEnv();
    loads = path.join(await mkdtemp(path.join(os.tmpdir(), 'auth-loads-')), 'loads.txt');
    server = await startServerProcess({ ...prepared.env, NODE_OPTIONS: `--import=${HOOK}`, LOADS_FILE: loads });
  }, 70_000);
  afterAll(async () => {
    if (server?.child.exitCode === null) server.child.kill('SIGTERM');
    await server?.exited;
    await prepared?.drop();
  });

  it('starts, answers the API and pages, and has not loaded it', async () => {
    expect((await fetch(`${server.url}/readyz`)).status).toBe(200);
    expect((await fetch(`${server.url}/login`)).status).toBe(200);
    expect((await fetch(`${server.url}/api/sso/validate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).status).toBe(400);
    expect(loaded()).toStrictEqual([]);
  });

  it('loads it for the first OpenID Connect request, which is answered', async () => {
    const [discovery, jwks] = await Promise.all([fetch(`${server.url}/.well-known/openid-configuration`), fetch(`${server.url}/oidc/jwks`)]);
    expect(discovery.status).toBe(200);
    expect(((await discovery.json()) as { token_endpoint: string }).token_endpoint).toMatch(/\/oidc\/token$/);
    expect(jwks.status).toBe(200);
    expect(((await jwks.json()) as { keys: unknown[] }).keys.length).toBeGreaterThan(0);
    expect(loaded().some((url) => url.endsWith('/oidc-provider/lib/index.js')), 'the library itself').toBe(true);
  });
});
