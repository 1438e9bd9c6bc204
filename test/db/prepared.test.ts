import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { findClients } from '../../src/clients/queries.ts';
import type { Db } from '../../src/db/db.ts';
import { openPostgres } from '../../src/db/postgres.ts';
import { createMigratedDatabase } from '../helpers/app.ts';
import { insertUserAndClient } from '../helpers/factories.ts';
import { onPostgres } from '../helpers/db.ts';

describe('prepared statements (PostgreSQL)', { skip: !onPostgres && 'needs PostgreSQL' }, () => {
  let t: Awaited<ReturnType<typeof createMigratedDatabase>>;
  let one: Db; // one connection, so the session that prepared is the one asked
  before(async () => {
    t = await createMigratedDatabase();
    one = openPostgres(t.url!, { max: 1 });
    await insertUserAndClient(t.db, 'prep');
  });
  after(async () => {
    await one?.close();
    await t?.drop();
  });

  const prepared = async () =>
    (await one.query<{ statement: string }>('SELECT statement FROM pg_prepared_statements')).rows.map((r) => r.statement);

  it('prepares a hot statement once per connection and reuses it', async () => {
    assert.deepEqual(await prepared(), [], 'nothing prepared on a new connection');
    for (let i = 0; i < 3; i++) assert.equal((await findClients(one, ['prep', 'nobody']))[0].client_id, 'prep');
    const statements = await prepared();
    assert.equal(statements.filter((s) => s.includes('FROM clients WHERE client_id = ANY')).length, 1, 'one prepared statement for three calls');
    await one.query('SELECT $1::int AS n', [1]);
    assert.equal((await prepared()).length, statements.length, 'a statement not marked is not kept');
  });

  it('keeps working when a migration adds a column while it is prepared', async () => {
    await findClients(one, ['prep']);
    await t.db.query('ALTER TABLE clients ADD COLUMN added_later text');
    const [client] = await findClients(one, ['prep']);
    assert.equal(client.client_id, 'prep');
    assert.equal('added_later' in client, false, 'explicit columns: the new one is not read');
  });
});
