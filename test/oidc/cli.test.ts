import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { admin } from '../helpers/cli.ts';

describe('client commands with OpenID Connect fields', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(() => app.close());

  it('creates a public client: its JSON has no client_secret', async () => {
    const r = await admin(app, ['client', 'create', '--name', 'Phone app', '--callback-url', 'https://app.example/cb', '--public',
      '--redirect-uri', 'https://app.example/oidc', '--post-logout-redirect-uri', 'https://app.example/bye', '--json']);
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout);
    expect(out).not.toHaveProperty('client_secret');
    expect(out).toMatchObject({ public: true, redirect_uris: ['https://app.example/oidc'], post_logout_redirect_uris: ['https://app.example/bye'] });
    const rotate = await admin(app, ['client', 'rotate-secret', out.client_id, '--json']);
    expect(rotate.code, 'a public client gets no secret by rotation either').not.toBe(0);
    expect(rotate.stdout).not.toMatch(/client_secret/);
  });

  it('creates a confidential client with its secret, and updates its redirect URIs (audited)', async () => {
    const created = JSON.parse((await admin(app, ['client', 'create', '--name', 'Wiki', '--callback-url', 'https://wiki.example/cb', '--json'])).stdout);
    expect(created.client_secret).toEqual(expect.any(String));
    const r = await admin(app, ['client', 'update', created.client_id, '--redirect-uri', 'https://wiki.example/a', '--redirect-uri', 'https://wiki.example/b', '--backchannel-logout-uri', 'https://wiki.example/bcl', '--json']);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ redirect_uris: ['https://wiki.example/a', 'https://wiki.example/b'], backchannel_logout_uri: 'https://wiki.example/bcl' });
    const audit = await app.db.query<{ details: { changed: Record<string, unknown> } }>("SELECT details FROM audit_log WHERE action = 'client.update' AND client_id = $1", [created.client_id]);
    expect(audit.rows.at(-1)!.details.changed).toMatchObject({ redirect_uris: ['https://wiki.example/a', 'https://wiki.example/b'] });
  });

  it('refuses a redirect URI with a fragment, and the database refuses one written by hand', async () => {
    const r = await admin(app, ['client', 'create', '--name', 'Bad', '--callback-url', 'https://bad.example/cb', '--redirect-uri', 'https://bad.example/x#frag', '--json']);
    expect(r.code).not.toBe(0);
    await expect(app.db.query("INSERT INTO clients (client_id, client_name, secret_hash, secret_last4, callback_url, redirect_uris) VALUES ('hand-made', 'x', encode(sha256('x'), 'hex'), 'abcd', 'https://a.example/cb', ARRAY['javascript:alert(1)'])"))
      .rejects.toThrow(/absolute http\(s\) URL/);
  });
});
