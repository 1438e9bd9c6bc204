import { z } from 'zod';
import type { AuditFilter } from '../audit/filter.ts';
import { isPlainAddress } from '../clients/allowlist.ts';
import { MAX_GRACE_SECONDS } from '../clients/service.ts';
import { normalizeIp } from '../http/client-ip.ts';
import { MAX_LOGO_URL_LENGTH } from '../pages/logo-url.ts';
import { normalizeUsername } from '../users/username.ts';

// NUL characters and lone surrogates are refused for every request by http/text-guard.ts.
const str = (max: number) => z.string().max(max);

const name = str(200).trim().min(1, 'must not be empty');
const url = str(2048).trim().min(1);
const ipList = z.array(str(100)).max(200);
const logoUrl = str(MAX_LOGO_URL_LENGTH).trim();

/** POST /api/admin/clients */
export const createClientSchema = z.object({
  client_name: name,
  callback_url: url,
  allowed_ips: ipList.optional(),
  client_id: z.string().regex(/^[a-z0-9][a-z0-9_-]{2,63}$/, 'lower-case letters, digits, _ and -, 3-64 characters').optional(),
  /** Confirms an allow-everything range such as 0.0.0.0/0. */
  allow_everything: z.boolean().optional(),
  /** Shown on its sign-in page: a path under /assets or a data:image/...;base64, URL. */
  logo_url: logoUrl.optional(),
}).strict();

/**
 * POST /api/admin/clients/:client_id/rotate-secret: how long the old secret keeps working
 * (seconds, default 0: it fails at once). The body may be empty.
 */
export const rotateSecretSchema = z.object({
  grace_seconds: z.number().int().min(0).max(MAX_GRACE_SECONDS).optional(),
}).strict();

/** PATCH /api/admin/clients/:client_id */
export const updateClientSchema = z.object({
  client_name: name.optional(),
  callback_url: url.optional(),
  allowed_ips: ipList.optional(),
  active: z.boolean().optional(),
  allow_everything: z.boolean().optional(),
  /** null (or "") removes the logo. */
  logo_url: logoUrl.nullable().optional(),
}).strict().refine((v) => Object.keys(v).some((k) => k !== 'allow_everything'), 'name at least one field to change');

const email = str(254).trim();

/** POST /api/admin/users */
export const createUserSchema = z.object({
  username: str(64).min(1),
  email,
  password: str(200).min(1),
  role: str(32).optional(),
  full_name: str(200).trim().optional(),
  active: z.boolean().optional(),
}).strict();

/** PATCH /api/admin/users/:id */
export const updateUserSchema = z.object({
  email: email.optional(),
  full_name: str(200).trim().optional(),
  role: str(32).optional(),
  active: z.boolean().optional(),
  /** A new password (the one password policy applies); signs the user out everywhere. */
  password: str(1024).min(1).optional(),
  /** true: the next sign-in must choose a new password (and the user is signed out everywhere now). */
  must_change_password: z.boolean().optional(),
}).strict().refine((v) => Object.keys(v).length > 0, 'name at least one field to change');

/** GET /api/admin/users */
export const searchUsersQuery = z.object({
  q: str(200).optional(),
  limit: z.coerce.number().int().min(1).max(500).default(100),
});

/** A date-time without a zone (as <input type=datetime-local> sends it) is UTC, as the panel shows times. */
function parseTime(v: string): Date {
  return new Date(/T\d{2}:\d{2}(:\d{2}(\.\d+)?)?$/.test(v) ? `${v}Z` : v);
}

/**
 * The years (UTC) a time filter may name. JavaScript dates reach ±275760, PostgreSQL's
 * timestamptz 4713 BC to 294276 AD and the embedded database only four-digit years, so a far
 * year such as -004800 would fail in the database (a 500); the audit log holds nothing
 * outside these years anyway.
 */
export const TIME_FILTER_YEARS = { min: 1970, max: 9999 } as const;

const timestamp = str(40).superRefine((v, ctx) => {
  const t = parseTime(v);
  if (Number.isNaN(t.getTime())) {
    ctx.addIssue({ code: 'custom', message: 'must be an ISO date or date-time' });
  } else if (t.getUTCFullYear() < TIME_FILTER_YEARS.min || t.getUTCFullYear() > TIME_FILTER_YEARS.max) {
    ctx.addIssue({ code: 'custom', message: `must be a time in the years ${TIME_FILTER_YEARS.min} to ${TIME_FILTER_YEARS.max} (UTC)` });
  }
});

/**
 * One address, as the allow lists accept one (no "127.1" or octal parts); empty means any. A
 * range is refused with its own message: the filter compares whole addresses.
 */
const ipFilter = str(100).trim().superRefine((v, ctx) => {
  if (v === '') return;
  if (v.includes('/')) ctx.addIssue({ code: 'custom', message: 'must be one IP address: ranges (CIDR) are not supported' });
  else if (!isPlainAddress(v)) ctx.addIssue({ code: 'custom', message: 'must be an IPv4 or IPv6 address' });
});

/**
 * GET /api/admin/audit (and the panel's audit page, whose form, pager and export links send
 * these keys). Strict: a misspelled filter (`usr`, `user[]`) would otherwise be dropped and
 * the whole log answered as if it had matched.
 */
export const auditQuery = z.object({
  user: str(200).trim().optional(),
  client_id: str(200).trim().optional(),
  action: str(100).trim().optional(),
  outcome: z.enum(['success', 'failure', '']).optional(),
  ip: ipFilter.optional(),
  from: z.union([timestamp, z.literal('')]).optional(),
  to: z.union([timestamp, z.literal('')]).optional(),
  limit: z.coerce.number().int().min(1).max(500).default(50),
  cursor: z.union([z.string().regex(/^\d{1,18}$/, 'must be the next_cursor of a previous page'), z.literal('')]).optional(),
  format: z.enum(['json', 'csv', 'ndjson']).default('json'),
}).strict();

export type AuditQuery = z.infer<typeof auditQuery>;

/**
 * The filter of an audit query. Empty fields (as an HTML form sends them) mean "any".
 * `user` is a username (normalized as logins are); digits are also a user id, and an entry of
 * either matches (a user may be named `4242`). `to` is exclusive; a bare date as `to` means the
 * end of that day.
 */
export function auditFilterOf(q: AuditQuery): AuditFilter {
  const f: AuditFilter = {};
  const user = q.user?.trim();
  if (user) {
    f.username = normalizeUsername(user);
    if (/^\d{1,9}$/.test(user)) f.userId = Number(user);
  }
  if (q.client_id) f.clientId = q.client_id;
  if (q.action) f.action = q.action;
  if (q.outcome) f.outcome = q.outcome;
  if (q.ip) f.ip = normalizeIp(q.ip);
  if (q.from) f.from = parseTime(q.from);
  if (q.to) {
    const to = parseTime(q.to);
    const end = /^\d{4}-\d{2}-\d{2}$/.test(q.to) ? new Date(to.getTime() + 86_400_000) : to;
    // the end of 9999-12-31 is past every time the database can be handed: no upper bound then
    if (end.getUTCFullYear() <= TIME_FILTER_YEARS.max) f.to = end;
  }
  return f;
}
