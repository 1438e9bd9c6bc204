/**
 * The stored form of a login name: trimmed, Unicode NFKC, lower-cased. `Alice`, `ALICE `
 * and `alice` are one account and share one lockout counter.
 */
export function normalizeUsername(raw: string): string {
  return raw.normalize('NFKC').trim().toLowerCase();
}
