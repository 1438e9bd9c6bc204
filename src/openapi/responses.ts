import { z } from 'zod';

/**
 * Schemas of the answers, for the API reference only (requests are validated with the
 * capabilities' own schemas; answers are built by their code). The reference test checks
 * every documented example against these.
 */

/** Every error: `{error, message}` plus, for some codes, extra fields. */
export const errorBody = z.object({
  error: z.string().describe('Stable snake_case code, e.g. invalid_client, validation_error, rate_limited'),
  message: z.string().describe('For humans'),
  details: z.array(z.object({ path: z.string(), message: z.string() })).optional().describe('validation_error: one entry per problem'),
  retry_after: z.number().int().optional().describe('rate_limited: seconds until a retry can succeed'),
  remaining_minutes: z.number().int().optional().describe('account_locked, and the failed attempt that sets the lock (`locked`): minutes until sign-in is possible again'),
  locked: z.literal(true).optional().describe('The failed attempt (401, or a refused code\'s own status) that has just locked the login name; the attempts after it answer 423 account_locked'),
  attempts_remaining: z.number().int().optional().describe('invalid_credentials, invalid_totp, totp_reused on sign-in, and a refused code when turning two-factor on or off: failed attempts left before the login name is locked (counted per name, known or not)'),
  request_id: z.string().optional().describe('internal_error: the X-Request-Id to quote when reporting'),
  invalid: z.array(z.string()).optional().describe('invalid_allowed_ips: the entries that are not addresses or ranges'),
  entries: z.array(z.string()).optional().describe('allow_everything_unconfirmed: the allow-everything ranges to confirm'),
  field: z.string().optional().describe('validation_error from an admin form: the field at fault'),
  change_password: z.looseObject({}).optional().describe('password_change_required: where and how to change the password'),
}).meta({ id: 'Error' });

export const tokenRefusal = z.object({
  valid: z.literal(false),
  error: z.enum(['invalid_token', 'token_expired', 'token_already_used', 'token_revoked', 'ip_mismatch', 'user_inactive', 'access_denied']),
  message: z.string(),
}).meta({ id: 'TokenRefusal' });

/** What the validate routes answer with 401: a refused token, or (without `valid`) invalid client credentials. */
export const validationRefusal = z.union([tokenRefusal, errorBody]);

export const issuedToken = z.object({
  token: z.string().describe('The signed JWT (HS256), single use, short-lived'),
  redirect_url: z.string().describe("The client's callback URL with the token as query parameter `token`"),
}).meta({ id: 'IssuedToken' });

export const validatedToken = z.object({
  valid: z.literal(true),
  user: z.object({
    id: z.number().int(), username: z.string(), email: z.string(),
    roles: z.array(z.string()).describe('The token\'s `roles` claim: the user\'s roles when it was issued'),
    full_name: z.string().describe('The user\'s full name (empty when none is set)'),
  }),
  expires_at: z.string().regex(/^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/).describe('UTC, YYYY-MM-DD HH:MM:SS'),
}).meta({ id: 'ValidatedToken' });

export const clientLogout = z.object({ success: z.literal(true), invalidated_tokens: z.number().int() });

export const publicUser = z.object({
  id: z.number().int(),
  username: z.string(),
  email: z.string(),
  role: z.string(),
  full_name: z.string(),
}).meta({ id: 'User' });

export const sessionLogin = z.object({ success: z.literal(true), user: publicUser });
export const accessToken = z.object({
  token: z.string().describe('Access token for this service\'s own API (Authorization: Bearer)'),
  token_type: z.literal('Bearer'),
  expires_in: z.number().int().describe('Seconds'),
  user: publicUser,
});
export const success = z.object({ success: z.literal(true) });

export const totpSetup = z.object({
  secret: z.string().describe('Base32 TOTP secret'),
  otpauth_uri: z.string(),
  qr_svg: z.string().describe('The otpauth URI as an SVG QR code'),
});
export const totpEnabled = z.object({
  totp_enabled: z.literal(true),
  recovery_codes: z.array(z.string()).describe('Shown this once'),
  access_token: z.object({ token: z.string(), token_type: z.literal('Bearer'), expires_in: z.number().int() }).optional()
    .describe('Only when an access token asked: every access token stopped working, this one replaces it'),
});
export const totpDisabled = z.object({ totp_enabled: z.literal(false) });

export const webhook = z.object({
  id: z.number().int(),
  url: z.string(),
  events: z.array(z.string()),
  active: z.boolean(),
  created_at: z.string().describe('ISO 8601 UTC'),
  disabled_reason: z.string().nullable().optional(),
}).meta({ id: 'Webhook' });

export const webhookDelivery = z.object({
  id: z.string(),
  event: z.string(),
  status: z.enum(['pending', 'succeeded', 'failed']),
  attempts: z.number().int(),
  next_attempt_at: z.string().nullable(),
  last_status_code: z.number().int().nullable(),
  last_error: z.string().nullable(),
  created_at: z.string(),
  completed_at: z.string().nullable(),
  attempt_log: z.array(z.object({
    attempt: z.number().int(), at: z.string(), status_code: z.number().int().nullable(), error: z.string().nullable(), duration_ms: z.number().int(),
  })),
});
export const redelivery = z.object({ id: z.string(), status: z.literal('pending') });

export const health = z.object({ status: z.literal('ok') });
export const ready = z.object({ status: z.literal('ready'), database: z.enum(['postgres', 'embedded']) });

/** A client system as administrators see it: the secret masked. */
export const publicClient = z.object({
  client_id: z.string(),
  client_name: z.string(),
  client_secret: z.string().optional().describe('Masked, e.g. ••••••••Xy3Q; absent for a public client, which has none'),
  callback_url: z.string(),
  initiate_login_uri: z.string().nullable().describe('Where the dashboard\'s one-click sign-in sends the browser to start this client\'s own sign-in (OpenID Connect initiate_login_uri); null: to the callback with a token'),
  redirect_uris: z.array(z.string()).describe('OpenID Connect redirect URIs besides callback_url (docs/openid-connect.md)'),
  post_logout_redirect_uris: z.array(z.string()).describe('Where an OpenID Connect sign-out may return to'),
  public: z.boolean().describe('A public OpenID Connect client (single-page or native app): no secret, PKCE S256 required, no allow list'),
  backchannel_logout_uri: z.string().nullable().describe('Where OpenID Connect back-channel logout tokens are posted; null: none'),
  allowed_ips: z.array(z.string()),
  logo_url: z.string().nullable().describe('Shown on its sign-in page: a path under /assets or a data:image/...;base64, URL; null for none'),
  active: z.boolean(),
  created_at: z.string(),
  updated_at: z.string(),
  previous_secret_expires_at: z.string().nullable().describe('Until when the secret replaced by the last rotation still works; null when none does'),
  allow_groups: z.array(z.string()).describe('Users in one of these groups may use it (docs/access.md); with allow_roles empty too: every active user'),
  allow_roles: z.array(z.string()).describe('Users with one of these roles may use it'),
  listed: z.boolean().describe('Shown on the dashboard\'s launcher (false: a machine-only client)'),
}).meta({ id: 'Client' });
/** One client with how many active users its rule admits. */
export const clientDetail = publicClient.extend({ admitted_users: z.number().int().describe('Active users the access rule admits now') });
/** A group with its member count (and, for one group, the members). */
export const group = z.object({ name: z.string(), members: z.number().int(), created_at: z.string() }).meta({ id: 'Group' });
export const groupDetail = group.extend({ users: z.array(z.object({ id: z.number().int(), username: z.string() })) });
export const deletedGroup = z.object({ name: z.string(), deleted: z.literal(true), members: z.number().int().describe('Members it had') });
export const membership = z.object({ user_id: z.number().int(), group: z.string(), member: z.boolean(), changed: z.boolean() });
export const createdClient = publicClient.extend({ client_secret: z.string().optional().describe('The plain secret: shown this once; absent for a public client') });
export const rotatedSecret = z.object({
  client_id: z.string(),
  client_secret: z.string().describe('The new plain secret: shown this once'),
  previous_secret_expires_at: z.string().nullable().describe('Until when the replaced secret still works (ISO 8601); null: it stopped at once'),
});

export const adminUser = z.object({
  id: z.number().int(),
  username: z.string(),
  email: z.string(),
  role: z.string(),
  full_name: z.string(),
  active: z.boolean(),
  locked_until: z.string().nullable(),
  totp_enabled: z.boolean(),
  must_change_password: z.boolean().describe('The next sign-in must choose a new password'),
  created_at: z.string(),
}).meta({ id: 'AdminUser' });
export const adminUserDetail = adminUser.extend({
  linked_clients: z.array(z.record(z.string(), z.unknown())),
  groups: z.array(z.string()).describe('The user\'s groups, sorted'),
  usable_clients: z.array(z.string()).describe('The ids of the active client systems whose access rule admits the user'),
});

export const auditEntry = z.object({
  id: z.number().int(),
  at: z.string(),
  action: z.string(),
  outcome: z.enum(['success', 'failure']),
  user_id: z.number().int().nullable(),
  username: z.string().nullable(),
  client_id: z.string().nullable(),
  ip_address: z.string().nullable(),
  user_agent: z.string().nullable(),
  details: z.record(z.string(), z.unknown()),
});
export const auditPage = z.object({ entries: z.array(auditEntry), next_cursor: z.string().nullable() });
