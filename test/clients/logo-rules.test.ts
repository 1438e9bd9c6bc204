import { copyFile, mkdtemp, readdir } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashClientSecret } from '../../src/clients/credentials.ts';
import { migrate } from '../../src/db/migrate.ts';
import { logoUrlProblem } from '../../src/validation/logo-url.ts';
import { createMigratedDatabase } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/db.ts';

const MIGRATIONS = fileURLToPath(new URL('../../migrations/', import.meta.url));

/** Logos the rules accept and refuse, at their edges. */
const SAMPLES = [
  '/assets/logos/shop.svg', '/assets/favicon.svg', '/assets/a_b-c~d.e/f.png', '/assets/', '/assets//x.svg', '/assets/a/../b.svg', '/assets/..',
  '/assets/a b.svg', '/assets/x.svg?y=1', '/assets/x.svg#f', '/sso/logout', '/dashboard', 'assets/x.svg', '//evil.example/x.png',
  'https://evil.example/x.png', 'javascript:alert(1)', 'data:image/png;base64,iVBORw0KGgo=', 'data:image/svg+xml;base64,PHN2Zz4=',
  'data:image/png;base64,AAA===', 'data:image/png;base64,', 'data:text/html;base64,PHNjcmlwdD4=', 'data:image/png,rawbytes',
  'DATA:image/png;base64,AAAA', `/assets/${'a'.repeat(14992)}`, `/assets/${'a'.repeat(14993)}`, '',
];

describe('the database\'s rule for client logos', () => {
  let t: Awaited<ReturnType<typeof createMigratedDatabase>>;
  beforeAll(async () => {
    t = await createMigratedDatabase();
  });
  afterAll(() => t.drop());

  it('is the service\'s own (logoUrlProblem), sample by sample', async () => {
    for (const sample of SAMPLES) {
      const r = await t.db.query<{ ok: boolean }>('SELECT client_logo_url_is_valid($1) AS ok', [sample]);
      expect(r.rows[0].ok, JSON.stringify(sample.slice(0, 60))).toBe(logoUrlProblem(sample) === null);
    }
  });

  it('refuses a logo the service would refuse, whoever writes the row', async () => {
    await t.db.query(`INSERT INTO clients (client_id, client_name, secret_hash, callback_url, logo_url)
      VALUES ('logo-ok', 'Logo', $1, 'https://shop.example/cb', '/assets/logos/shop.svg')`, [hashClientSecret('a-secret-for-logo-rules')]);
    await expect(t.db.query("UPDATE clients SET logo_url = '/sso/logout' WHERE client_id = 'logo-ok'")).rejects.toThrow(/clients_logo_url_valid/);
    await expect(t.db.query("UPDATE clients SET logo_url = 'https://evil.example/x.png' WHERE client_id = 'logo-ok'")).rejects.toThrow(/clients_logo_url_valid/);
    expect((await t.db.query<{ logo_url: string }>("SELECT logo_url FROM clients WHERE client_id = 'logo-ok'")).rows[0].logo_url).toBe('/assets/logos/shop.svg');
  });
});

describe('migration 0016_client_logo_rules', () => {
  it('removes the logos that break the rules (audited, via: migration) and keeps the others', async () => {
    const t = await createTestDatabase();
    const dir = await mkdtemp(path.join(os.tmpdir(), 'auth-logo-mig-'));
    const NAME = '0016_client_logo_rules.sql';
    try {
      for (const f of (await readdir(MIGRATIONS)).filter((f) => f.endsWith('.sql') && f < NAME)) await copyFile(path.join(MIGRATIONS, f), path.join(dir, f));
      await migrate(t.db, dir);
      await t.db.query(`INSERT INTO clients (client_id, client_name, secret_hash, callback_url, logo_url) VALUES
        ('bad-logo', 'Bad', $1, 'https://bad.example/cb', '/sso/logout'), ('good-logo', 'Good', $1, 'https://good.example/cb', '/assets/logos/good.svg')`,
      [hashClientSecret('a-secret-for-logo-rules')]);
      await copyFile(path.join(MIGRATIONS, NAME), path.join(dir, NAME));
      expect(await migrate(t.db, dir)).toStrictEqual([NAME]);
      const rows = await t.db.query('SELECT client_id, logo_url FROM clients ORDER BY client_id');
      expect(rows.rows).toStrictEqual([{ client_id: 'bad-logo', logo_url: null }, { client_id: 'good-logo', logo_url: '/assets/logos/good.svg' }]);
      const audit = await t.db.query<{ client_id: string; details: unknown }>("SELECT client_id, details FROM audit_log WHERE action = 'client.update'");
      expect(audit.rows.map((r) => [r.client_id, typeof r.details === 'string' ? JSON.parse(r.details) : r.details])).toStrictEqual([
        ['bad-logo', { via: 'migration', reason: 'logo_url_refused', changed: { logo_url: 'removed' } }],
      ]);
    } finally {
      await t.drop();
    }
  });
});
