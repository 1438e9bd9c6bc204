import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/** nginx, where installed (.ci/run installs it): the deployment's own deploy/nginx.conf in front of two stand-in replicas. */
const nginx = ['/usr/sbin/nginx', '/usr/bin/nginx'].find((p) => spawnSync(p, ['-v']).status === 0);

/** A stand-in replica: answers every request with its name. */
async function replica(name: string): Promise<{ port: number; server: http.Server }> {
  const server = http.createServer((_req, res) => res.end(name));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { port: (server.address() as AddressInfo).port, server };
}

async function freePort(): Promise<number> {
  const s = http.createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const { port } = s.address() as AddressInfo;
  await new Promise((resolve) => s.close(resolve));
  return port;
}

describe.runIf(nginx)('deploy/nginx.conf in front of two replicas', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'auth-nginx-'));
  let proxy: ChildProcess;
  let port: number;
  const replicas: http.Server[] = [];

  beforeAll(async () => {
    const [a, b] = [await replica('auth-1'), await replica('auth-2')];
    replicas.push(a.server, b.server);
    port = await freePort();
    const site = readFileSync(path.join(import.meta.dirname, '../../deploy/nginx.conf'), 'utf8')
      .replaceAll('auth-1:3000', `127.0.0.1:${a.port}`).replaceAll('auth-2:3000', `127.0.0.1:${b.port}`).replace('listen 8080;', `listen 127.0.0.1:${port};`);
    expect(site, 'the stand-ins replace both replicas and the port').not.toMatch(/auth-[12]:3000|listen 8080/);
    writeFileSync(path.join(dir, 'site.conf'), site);
    writeFileSync(path.join(dir, 'nginx.conf'), `pid ${dir}/nginx.pid;\nerror_log ${dir}/error.log;\nevents {}\nhttp {\n  access_log off;\n`
      + `  client_body_temp_path ${dir}/body; proxy_temp_path ${dir}/proxy; fastcgi_temp_path ${dir}/fcgi; uwsgi_temp_path ${dir}/uwsgi; scgi_temp_path ${dir}/scgi;\n`
      + `  include ${dir}/site.conf;\n}\n`);
    proxy = spawn(nginx!, ['-p', dir, '-c', path.join(dir, 'nginx.conf'), '-g', 'daemon off;'], { stdio: ['ignore', 'ignore', 'pipe'] });
    for (let i = 0; i < 100; i++) {
      if (await get('/healthz').then(() => true, () => false)) return;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    throw new Error(`nginx did not start: ${readFileSync(path.join(dir, 'error.log'), 'utf8')}`);
  });
  afterAll(async () => {
    proxy?.kill();
    await Promise.all(replicas.map((s) => new Promise((resolve) => s.close(resolve))));
    rmSync(dir, { recursive: true, force: true });
  });

  /** Which replica answered. A new connection each time, as separate browsers' requests would be. */
  function get(pathname: string, cookie?: string): Promise<string> {
    return new Promise((resolve, reject) => {
      const req = http.get({ host: '127.0.0.1', port, path: pathname, agent: false, headers: cookie ? { cookie } : {} }, (res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += c));
        res.on('end', () => resolve(body));
      });
      req.on('error', reject);
    });
  }

  it('balances every other request over both replicas', async () => {
    const answered = new Set<string>();
    for (let i = 0; i < 6; i++) answered.add(await get('/api/sso/validate', 'auth.sid=s%3Aone.sig'));
    expect([...answered].sort()).toStrictEqual(['auth-1', 'auth-2']);
  });

  it('sends a browser session\'s admin panel requests, in any case, all to one replica (a form sent twice meets its first send: src/admin/once.ts)', async () => {
    for (const sid of ['s%3Aone.sig', 's%3Atwo.sig', 's%3Athree.sig']) {
      const answered = new Set<string>();
      for (const p of ['/admin/clients', '/admin/clients/shop/regenerate', '/ADMIN/Clients', '/admin', '/admin/clients']) {
        answered.add(await get(p, `theme=dark; auth.sid=${sid}; other=1`));
      }
      expect(answered.size, `session ${sid}: ${[...answered].join(', ')}`).toBe(1);
    }
  });

  it('still refuses /metrics from outside, in any case', async () => {
    for (const p of ['/metrics', '/METRICS', '/metrics/']) {
      const status = await new Promise<number>((resolve, reject) => {
        http.get({ host: '127.0.0.1', port, path: p, agent: false }, (res) => {
          res.resume();
          resolve(res.statusCode!);
        }).on('error', reject);
      });
      expect(status, p).toBe(404);
    }
  });
});
