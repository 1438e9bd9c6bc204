import { z } from 'zod';

/** HTML forms send strings; checkboxes are present ("on") or absent. */
const text = (max: number) => z.string().max(max);
const checkbox = z.string().max(10).optional();
/** The form's one-time key (src/admin/once.ts); one of another shape is ignored there. */
const submission = z.string().max(100).optional();

/** Register or edit a client system in the panel. */
export const clientForm = z.object({
  client_name: text(200).trim().min(1, 'enter a name'),
  callback_url: text(2048).trim().min(1, 'enter the callback URL'),
  allowed_ips: text(8000).default(''),
  allow_everything: checkbox,
  /** A path under /assets or a data: image; blank for none. */
  logo_url: text(15000).default(''),
  /** Where the dashboard's one-click sign-in starts the client's own sign-in; blank for none. */
  initiate_login_uri: text(2048).default(''),
  /** OpenID Connect: the redirect URIs and post-logout redirect URIs, one a line; the back-channel logout URL, blank for none. */
  redirect_uris: text(42000).default(''),
  post_logout_redirect_uris: text(42000).default(''),
  backchannel_logout_uri: text(2048).default(''),
  submission,
  // the values the edit page showed (editedFields, src/admin/panel-common.ts)
  was_client_name: text(200).optional(),
  was_callback_url: text(2048).optional(),
  was_allowed_ips: text(8000).optional(),
  was_logo_url: text(15000).optional(),
  was_initiate_login_uri: text(2048).optional(),
  was_redirect_uris: text(42000).optional(),
  was_post_logout_redirect_uris: text(42000).optional(),
  was_backchannel_logout_uri: text(2048).optional(),
});

/** Register a client system: the edit form's fields, and the id, chosen (checked as the CLI's --id) or blank for one made from the name. */
export const clientCreateForm = clientForm.extend({
  client_id: text(64).trim().default(''),
  /** A public client (single-page or native app, PKCE): no secret is made. */
  public: checkbox,
});

/** Regenerate a client secret: how long the old one keeps working, in seconds (0: not at all). */
export const regenerateForm = z.object({
  grace_seconds: text(10).regex(/^\d{1,9}$/, 'choose how long the old secret keeps working').default('0'),
  submission,
});

export const activeForm = z.object({ active: z.enum(['true', 'false']) });

/**
 * Approve a pending dashboard link: the name the administrator was shown, which is the one
 * approved (a name the user put in its place since is not); the page to return to.
 */
export const linkApproveForm = z.object({
  external_username: text(200).min(1, 'the link\'s name is missing: reload the page'),
  return_to: text(200).optional(),
});

/** Create a user in the panel. */
export const userCreateForm = z.object({
  username: text(64).trim().min(1, 'enter a username'),
  email: text(254).trim().min(1, 'enter an email address'),
  full_name: text(200).trim().default(''),
  role: text(32).trim().default('user'),
  password: text(200).min(1, 'enter an initial password'),
});

/** Set a user's password in the panel; the box asks for a new one at the next sign-in. */
export const userPasswordForm = z.object({
  password: text(1024).min(1, 'enter the new password'),
  must_change: checkbox,
});

/** Edit a user's profile in the panel. */
export const userEditForm = z.object({
  email: text(254).trim().min(1, 'enter an email address'),
  full_name: text(200).trim().default(''),
  role: text(32).trim().min(1, 'choose a role'),
  // the values the page showed (editedFields, src/admin/panel-common.ts)
  was_email: text(254).optional(),
  was_full_name: text(200).optional(),
  was_role: text(32).optional(),
});

/** Register a webhook in the panel: events arrive as one field per ticked checkbox. */
export const webhookForm = z.object({
  url: text(2048).trim().min(1, 'enter the receiver URL'),
  secret: text(512),
  events: z.union([z.string(), z.array(z.string())]).optional(),
});

/** Edit a webhook in the panel: an empty secret keeps the current one. */
export const webhookEditForm = z.object({
  url: text(2048).trim().min(1, 'enter the receiver URL'),
  secret: text(512).default(''),
  events: z.union([z.string(), z.array(z.string())]).optional(),
  // the values the page showed (editedFields, src/admin/panel-common.ts); the events comma-separated
  was_url: text(2048).optional(),
  was_events: text(2000).optional(),
});

/** Deleting a webhook needs its confirmation box ticked. */
export const confirmForm = z.object({ confirm: z.literal('on', { error: 'tick the box to confirm' }) });
