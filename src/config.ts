import { z } from 'zod';
import ipaddr from 'ipaddr.js';
import { durationKey } from './config/duration.ts';
import { logoUrlProblem } from './validation/logo-url.ts';
// the words of validation messages, in force before the configuration is parsed
import './validation/messages.ts';

const bool = z
  .enum(['true', 'false', '1', '0', 'yes', 'no'])
  .transform((v) => v === 'true' || v === '1' || v === 'yes');
const int = (min: number, max = Number.MAX_SAFE_INTEGER) => z.coerce.number().int().min(min).max(max);
/** Empty strings in the environment mean "not set". */
const optionalString = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? undefined : v));

/**
 * TRUST_PROXY: unset/false trusts no proxy (X-Forwarded-For is ignored); a hop count
 * ("1") or a comma-separated list of addresses/CIDRs of the proxies in front of us.
 */
const trustProxy = optionalString.superRefine((v, ctx) => {
  if (v === undefined || v === 'false' || /^\d+$/.test(v) || v === 'loopback') return;
  for (const part of v.split(',').map((s) => s.trim())) {
    const ok = part.includes('/') ? safe(() => ipaddr.parseCIDR(part)) : ipaddr.isValid(part);
    if (!ok) ctx.addIssue({ code: 'custom', message: `"${part}" is not an address, CIDR range or hop count` });
  }
});

/**
 * A comma-separated list of secrets (previous keys kept for verification only): empty or
 * unset is none; each one at least 32 characters, like the key it used to be. JWT_SECRET and
 * SESSION_SECRET are used exactly as given, and a secret mounted from a file often ends in a
 * newline: an entry with space around it is kept as written too, beside its trimmed form, so
 * the key it was as the current secret still verifies once moved here.
 */
const secretList = optionalString
  .transform((v) => (v === undefined ? [] : v.split(',').flatMap((raw) => {
    const trimmed = raw.trim();
    if (trimmed === '') return [];
    return trimmed === raw ? [raw] : [trimmed, raw];
  })))
  .pipe(z.array(z.string().min(32, 'each secret must be at least 32 characters')));
function safe(fn: () => unknown): boolean {
  try {
    fn();
    return true;
  } catch {
    return false;
  }
}

/**
 * Why a secret is too weak for production, or null: fewer than 32 bytes, a single character
 * repeated, a short run repeated ("abcabc…"), or too few different characters to be random.
 */
export function weakSecretReason(secret: string): string | null {
  if (Buffer.byteLength(secret, 'utf8') < 32) return 'must be at least 32 bytes';
  const distinct = new Set(secret).size;
  if (distinct === 1) return 'is one character repeated';
  for (let unit = 2; unit <= 16; unit++) {
    if (secret === secret.slice(0, unit).repeat(Math.ceil(secret.length / unit)).slice(0, secret.length)) return `is a ${unit}-character pattern repeated`;
  }
  if (distinct < 10) return `has only ${distinct} different characters`;
  return null;
}

/** The embedded database's default shared_buffers: PGlite's own (128MB) is resident once filled, and a small service never needs it. */
export const EMBEDDED_SHARED_BUFFERS = '16MB';

/** https, or http on localhost: what browsers call a secure context, where WebAuthn runs. */
function isSecureOrigin(url: string): boolean {
  const { protocol, hostname } = new URL(url);
  return protocol === 'https:' || ['localhost', '127.0.0.1', '[::1]'].includes(hostname) || hostname.endsWith('.localhost');
}

/** Every configuration key of the service; `.env.example` mirrors this list. */
export const configSchema = z.object({
  /** development | production | test; production turns on Secure cookies, the SSRF guard and requires JWT_SECRET. */
  NODE_ENV: z.enum(['development', 'production', 'test']).default('development'),
  /** TCP port the HTTP server listens on. */
  PORT: int(0, 65535).default(3000),
  /** Interface the HTTP server binds to. */
  HOST: z.string().min(1).default('0.0.0.0'),
  /**
   * Port of the metrics listener (Prometheus text at /metrics), a listener of its own: the
   * public port answers /metrics as any unknown page. Unset: metrics are not served; 0: any
   * free port (logged at start).
   */
  METRICS_PORT: int(0, 65535).optional(),
  /** Interface the metrics listener binds to: loopback unless set (an internal address for a Prometheus elsewhere). */
  METRICS_HOST: z.string().min(1).default('127.0.0.1'),
  /** When set, the metrics listener answers only `Authorization: Bearer <METRICS_TOKEN>` (401 otherwise); at least 16 characters. */
  METRICS_TOKEN: optionalString.pipe(z.string().min(16, 'must be at least 16 characters').optional()),
  /** PostgreSQL connection string; unset runs the embedded database (PGlite) under DATA_DIR. */
  DATABASE_URL: optionalString.pipe(z.url({ protocol: /^postgres(ql)?$/ }).optional()),
  /**
   * Longest a PostgreSQL statement may take, waiting for a lock included, before it is
   * cancelled and its request answered 503 (`10s`, `1m`; `0`: no bound). Migrations are not
   * bounded.
   */
  DATABASE_STATEMENT_TIMEOUT: durationKey('10s', { minMs: 1000, maxMs: 3_600_000 }),
  /** Directory of the embedded database and the generated development JWT key. */
  DATA_DIR: z.string().min(1).default('./data'),
  /**
   * The embedded database's page cache (PostgreSQL's shared_buffers, `16MB`, `64MB`): resident
   * once filled, for the life of the process (README, Configuration: EMBEDDED_SHARED_BUFFERS). PGlite's own default is 128MB.
   */
  EMBEDDED_SHARED_BUFFERS: z.string().regex(/^[1-9]\d{0,5}(kB|MB|GB)$/, 'must be a size such as 16MB or 512kB').default(EMBEDDED_SHARED_BUFFERS),
  /** Redis URL; when set, rate-limit counters are shared between instances through it. */
  REDIS_URL: optionalString.pipe(z.url({ protocol: /^rediss?$/ }).optional()),
  /** HMAC key for SSO and API tokens, at least 32 bytes; required in production, and there not weak and not SESSION_SECRET. */
  JWT_SECRET: optionalString.pipe(z.string().min(32, 'must be at least 32 characters').optional()),
  /** Former JWT_SECRETs, comma-separated: tokens they signed still verify; nothing new is signed with them. */
  JWT_PREVIOUS_SECRETS: secretList,
  /** The `iss` claim of every token this service signs. */
  ISSUER: z.string().min(1).default('auth-service'),
  /** Lifetime of an SSO token (the token travels in a URL: keep it short). */
  TOKEN_TTL_SECONDS: int(5, 3600).default(60),
  /** Lifetime of an access token from POST /api/login. */
  ACCESS_TOKEN_TTL_SECONDS: int(60, 86400).default(900),
  /** bcrypt cost factor for user passwords; at least 10 in production. */
  BCRYPT_COST: int(4, 15).default(12),
  /** Proxies whose X-Forwarded-For is believed: unset (none), a hop count, or addresses/CIDRs. */
  TRUST_PROXY: trustProxy,
  /** Login endpoints, requests per minute per IP address. */
  RATE_LIMIT_LOGIN_PER_MIN: int(1).default(10),
  /** Token validation, requests per minute per client system. */
  RATE_LIMIT_VALIDATE_PER_MIN: int(1).default(100),
  /** Token issue, requests per minute per client system (every token is validated once: the same budget). */
  RATE_LIMIT_TOKEN_PER_MIN: int(1).default(100),
  /** User management and admin API, requests per minute per authenticated user. */
  RATE_LIMIT_USER_PER_MIN: int(1).default(50),
  /** Failed client authentications (wrong client_id or secret) per minute per IP address and client id; past them that address's failures at that client id are answered 429 for the rest of the minute (right credentials are always served). */
  RATE_LIMIT_CLIENT_AUTH_FAILURES_PER_MIN: int(1).default(20),
  /** Consecutive failed logins that lock an account. */
  LOCKOUT_THRESHOLD: int(1, 100).default(5),
  /** How long a locked account stays locked. */
  LOCKOUT_MINUTES: int(1, 1440).default(30),
  /** Key that signs the session cookie; required in production, and there not weak and not JWT_SECRET. */
  SESSION_SECRET: optionalString.pipe(z.string().min(32, 'must be at least 32 characters').optional()),
  /** Former SESSION_SECRETs, comma-separated: cookies they signed still work; new cookies use SESSION_SECRET. */
  SESSION_PREVIOUS_SECRETS: secretList,
  /** Lifetime of a browser/API session. */
  // at most a year: a cookie expiry past what a Date can hold made every sign-in a 500
  SESSION_TTL_SECONDS: int(60, 366 * 86_400).default(8 * 3600),
  /** Upper bound of one webhook delivery attempt. */
  WEBHOOK_TIMEOUT_MS: int(100, 60000).default(5000),
  /** First retry delay of a failed webhook delivery; each further retry waits four times longer. */
  WEBHOOK_BACKOFF_MS: int(10, 3600000).default(10000),
  /** Allow webhook URLs on loopback/private/link-local addresses (always allowed outside production). */
  WEBHOOK_ALLOW_PRIVATE: bool.optional(),
  /**
   * Keep client records in memory, dropped on a change announced by the database (LISTEN on a
   * connection of its own; needs a session: off behind a transaction-mode pooler).
   */
  CLIENT_CACHE: bool.default(true),
  /**
   * A seed file or a folder of them (its *.sql in name order), applied at every start before the
   * service is ready, under the migration lock (instances starting together apply it one after
   * another: once). A refused seed changes nothing and keeps the instance unready (/readyz 503
   * with the reason). Webhook secrets the files name are read from this process's environment.
   */
  SEED_ON_START: optionalString,
  /** How often expired, unused SSO tokens are swept (token.expired events). */
  TOKEN_SWEEP_INTERVAL_MS: int(100, 3600000).default(5000),
  /**
   * Durations below are written `30s`, `15m`, `24h` or `30d` and held in milliseconds;
   * `0` keeps forever (a retention) or turns the background pass off (PRUNE_INTERVAL).
   * SSO token rows are deleted this long after they expired (used, invalidated, or expired
   * unused with its token.expired event written).
   */
  TOKEN_RETENTION: durationKey('24h'),
  /** Finished webhook deliveries (succeeded or failed) and their attempts are deleted this long after completion; pending ones never. */
  WEBHOOK_RETENTION: durationKey('30d'),
  /** Audit entries are deleted this long after they were written; `0` keeps the audit log forever. */
  AUDIT_RETENTION: durationKey('365d'),
  /** How often each instance prunes in the background (expired sessions and ended failed-login counters too). */
  // at most a day: a timer longer than 2^31-1 ms would fire after 1 ms, over and over
  PRUNE_INTERVAL: durationKey('5m', { minMs: 1000, maxMs: 86_400_000 }),
  /** Shortest password any path accepts (characters); at most 72 bytes is bcrypt's limit. */
  PASSWORD_MIN_LENGTH: int(8, 72).default(10),
  /** How long a password reset link works: `30s`, `15m`, `24h` (held in seconds). */
  // at most a week: a link in a mailbox should not work for longer (and the database counts its seconds in an int)
  PASSWORD_RESET_TTL: durationKey('30m', { maxMs: 7 * 86_400_000 }).pipe(z.number().min(1000, 'must be at least 1s')).transform((ms) => Math.floor(ms / 1000)),
  /**
   * At most one reset mail per account in this time (held in seconds); a request sooner sends
   * nothing and leaves the link already sent working. `0s`: no limit.
   */
  PASSWORD_RESET_INTERVAL: durationKey('1m', { maxMs: 86_400_000 }).transform((ms) => Math.floor(ms / 1000)),
  /** SMTP server for password reset mail (smtp://user:pass@host:25, smtps://host:465); unset: mail goes to the log and DATA_DIR/mail/ outside production. */
  SMTP_URL: optionalString.pipe(z.url({ protocol: /^smtps?$/ }).optional()),
  /** The From address of mail this service sends. */
  MAIL_FROM: z.string().min(3).default('Auth Service <no-reply@localhost>'),
  /**
   * This service's address as users reach it (links in mail; the passkeys' RP ID is its host and
   * their origin its origin); default http://localhost:PORT. Required with SMTP_URL in
   * production, and there https unless on localhost.
   */
  PUBLIC_URL: optionalString.pipe(z.url({ protocol: /^https?$/ }).optional()),
  /**
   * The OpenID Connect signing keys (docs/openid-connect.md): a JWK set (`{"keys":[...]}`), one
   * JWK, or PEM private keys, the signing key first; every key listed is published in the
   * JWKS. Required in production (or OIDC_SIGNING_KEYS_FILE); otherwise generated once and
   * kept in DATA_DIR/oidc-keys.json.
   */
  OIDC_SIGNING_KEYS: optionalString,
  /** A file holding the same as OIDC_SIGNING_KEYS (a mounted secret); OIDC_SIGNING_KEYS wins when both are set. */
  OIDC_SIGNING_KEYS_FILE: optionalString,
  /** The organisation's name, shown in every page's header, footer and tab title. */
  BRAND_NAME: optionalString.pipe(z.string().max(80).optional()).transform((v) => v ?? 'Auth Service'),
  /**
   * The organisation's logo: a path under /assets (a file in public/) or a data:image/...;base64,
   * URL. Anything else is refused here, so no page ever makes a browser contact another site.
   */
  BRAND_LOGO_URL: optionalString.superRefine((v, ctx) => {
    const problem = v === undefined ? null : logoUrlProblem(v);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  }),
  /** pino log level. */
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
});

export type Config = z.infer<typeof configSchema>;

/** A configuration value that cannot be used; the message names the key. */
export class ConfigError extends Error {}

/**
 * Reads the configuration from an environment-like object. Throws ConfigError with one
 * line naming the first offending key, so a bad deployment fails at start, not later.
 * A key set to the empty string (or blanks) is unset, for every key: `PORT=` means the
 * default port, never port 0.
 */
export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const known = Object.fromEntries(Object.keys(configSchema.shape).map((k) => [k, env[k]?.trim() === '' ? undefined : env[k]]));
  const parsed = configSchema.safeParse(known);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const key = String(issue.path[0] ?? 'config');
    throw new ConfigError(`Invalid configuration: ${key}: ${issue.message}`);
  }
  const config = parsed.data;
  if (config.NODE_ENV === 'production') {
    if (!config.JWT_SECRET) throw new ConfigError('Invalid configuration: JWT_SECRET: required when NODE_ENV=production');
    if (!config.SESSION_SECRET) throw new ConfigError('Invalid configuration: SESSION_SECRET: required when NODE_ENV=production');
    // a reset link must never be built from a request's Host header (reset poisoning)
    if (config.SMTP_URL && !config.PUBLIC_URL) throw new ConfigError('Invalid configuration: PUBLIC_URL: required with SMTP_URL when NODE_ENV=production');
    // passkeys are bound to PUBLIC_URL's origin, and browsers offer WebAuthn only in a secure context
    if (config.PUBLIC_URL && !isSecureOrigin(config.PUBLIC_URL)) {
      throw new ConfigError('Invalid configuration: PUBLIC_URL: must be https when NODE_ENV=production (passkeys need a secure origin), except on localhost');
    }
    // a previous key verifies as the current one does (and a rotation's first step lists the new key there)
    const keys = {
      JWT_SECRET: [config.JWT_SECRET], SESSION_SECRET: [config.SESSION_SECRET],
      JWT_PREVIOUS_SECRETS: config.JWT_PREVIOUS_SECRETS ?? [], SESSION_PREVIOUS_SECRETS: config.SESSION_PREVIOUS_SECRETS ?? [],
    };
    for (const [key, secrets] of Object.entries(keys)) {
      for (const [i, secret] of secrets.entries()) {
        const reason = weakSecretReason(secret);
        const which = secrets.length > 1 ? ` (secret ${i + 1} of ${secrets.length})` : '';
        if (reason) throw new ConfigError(`Invalid configuration: ${key}${which}: too weak for production (${reason}); generate one with: openssl rand -base64 48`);
      }
    }
    // one leaked key must not give away both tokens and sessions
    const sessionKeys = new Set([...keys.SESSION_SECRET, ...keys.SESSION_PREVIOUS_SECRETS]);
    if (config.JWT_SECRET === config.SESSION_SECRET) throw new ConfigError('Invalid configuration: SESSION_SECRET: must differ from JWT_SECRET in production');
    if (sessionKeys.has(config.JWT_SECRET)) throw new ConfigError('Invalid configuration: SESSION_PREVIOUS_SECRETS: must not hold JWT_SECRET in production');
    if (keys.JWT_PREVIOUS_SECRETS.some((k) => sessionKeys.has(k))) {
      throw new ConfigError('Invalid configuration: JWT_PREVIOUS_SECRETS: must not hold a session key (SESSION_SECRET, SESSION_PREVIOUS_SECRETS) in production');
    }
    if (config.BCRYPT_COST < 10) throw new ConfigError(`Invalid configuration: BCRYPT_COST: must be at least 10 in production (is ${config.BCRYPT_COST})`);
    // ID tokens are verified by every client system with the published keys: never generated keys in production
    if (!config.OIDC_SIGNING_KEYS && !config.OIDC_SIGNING_KEYS_FILE) {
      throw new ConfigError('Invalid configuration: OIDC_SIGNING_KEYS: required when NODE_ENV=production (or OIDC_SIGNING_KEYS_FILE); see docs/openid-connect.md');
    }
  }
  return config;
}
