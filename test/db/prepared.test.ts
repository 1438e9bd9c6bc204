import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findClients } from '../../src/clients/queries.ts';
import type { Db } from '../../src/db/db.ts';
import { openPostgres } from '../../src/db/postgres.ts';
import { createMigratedDatabase } from '../helpers/app.ts';
import { insertUserAndClient } from '../helpers/factories.ts';
import { onPostgres } from '../helpers/db.ts';

describe.skipIf(!onPostgres && 'needs PostgreSQL')('prepared statements (PostgreSQL)', () => {
  let t: Awaited<ReturnType<typeof createMigratedDatabase>>;
  let one: Db; // one connection, so the session that prepared is the one asked
  beforeAll(async () => {
    t = await createMigratedDatabase();
    one = openPostgres(t.url!, { max: 1 });
    await insertUserAndClient(t.db, 'prep');
  });
  afterAll(async () => {
    await one?.close();
    await t?.drop();
  });

  const prepared = async () =>
    (await one.query<{ statement: string }>('SELECT statement FROM pg_prepared_statements')).rows.map((r) => r.statement);

  it('prepares a hot statement once per connection and reuses it', async () => {
    expect(await prepared(), 'nothing prepared on a new connection').toStrictEqual([]);
    for (let i = 0; i < 3; i++) expect((await findClients(one, ['prep', 'nobody']))[0].client_id).toBe('prep');
    const statements = await prepared();
    expect(statements.filter((s) => s.includes('FROM clients WHERE client_id = ANY')).length, 'one prepared statement for three calls').toBe(1);
    await one.query('SELECT $1::int AS n', [1]);
    expect((await prepared()).length, 'a statement not marked is not kept').toBe(statements.length);
  });

  it('keeps working when a migration adds a column while it is prepared', async () => {
    await findClients(one, ['prep']);
    await t.db.query('ALTER TABLE clients ADD COLUMN added_later text');
    const [client] = await findClients(one, ['prep']);
    expect(client.client_id).toBe('prep');
    expect('added_later' in client, 'explicit columns: the new one is not read').toBe(false);
  });
});
