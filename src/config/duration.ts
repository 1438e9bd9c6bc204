import { z } from 'zod';

const UNIT_MS = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** Longer than any retention anyone means (100 years), and far inside a safe integer of ms. */
const MAX_MS = 36_500 * UNIT_MS.d;

/**
 * Parses a duration written as a whole number and a unit: `30s`, `15m`, `24h`, `30d`; `0`
 * (or `0s`, `0d`...) is zero, which the keys that take a duration read as "never" (keep
 * forever, do not run). Returns milliseconds, or null for anything else (`10`, `1.5h`,
 * `2w`, `-1d`, ''), so a typo fails the start instead of meaning something unexpected.
 */
export function parseDuration(text: string): number | null {
  const m = /^(\d{1,9})([smhd])?$/.exec(text.trim());
  if (!m) return null;
  const n = Number(m[1]);
  if (n === 0) return 0;
  if (!m[2]) return null; // a bare number has no unit to go by
  const ms = n * UNIT_MS[m[2] as keyof typeof UNIT_MS];
  return ms <= MAX_MS ? ms : null;
}

/**
 * A configuration key holding a duration (see parseDuration), defaulting to `fallback`;
 * the parsed value is in milliseconds. `minMs` refuses a non-zero value shorter than that,
 * `maxMs` one longer (a timer's interval: Node fires a longer one after 1 ms).
 */
export function durationKey(fallback: string, options: { minMs?: number; maxMs?: number } = {}) {
  const minMs = options.minMs ?? 0;
  const maxMs = options.maxMs ?? MAX_MS;
  return z
    .string()
    .optional()
    .transform((v, ctx) => {
      const text = v === undefined || v.trim() === '' ? fallback : v;
      const ms = parseDuration(text);
      if (ms === null) {
        ctx.addIssue({ code: 'custom', message: `"${text}" is not a duration: write e.g. 30s, 15m, 24h or 30d (0: never)` });
        return z.NEVER;
      }
      if (ms !== 0 && ms < minMs) {
        ctx.addIssue({ code: 'custom', message: `"${text}" is shorter than ${minMs / 1000}s` });
        return z.NEVER;
      }
      if (ms > maxMs) {
        ctx.addIssue({ code: 'custom', message: `"${text}" is longer than ${maxMs / 1000}s` });
        return z.NEVER;
      }
      return ms;
    });
}
