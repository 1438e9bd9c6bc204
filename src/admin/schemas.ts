import { z } from 'zod';
import type { AuditFilter } from '../audit/filter.ts';
import { isPlainAddress } from '../clients/allowlist.ts';
import { MAX_GRACE_SECONDS } from '../clients/fields.ts';
import { normalizeIp } from '../http/client-ip.ts';
import { MAX_LOGO_URL_LENGTH } from '../validation/logo-url.ts';
import { normalizeUsername } from '../validation/username.ts';

// NUL characters and lone surrogates are refused for every request by http/text-guard.ts.
const str = (max: number) => z.string().max(max);

const name = str(200).trim().min(1, 'must not be empty');
const url = str(2048).trim().min(1);
const ipList = z.array(str(100)).max(200);
const logoUrl = str(MAX_LOGO_URL_LENGTH).trim();

/** POST /api/admin/clients */
/**
 * Who may use a client (docs/access.md): users in one of `allow_groups` or with one of
 * `allow_roles`; both empty (the default): every active user. `listed: false` hides it from the
 * dashboard's launcher. Each list given replaces that list.
 */
const accessFields = {
  allow_groups: z.array(str(64)).max(50).optional().describe('Group names; each must exist (400 naming one that does not)'),
  allow_roles: z.array(str(32)).max(50).optional().describe('Roles (users.role)'),
  listed: z.boolean().optional(),
};

/** PUT/DELETE /api/admin/groups/:name/members/:id, POST /api/admin/groups */
export const createGroupSchema = z.object({ name: str(64).min(1) }).strict();

export const createClientSchema = z.object({
  client_name: name,
  callback_url: url,
  allowed_ips: ipList.optional(),
  client_id: z.string().regex(/^[a-z0-9][a-z0-9_-]{2,63}$/, 'lower-case letters, digits, _ and -, 3-64 characters').optional(),
  /** Confirms an allow-everything range such as 0.0.0.0/0. */
  allow_everything: z.boolean().optional(),
  /** Shown on its sign-in page: a path under /assets or a data:image/...;base64, URL. */
  logo_url: logoUrl.optional(),
  /** Where the dashboard's one-click sign-in sends the browser (OpenID Connect initiate_login_uri). */
  initiate_login_uri: url.optional(),
  /** OpenID Connect (docs/openid-connect.md): redirect URIs besides callback_url. */
  redirect_uris: z.array(url).max(20).optional(),
  post_logout_redirect_uris: z.array(url).max(20).optional(),
  backchannel_logout_uri: url.nullable().optional(),
  /** A public client (no secret, PKCE required, no allow list). */
  public: z.boolean().optional(),
  ...accessFields,
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
  /** null (or "") removes it: the dashboard's one-click sign-in goes straight to the callback. */
  initiate_login_uri: str(2048).trim().nullable().optional(),
  /** OpenID Connect (docs/openid-connect.md): redirect URIs besides callback_url. */
  redirect_uris: z.array(url).max(20).optional(),
  post_logout_redirect_uris: z.array(url).max(20).optional(),
  backchannel_logout_uri: url.nullable().optional(),
  ...accessFields,
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

const ISO_TIME = /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(Z|[+-]\d{2}:\d{2})?)?$/;

/**
 * An ISO 8601 date (`2026-01-31`) or date-time (`2026-01-31T12:00`, seconds and fraction
 * optional, then `Z`, a `±hh:mm` offset or nothing) of a real calendar day; null for anything
 * else. Without a zone (as <input type=datetime-local> sends it) it is UTC, as the panel shows
 * times. Not Date.parse: that also reads `11/26/2026` or `Nov 26 2026` (in the server's time
 * zone) and rolls `2020-02-30` over to 1 March. Nor zod's z.iso.datetime: it refuses an offset
 * after minutes without seconds (`2026-01-31T12:00+02:00`), which this filter has accepted.
 */
function parseTime(v: string): Date | null {
  const m = ISO_TIME.exec(v);
  if (!m) return null;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map((part) => Number(part ?? 0));
  const [fraction = '', zone = 'Z'] = m.slice(7);
  if (hour > 23 || minute > 59 || second > 59) return null;
  let offset = 0;
  if (zone !== 'Z') {
    const [zoneHours, zoneMinutes] = [Number(zone.slice(1, 3)), Number(zone.slice(4, 6))];
    if (zoneHours > 23 || zoneMinutes > 59) return null;
    offset = (zone.startsWith('-') ? -1 : 1) * (zoneHours * 60 + zoneMinutes);
  }
  // setUTCFullYear, not Date.UTC, which reads the years 0-99 as 1900-1999
  const t = new Date(0);
  t.setUTCFullYear(year, month - 1, day);
  if (t.getUTCFullYear() !== year || t.getUTCMonth() !== month - 1 || t.getUTCDate() !== day) return null;
  t.setUTCHours(hour, minute - offset, second, Number(fraction.padEnd(3, '0').slice(0, 3)));
  return t;
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
  if (t === null) {
    ctx.addIssue({ code: 'custom', message: 'must be an ISO 8601 date (2026-01-31) or date-time (2026-01-31T12:00, Z or ±hh:mm optional) of a real calendar day' });
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
const TIME_FILTER = 'An ISO 8601 date (`2026-01-31`) or date-time (`2026-01-31T12:00`, seconds and a fraction optional, then `Z`, `±hh:mm` or nothing for UTC) of a real calendar day, in the years 1970 to 9999 (UTC); anything else is 400 `validation_error`.';

export const auditQuery = z.object({
  user: str(200).trim().optional().describe('A username (normalized as logins are); digits match that username or the user with that id.'),
  client_id: str(200).trim().optional(),
  action: str(100).trim().optional(),
  outcome: z.enum(['success', 'failure', '']).optional(),
  ip: ipFilter.optional(),
  from: z.union([timestamp, z.literal('')]).optional().describe(`${TIME_FILTER} Entries at or after it.`),
  to: z.union([timestamp, z.literal('')]).optional().describe(`${TIME_FILTER} Entries before it (exclusive); a bare date includes that day.`),
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
  // both were checked by auditQuery (timestamp)
  if (q.from) f.from = parseTime(q.from)!;
  if (q.to) {
    const to = parseTime(q.to)!;
    const end = /^\d{4}-\d{2}-\d{2}$/.test(q.to) ? new Date(to.getTime() + 86_400_000) : to;
    // the end of 9999-12-31 is past every time the database can be handed: no upper bound then
    if (end.getUTCFullYear() <= TIME_FILTER_YEARS.max) f.to = end;
  }
  return f;
}
