import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBatchLoader } from '../../src/db/batch.ts';
import { writeTogether } from '../../src/db/statement.ts';
import { issuedTokenRows, type IssuedTokenRow } from '../../src/sso/queries.ts';
import { createMigratedDatabase } from '../helpers/app.ts';
import { insertUserAndClient } from '../helpers/factories.ts';

describe('batched statements', () => {
  let t: Awaited<ReturnType<typeof createMigratedDatabase>>;
  let userId: number;
  beforeAll(async () => {
    t = await createMigratedDatabase();
    ({ userId } = await insertUserAndClient(t.db, 'batch'));
  });
  afterAll(() => t.drop());

  it('hands the requests of one event-loop turn to one call, in order, and nothing is cached', async () => {
    const calls: string[][] = [];
    const loader = createBatchLoader<string, string>(async (keys) => {
      calls.push([...keys]);
      return keys.map((k) => k.toUpperCase());
    });
    expect(await Promise.all(['a', 'b', 'a'].map((k) => loader.load(k)))).toStrictEqual(['A', 'B', 'A']);
    expect(calls).toStrictEqual([['a', 'b', 'a']]);
    // Requests that arrive in separate I/O callbacks of one loop turn still share a call.
    const spread = await Promise.all(['c', 'd'].map((k) => new Promise<string>((resolve) => setImmediate(() => resolve(loader.load(k))))));
    expect(spread).toStrictEqual(['C', 'D']);
    expect(calls.at(-1)).toStrictEqual(['c', 'd']);
    await loader.load('a');
    expect(calls.at(-1), 'a key asked again goes to the database again').toStrictEqual(['a']);
  });

  it('with waitMs, requests that arrive within that time share one call', async () => {
    const calls: number[][] = [];
    const loader = createBatchLoader<number, number>(async (keys) => {
      calls.push([...keys]);
      return keys.map((k) => k * 2);
    }, { waitMs: 40 });
    const spread = [1, 2, 3].map((k, i) => new Promise<number>((resolve) => setTimeout(() => resolve(loader.load(k)), i * 5)));
    expect(await Promise.all(spread)).toStrictEqual([2, 4, 6]);
    expect(calls, 'three requests 5 ms apart, one call').toStrictEqual([[1, 2, 3]]);
  });

  /** A run whose statements stay out until the test lets each go: the keys of every call, in order. */
  function heldStatements() {
    const calls: Array<{ keys: string[]; finish(fail?: boolean): void }> = [];
    const run = (keys: readonly string[]) => new Promise<string[]>((resolve, reject) => {
      calls.push({ keys: [...keys], finish: (fail) => (fail ? reject(new Error('connection lost')) : resolve(keys.map((k) => k.toUpperCase()))) });
    });
    return { calls, run };
  }
  const turns = (n: number) => new Promise<void>((resolve) => {
    const step = (left: number) => (left === 0 ? resolve() : setImmediate(() => step(left - 1)));
    step(n);
  });

  it('sends one statement at a time: what arrives while it is out goes in the next, when it returns', async () => {
    const { calls, run } = heldStatements();
    const loader = createBatchLoader(run, { stallMs: 10_000 });
    const first = loader.load('a');
    await turns(3);
    expect(calls.map((c) => c.keys)).toStrictEqual([['a']]);
    // three more requests, each in a turn of its own, while the first statement is out
    const later: Array<Promise<string>> = [];
    for (const k of ['b', 'c', 'd']) {
      later.push(loader.load(k));
      await turns(2);
    }
    expect(calls.length, 'no second statement while the first is out').toBe(1);
    calls[0].finish();
    expect(await first).toBe('A');
    await turns(3);
    expect(calls.map((c) => c.keys), 'the three waited together, one statement').toStrictEqual([['a'], ['b', 'c', 'd']]);
    calls[1].finish();
    expect(await Promise.all(later)).toStrictEqual(['B', 'C', 'D']);
  });

  it('with waitMs, a batch that waited for the statement out goes when it returns, without waiting again', async () => {
    const { calls, run } = heldStatements();
    const loader = createBatchLoader(run, { waitMs: 200, stallMs: 10_000 });
    const first = loader.load('a');
    while (calls.length < 1) await new Promise((r) => setTimeout(r, 5));
    const second = loader.load('b');
    await new Promise((r) => setTimeout(r, 300)); // its wait is over; the first statement is still out
    expect(calls.length).toBe(1);
    const returned = performance.now();
    calls[0].finish();
    await first;
    while (calls.length < 2 && performance.now() - returned < 5_000) await turns(1);
    expect(performance.now() - returned, 'at once, not another 200 ms later').toBeLessThan(100);
    calls[1].finish();
    expect(await second).toBe('B');
  });

  it('a statement that failed lets the next go', async () => {
    const { calls, run } = heldStatements();
    const loader = createBatchLoader(run, { stallMs: 10_000 });
    const first = loader.load('a');
    await turns(2);
    const second = loader.load('b');
    await turns(2);
    calls[0].finish(true);
    await expect(first).rejects.toThrow('connection lost');
    await turns(3);
    expect(calls.map((c) => c.keys)).toStrictEqual([['a'], ['b']]);
    calls[1].finish();
    expect(await second).toBe('B');
  });

  it('a statement out longer than stallMs no longer holds the next back', async () => {
    const { calls, run } = heldStatements();
    const loader = createBatchLoader(run, { stallMs: 50 });
    const stuck = loader.load('a');
    await turns(2);
    const started = performance.now();
    const next = loader.load('b');
    while (calls.length < 2 && performance.now() - started < 5_000) await new Promise((r) => setTimeout(r, 5));
    const waited = performance.now() - started;
    expect(calls.map((c) => c.keys), 'the second went while the first was still out').toStrictEqual([['a'], ['b']]);
    expect(waited, 'after the stall time, not at once').toBeGreaterThanOrEqual(45);
    calls[1].finish();
    expect(await next).toBe('B');
    // the first returning later lets nothing go twice
    calls[0].finish();
    expect(await stuck).toBe('A');
    await turns(3);
    expect(calls.length).toBe(2);
  });

  it('a batch the database refused holds its place until each of its requests has been tried alone', async () => {
    const calls: string[][] = [];
    const held: Array<() => void> = [];
    const loader = createBatchLoader<string, string>(async (keys) => {
      calls.push([...keys]);
      // the database refuses the statement (a division by zero: no outage), then each request waits to be let go
      if (keys.length > 1) throw Object.assign(new Error('division by zero'), { code: '22012' });
      await new Promise<void>((resolve) => held.push(resolve));
      return keys.map((k) => k.toUpperCase());
    }, { stallMs: 10_000 });
    const first = Promise.all([loader.load('a'), loader.load('b')]);
    while (held.length < 2) await turns(1);
    const next = loader.load('x');
    await turns(5);
    expect(calls, 'nothing else goes while the refused batch is retried').toStrictEqual([['a', 'b'], ['a'], ['b']]);
    for (const go of held.splice(0)) go();
    expect(await first).toStrictEqual(['A', 'B']);
    while (held.length < 1) await turns(1);
    held[0]();
    expect(await next).toBe('X');
    expect(calls.at(-1)).toStrictEqual(['x']);
  });

  it('when the database refuses a batch, only the request whose row it refuses fails', async () => {
    const token = (user: number): IssuedTokenRow => ({
      jti: randomUUID(), userId: user, clientId: 'batch', username: 'batch', ipAddress: '127.0.0.1',
      issuedAt: new Date(), expiresAt: new Date(Date.now() + 60_000),
    });
    let statements = 0;
    const recorder = createBatchLoader<IssuedTokenRow, true>(async (rows) => {
      statements++;
      await writeTogether(t.db, [issuedTokenRows(rows)]);
      return rows.map(() => true as const);
    });
    const good = [token(userId), token(userId), token(userId)];
    const taken = token(userId);
    await writeTogether(t.db, [issuedTokenRows([taken])]);
    const again = { ...token(userId), jti: taken.jti }; // a jti already stored: a unique violation
    const outcomes = await Promise.allSettled([good[0], again, good[1], good[2]].map((row) => recorder.load(row)));
    expect(outcomes.map((o) => o.status)).toStrictEqual(['fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
    expect(String((outcomes[1] as PromiseRejectedResult).reason?.message)).toMatch(/duplicate key/);
    expect(statements, 'the batch of four, then each request alone').toBe(5);
    const stored = await t.db.query<{ jti: string }>('SELECT jti FROM sso_tokens WHERE jti = ANY ($1::uuid[])', [good.map((r) => r.jti)]);
    expect(stored.rows.map((r) => r.jti).sort(), 'the good rows stored once each, the refused one not at all').toStrictEqual(good.map((r) => r.jti).sort());
  });
});
