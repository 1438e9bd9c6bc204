import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { csvCell } from '../../src/audit/export.ts';
import { startTestApp, type TestApp, unique } from '../helpers/app.ts';
import { type SignedIn, signedIn } from './support.ts';

/** A tiny RFC 4180 parser: enough to read the export back. */
/** CSV as a spreadsheet reads it: `sep` is the list separator of its locale (`,` or `;`), double quotes honoured. */
function parseCsv(text: string, sep = ','): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let cell = '';
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') { cell += '"'; i++; } else if (c === '"') quoted = false; else cell += c;
    } else if (c === '"') quoted = true;
    else if (c === sep) { row.push(cell); cell = ''; } else if (c === '\r' && text[i + 1] === '\n') { row.push(cell); rows.push(row); row = []; cell = ''; i++; } else cell += c;
  }
  return rows;
}

describe('admin API: the audit log', () => {
  let app: TestApp;
  let admin: SignedIn;
  let member: SignedIn;
  beforeAll(async () => {
    app = await startTestApp();
    admin = await signedIn(app, 'admin');
    member = await signedIn(app, 'user');
  });
  afterAll(() => app?.close());

  async function seed(action: string, rows: Array<{ outcome?: string; username?: string; user_id?: number; client_id?: string; ip?: string; at?: string; user_agent?: string }>) {
    for (const r of rows) {
      await app.db.query(
        `INSERT INTO audit_log (action, outcome, user_id, username, client_id, ip_address, user_agent, at, details)
         VALUES ($1, $2, $3, $4, $5, $6, $7, COALESCE($8::timestamptz, now()), '{"k":"v"}')`,
        [action, r.outcome ?? 'success', r.user_id ?? null, r.username ?? null, r.client_id ?? null, r.ip ?? null, r.user_agent ?? null, r.at ?? null],
      );
    }
  }

  it('filters by user, client, action, outcome, IP and time range', async () => {
    const action = unique('test.filter.');
    await seed(action, [
      { username: 'alice', client_id: 'crm', ip: '10.0.0.1', at: '2026-01-01T10:00:00Z' },
      { username: 'alice', client_id: 'wiki', ip: '10.0.0.2', outcome: 'failure', at: '2026-01-02T10:00:00Z' },
      { username: 'bob', user_id: 4242, client_id: 'crm', ip: '10.0.0.1', at: '2026-01-03T10:00:00Z' },
    ]);
    const get = async (query: string) => {
      const res = await app.http.get(`/api/admin/audit?action=${action}&${query}`, admin.as);
      expect(res.status, query).toBe(200);
      return res.body.entries.map((e: { username: string; client_id: string }) => `${e.username}@${e.client_id}`);
    };
    expect(await get(''), 'newest first').toStrictEqual(['bob@crm', 'alice@wiki', 'alice@crm']);
    expect(await get('user=ALICE'), 'usernames normalized as logins are').toStrictEqual(['alice@wiki', 'alice@crm']);
    expect(await get('user=4242'), 'a number is a user id').toStrictEqual(['bob@crm']);
    expect(await get('client_id=crm')).toStrictEqual(['bob@crm', 'alice@crm']);
    expect(await get('outcome=failure')).toStrictEqual(['alice@wiki']);
    expect(await get('ip=10.0.0.1')).toStrictEqual(['bob@crm', 'alice@crm']);
    expect(await get('ip=%3A%3Affff%3A10.0.0.1'), 'an IPv4-mapped address is its IPv4 address').toStrictEqual(['bob@crm', 'alice@crm']);
    expect(await get('ip=&user=&client_id=&outcome=&from=&to=&cursor='), 'empty fields, as a form sends them, mean any').toStrictEqual(['bob@crm', 'alice@wiki', 'alice@crm']);
    expect(await get('from=2026-01-02T00:00:00Z')).toStrictEqual(['bob@crm', 'alice@wiki']);
    expect(await get('to=2026-01-02'), 'a bare date as to includes that day').toStrictEqual(['alice@wiki', 'alice@crm']);
    expect(await get('from=2026-01-02T00:00&to=2026-01-02T23:00')).toStrictEqual(['alice@wiki']);
    const entry = (await app.http.get(`/api/admin/audit?action=${action}&limit=1`, admin.as)).body.entries[0];
    expect(Object.keys(entry).sort()).toStrictEqual(['action', 'at', 'client_id', 'details', 'id', 'ip_address', 'outcome', 'user_agent', 'user_id', 'username']);
    expect(entry.details).toStrictEqual({ k: 'v' });
    expect(entry.at).toBe('2026-01-03T10:00:00.000Z');
  });

  it('finds a user named with digits by name as well as the user with that id, on pages and exports', async () => {
    const action = unique('test.digits.');
    await seed(action, [
      { username: '4242', user_id: 17, at: '2026-01-01T10:00:00Z' },
      { username: 'bob', user_id: 4242, at: '2026-01-02T10:00:00Z' },
      { username: 'carol', user_id: 18, at: '2026-01-03T10:00:00Z' },
    ]);
    const res = await app.http.get(`/api/admin/audit?action=${action}&user=4242`, admin.as);
    expect(res.status).toBe(200);
    expect(res.body.entries.map((e: { username: string }) => e.username)).toStrictEqual(['bob', '4242']);
    const nd = await app.http.get(`/api/admin/audit?action=${action}&user=4242&format=ndjson`, admin.as);
    expect(nd.text.trimEnd().split('\n').map((l) => JSON.parse(l).username)).toStrictEqual(['4242', 'bob']);
    const page = await app.http.get(`/admin/audit?action=${action}&user=4242`, { headers: { cookie: admin.cookie, accept: 'text/html' } });
    expect(page.status).toBe(200);
    expect(page.text.match(/data-audit-id=/g)).toHaveLength(2);
  });

  it('pages by keyset cursor without repeating or skipping entries', async () => {
    const action = unique('test.page.');
    await seed(action, Array.from({ length: 7 }, (_, i) => ({ username: `u${i}` })));
    const seen: string[] = [];
    let cursor = '';
    let pages = 0;
    do {
      const res = await app.http.get(`/api/admin/audit?action=${action}&limit=3${cursor ? `&cursor=${cursor}` : ''}`, admin.as);
      expect(res.status).toBe(200);
      seen.push(...res.body.entries.map((e: { username: string }) => e.username));
      cursor = res.body.next_cursor ?? '';
      pages++;
    } while (cursor);
    expect(pages).toBe(3);
    expect(seen).toStrictEqual(['u6', 'u5', 'u4', 'u3', 'u2', 'u1', 'u0']);
  });

  it('exports CSV with formula cells defused and NDJSON, filtered, as attachments', async () => {
    const action = unique('test.export.');
    await seed(action, [
      { username: '=HYPERLINK("http://evil.example","x")', user_agent: 'Mozilla, "quoted"\nnext line' },
      { username: '+cmd', user_agent: '@SUM(A1)' },
      { username: '-2+3', user_agent: 'plain' },
    ]);
    const csv = await app.http.get(`/api/admin/audit?action=${action}&format=csv`, admin.as);
    expect(csv.status).toBe(200);
    expect(String(csv.headers['content-type'])).toMatch(/^text\/csv/);
    expect(String(csv.headers['content-disposition'])).toMatch(/^attachment; filename="audit-\d{8}-\d{6}\.csv"$/);
    expect(csv.headers['cache-control']).toBe('no-store');
    const rows = parseCsv(csv.text);
    expect(rows[0]).toStrictEqual(['id', 'at', 'action', 'outcome', 'user_id', 'username', 'client_id', 'ip_address', 'user_agent', 'details']);
    expect(rows.length, 'header and three rows, oldest first').toBe(4);
    expect(rows[1][5]).toBe(`'=HYPERLINK("http://evil.example","x")`);
    expect(rows[1][8]).toBe('Mozilla, "quoted"\nnext line');
    expect(rows[2][5]).toBe("'+cmd");
    expect(rows[2][8]).toBe("'@SUM(A1)");
    expect(rows[3][5]).toBe("'-2+3");
    expect(rows[1][9]).toBe('{"k":"v"}');
    for (const row of rows.slice(1)) for (const cell of row) expect(cell).not.toMatch(/^[=+\-@]/);
    expect(csvCell('\tx')).toBe(`"'\tx"`);
    expect(csvCell(null)).toBe('');

    // a spreadsheet whose list separator is ";" (many locales) splits unquoted cells there
    const attack = await app.http.post('/api/auth/login', { login: 'nobody;=1+1', password: 'wrong password' }, { headers: { 'user-agent': "Mozilla/5.0;=cmd|' /C calc'!A0" } });
    expect(attack.status).toBe(401);
    const failures = await app.http.get('/api/admin/audit?action=user.login&outcome=failure&format=csv', admin.as);
    const line = failures.text.split('\r\n').find((l) => l.includes('calc'));
    expect(line, 'the failed sign-in is exported').toBeTruthy();
    expect(parseCsv(`${line}\r\n`, ';')[0].filter((cell) => /^[=+\-@]/.test(cell)), line).toStrictEqual([]);

    const exports = async () => (await app.db.query("SELECT 1 FROM audit_log WHERE action = 'audit.export'")).rowCount;
    const before = await exports();
    const head = await app.http.send(`/api/admin/audit?action=${action}&format=csv`, { ...admin.as, method: 'HEAD' });
    expect([head.status, String(head.headers['content-disposition'])]).toStrictEqual([200, expect.stringMatching(/^attachment; filename="audit-.*\.csv"$/)]);
    expect(await exports(), 'a HEAD exports nothing, so audits nothing').toBe(before);

    const nd = await app.http.get(`/api/admin/audit?action=${action}&format=ndjson`, admin.as);
    expect(nd.status).toBe(200);
    expect(String(nd.headers['content-type'])).toMatch(/^application\/x-ndjson/);
    const lines = nd.text.trimEnd().split('\n').map((l) => JSON.parse(l));
    expect(lines.map((l) => l.username), 'NDJSON keeps values as they are').toStrictEqual(['=HYPERLINK("http://evil.example","x")', '+cmd', '-2+3']);
    const [exported] = (await app.http.get('/api/admin/audit?action=audit.export&limit=1', admin.as)).body.entries;
    expect(exported.details.actor, 'the export itself is audited').toBe(admin.user.username);
  });

  it('refuses an unknown or misspelled filter and a malformed address with 400, on pages and exports alike', async () => {
    await seed(unique('test.strict.'), [{ username: 'carol', ip: '10.0.0.9' }]);
    const refusal = async (q: string) => {
      const res = await app.http.get(`/api/admin/audit?${q}`, admin.as);
      expect(res.status, `${q} -> ${res.status} ${res.text.slice(0, 200)}`).toBe(400);
      expect(res.body.error, q).toBe('validation_error');
      expect(String(res.headers['content-type']), q).toMatch(/^application\/json/);
      return res.body.details as Array<{ path: string; message: string }>;
    };
    for (const [q, key] of [['user[]=carol', 'user[]'], ['usr=carol', 'usr'], ['user=carol&clientid=crm', 'clientid'],
      ['ip_address=10.0.0.9&format=csv', 'ip_address'], ['format=ndjson&page=2', 'page']]) {
      const details = await refusal(q);
      expect(details.map((d) => d.message).join(' '), q).toContain(`"${key}"`);
    }
    for (const q of ['ip=notanip', 'ip=10.0.0.256', 'ip=127.1', 'ip=010.0.0.1', 'ip=10.0.0.9%20x', 'ip=notanip&format=csv', 'ip=1%3A%3A%3A2&format=ndjson']) {
      expect(await refusal(q), q).toStrictEqual([{ path: 'ip', message: 'must be an IPv4 or IPv6 address' }]);
    }
    for (const q of ['ip=10.0.0.0%2F8', 'ip=2001%3Adb8%3A%3A%2F32&format=csv']) {
      expect(await refusal(q), q).toStrictEqual([{ path: 'ip', message: 'must be one IP address: ranges (CIDR) are not supported' }]);
    }
    for (const q of ['ip=10.0.0.9', 'ip=%2010.0.0.9%20', 'ip=2001%3ADB8%3A%3A1', 'ip=', 'ip=10.0.0.9&format=csv', 'ip=10.0.0.9&format=ndjson&limit=5']) {
      const res = await app.http.get(`/api/admin/audit?${q}`, admin.as);
      expect(res.status, `${q} -> ${res.status} ${res.text.slice(0, 200)}`).toBe(200);
    }
  });

  it('takes from and to only as ISO 8601 dates and date-times of real calendar days', async () => {
    const action = unique('test.iso.');
    await seed(action, [{ username: 'early', at: '2020-02-29T10:00:00Z' }, { username: 'late', at: '2020-03-01T10:00:00Z' }]);
    for (const q of ['from=11%2F26%2F2026', 'from=Nov%2026%202026', 'to=26%20November%202026', 'from=2020-02-30', 'to=2021-02-29', 'from=2026-13-01',
      'from=2026-04-31T00:00', 'to=2026-01-01T24:00', 'from=2026-01-01T10:60', 'from=2026-01-01%2010:00', 'from=2026-1-1', 'from=20260101',
      'from=2026-01-01T10:00%2B24:00', 'to=2020-02-30&format=csv']) {
      const res = await app.http.get(`/api/admin/audit?${q}`, admin.as);
      expect(res.status, `${q} -> ${res.status}`).toBe(400);
      expect(res.body.error, q).toBe('validation_error');
      expect(JSON.stringify(res.body.details), q).toMatch(/ISO 8601/);
    }
    expect((await app.http.get('/admin/audit?from=2020-02-30', { headers: { cookie: admin.cookie, accept: 'text/html' } })).status).toBe(400);
    const get = async (query: string) => {
      const res = await app.http.get(`/api/admin/audit?action=${action}&${query}`, admin.as);
      expect(res.status, query).toBe(200);
      return res.body.entries.map((e: { username: string }) => e.username);
    };
    expect(await get('from=2020-02-29&to=2020-02-29'), 'a leap day is a day').toStrictEqual(['early']);
    expect(await get('from=2020-03-01'), '2020-03-01 is 1 March').toStrictEqual(['late']);
    expect(await get('from=2020-03-01T10:30%2B01:00'), 'an offset moves the time to UTC').toStrictEqual(['late']);
    expect(await get('to=2020-02-29T10:00:00.001Z')).toStrictEqual(['early']);
    expect(await get('to=2020-02-29T10:00:00-00:00')).toStrictEqual([]);
  });

  it('documents the order of pages (newest first) and exports (oldest first) as they are', async () => {
    const action = unique('test.order.');
    await seed(action, [{ username: 'first', at: '2026-01-01T10:00:00Z' }, { username: 'second', at: '2026-01-02T10:00:00Z' }]);
    const page = await app.http.get(`/api/admin/audit?action=${action}`, admin.as);
    expect(page.body.entries.map((e: { username: string }) => e.username)).toStrictEqual(['second', 'first']);
    const nd = await app.http.get(`/api/admin/audit?action=${action}&format=ndjson`, admin.as);
    expect(nd.text.trimEnd().split('\n').map((l) => JSON.parse(l).username)).toStrictEqual(['first', 'second']);
    const doc = (await app.http.get('/api/openapi.json')).body;
    const described = doc.paths['/api/admin/audit'].get.responses['200'].description as string;
    expect(described).toMatch(/JSON, newest first/);
    expect(described).toMatch(/`format=csv` or `format=ndjson` every matching entry, oldest first/);
  });

  it('answers 400 for bad filters, 401 without a session and 403 for a non-admin', async () => {
    for (const q of ['limit=0', 'limit=501', 'cursor=abc', 'format=xml', 'from=yesterday', 'outcome=maybe', 'user=%00', 'client_id=a%00b&format=csv', 'action=%00', 'ip=%00']) {
      const res = await app.http.get(`/api/admin/audit?${q}`, admin.as);
      expect(res.status, q).toBe(400);
      expect(res.body.error).toBe('validation_error');
    }
    // valid JavaScript dates that PostgreSQL's timestamptz cannot hold (or nobody means): 400, never a 500
    for (const q of ['from=-004800-01-01', 'to=-004800-01-01', 'from=%2B275760-09-13T00:00:00Z', 'to=%2B010000-01-01', 'from=1969-12-31',
      'to=0001-01-01T00:00', 'to=9999-12-31T23:00:00-05:00', 'from=-271821-04-20T00:00:00Z&format=csv', 'to=%2B200000-01-01&format=ndjson']) {
      const res = await app.http.get(`/api/admin/audit?${q}`, admin.as);
      expect(res.status, `${q} -> ${res.status} ${res.text.slice(0, 200)}`).toBe(400);
      expect(res.body.error, q).toBe('validation_error');
    }
    for (const q of ['from=1970-01-01', 'to=9999-12-31', 'from=1970-01-01T00:00:00-01:00', 'to=9999-12-31T23:59:59.999Z', 'to=9999-12-31&format=csv']) {
      const res = await app.http.get(`/api/admin/audit?${q}`, admin.as);
      expect(res.status, `${q} -> ${res.status} ${res.text.slice(0, 200)}`).toBe(200);
    }
    expect((await app.http.get('/api/admin/audit')).status).toBe(401);
    expect((await app.http.get('/api/admin/audit?format=csv')).status).toBe(401);
    const forbidden = await app.http.get('/api/admin/audit?format=csv', member.as);
    expect(forbidden.status).toBe(403);
    expect(forbidden.body.error).toBe('forbidden');
  });

  it('streams an export of 100,000 rows as CSV and NDJSON with every row', async () => {
    const action = unique('bulk.');
    await app.db.query(
      `INSERT INTO audit_log (action, outcome, username, client_id, ip_address, user_agent, details)
       SELECT $1, CASE WHEN g % 10 = 0 THEN 'failure' ELSE 'success' END, 'user' || (g % 500), 'client-' || (g % 7),
              '10.0.' || (g % 250) || '.' || (g % 200), 'bench agent ' || g, jsonb_build_object('n', g)
       FROM generate_series(1, 100000) AS g`,
      [action],
    );
    // What autovacuum does after a bulk load this size. Without statistics the planner
    // takes the (action, id) index and sorts every remaining row for each batch of 1,000,
    // which made this test take seconds of database time; the rows, the batches (100 per
    // export) and every assertion are the same either way.
    await app.db.query('ANALYZE audit_log');
    const count = async (format: string) => {
      // counts lines as they arrive: the test itself never holds the whole export either
      const res = await fetch(`${await app.listen()}/api/admin/audit?action=${action}&format=${format}`, { headers: { cookie: admin.cookie } });
      expect(res.status).toBe(200);
      let lines = 0;
      let last = '';
      const decoder = new TextDecoder();
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        const text = decoder.decode(chunk, { stream: true });
        for (let i = text.indexOf('\n'); i !== -1; i = text.indexOf('\n', i + 1)) lines++;
        last = (last + text).slice(-200);
      }
      return { lines, last };
    };
    const csv = await count('csv');
    expect(csv.lines, 'a header and 100,000 rows').toBe(100_001);
    expect(csv.last).toMatch(/\{""n"":100000\}"\r\n$/);
    const nd = await count('ndjson');
    expect(nd.lines).toBe(100_000);
    expect(nd.last).toMatch(/"details":\{"n":100000\}\}\n$/);
  }, 300_000);
});
