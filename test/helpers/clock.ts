import { vi } from 'vitest';

/**
 * Runs `fn` with this process's clock (Date) `seconds` behind the real one, still ticking:
 * what the in-process service signs and records meanwhile is dated that much earlier, so an
 * SSO token it issues expires `seconds` sooner, as if it had been issued that long ago. The
 * database's clock (now()) is left alone: the token.expired sweep, which compares a token's
 * recorded expiry with now(), sees the token expire for real, without the test waiting out
 * the whole TOKEN_TTL_SECONDS (at least 5).
 */
export async function withClockBehind<T>(seconds: number, fn: () => Promise<T>): Promise<T> {
  const now = Date.now();
  vi.useFakeTimers({ toFake: ['Date'], shouldAdvanceTime: true });
  vi.setSystemTime(now - seconds * 1000);
  try {
    return await fn();
  } finally {
    vi.useRealTimers();
  }
}
