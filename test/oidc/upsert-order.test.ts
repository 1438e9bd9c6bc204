import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Queryable } from '../../src/db/db.ts';
import { upsertArtefacts } from '../../src/oidc/queries.ts';
import { createMigratedDatabase } from '../helpers/app.ts';

/**
 * A batch of artefact writes is one INSERT ... ON CONFLICT DO UPDATE, which locks its rows in the
 * order it is given them: two instances whose batches share keys in opposite orders would each
 * hold one row the other waits for (a deadlock, one request failing). The rows go in key order.
 */
describe('OpenID Connect artefact writes', () => {
  let t: Awaited<ReturnType<typeof createMigratedDatabase>>;
  beforeAll(async () => {
    t = await createMigratedDatabase();
  });
  afterAll(async () => {
    await t?.drop();
  });

  it('are sent in key order, whatever order the batch holds them in, and a key twice is written once with its last write', async () => {
    const sent: unknown[][] = [];
    const recording: Queryable = {
      query: (async (sql: string, params?: unknown[], ...rest: unknown[]) => {
        sent.push(params ?? []);
        return (t.db.query as (...a: unknown[]) => unknown)(sql, params, ...rest);
      }) as Queryable['query'],
    } as Queryable;
    const write = (model: string, id: string, n: number) => ({ model, id, payload: { n, grantId: 'g1' }, expiresIn: 600 });
    await upsertArtefacts(recording, [write('Session', 'zz', 1), write('Grant', 'mm', 2), write('AccessToken', 'aa', 3), write('Grant', 'mm', 4)]);

    expect(sent).toHaveLength(1);
    expect(sent[0][0]).toStrictEqual(['AccessToken:aa', 'Grant:mm', 'Session:zz']);
    const rows = await t.db.query<{ pk: string; n: number }>("SELECT pk, (payload->>'n')::int AS n FROM oidc_artefacts ORDER BY pk");
    expect(rows.rows).toStrictEqual([{ pk: 'AccessToken:aa', n: 3 }, { pk: 'Grant:mm', n: 4 }, { pk: 'Session:zz', n: 1 }]);
  });
});
