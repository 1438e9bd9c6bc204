import bcrypt from 'bcrypt';
import { describe, expect, it } from 'vitest';
import { BCRYPT_CONCURRENCY, bcryptInFlight, verifyPassword } from '../../src/auth/passwords.ts';

describe('bcrypt concurrency', () => {
  it('runs as many compares at once as the libuv pool has threads, but one', async () => {
    const pool = Number(process.env.UV_THREADPOOL_SIZE ?? 4);
    expect(BCRYPT_CONCURRENCY).toBe(Math.max(1, pool - 1));
    const hash = await bcrypt.hash('password', 4);
    const compares = Array.from({ length: BCRYPT_CONCURRENCY + 2 }, () => verifyPassword('password', hash, 4));
    expect(bcryptInFlight(), 'all the pool allows are running, the rest wait').toBe(BCRYPT_CONCURRENCY);
    expect(await Promise.all(compares)).toStrictEqual(compares.map(() => true));
    expect(bcryptInFlight()).toBe(0);
  });
});
