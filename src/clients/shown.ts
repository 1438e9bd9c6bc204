import { maskSecret } from './credentials.ts';
import type { ClientRecord } from './client.ts';

/** A client as shown to administrators: the secret masked. */
export interface PublicClient {
  client_id: string;
  client_name: string;
  /** Masked; absent for a public client, which has none. */
  client_secret?: string;
  callback_url: string;
  /** Where the dashboard's one-click sign-in sends the browser to start the client's own sign-in; null: none. */
  initiate_login_uri: string | null;
  /** OpenID Connect: more redirect URIs, post-logout redirect URIs, public client, back-channel logout URI. */
  redirect_uris: string[];
  post_logout_redirect_uris: string[];
  public: boolean;
  backchannel_logout_uri: string | null;
  allowed_ips: string[];
  logo_url: string | null;
  active: boolean;
  created_at: string;
  updated_at: string;
  /** Until when the secret a rotation replaced still works (ISO 8601); null when none does. */
  previous_secret_expires_at: string | null;
  /** Who may use it (docs/access.md): both empty, every active user. */
  allow_groups: string[];
  allow_roles: string[];
  /** Shown on the dashboard's launcher. */
  listed: boolean;
}

export function toPublicClient(c: ClientRecord): PublicClient {
  return {
    client_id: c.client_id,
    client_name: c.client_name,
    ...(c.public ? {} : { client_secret: maskSecret(c.secret_last4) }),
    callback_url: c.callback_url,
    initiate_login_uri: c.initiate_login_uri ?? null,
    redirect_uris: c.redirect_uris,
    post_logout_redirect_uris: c.post_logout_redirect_uris,
    public: c.public,
    backchannel_logout_uri: c.backchannel_logout_uri,
    allowed_ips: c.allowed_ips,
    logo_url: c.logo_url ?? null,
    active: c.active,
    created_at: new Date(c.created_at).toISOString(),
    updated_at: new Date(c.updated_at).toISOString(),
    previous_secret_expires_at: c.previous_secret_expires_at ? new Date(c.previous_secret_expires_at).toISOString() : null,
    allow_groups: c.allow_groups,
    allow_roles: c.allow_roles,
    listed: c.listed,
  };
}

/** The values an editing page showed of the fields it saves, as editableValues gives them (409 edit_conflict when one has moved since). */
export type ShownClient = Partial<Record<EditableField, string>>;

type EditableField = 'client_name' | 'callback_url' | 'initiate_login_uri' | 'allowed_ips' | 'logo_url'
  | 'redirect_uris' | 'post_logout_redirect_uris' | 'backchannel_logout_uri';

/** A client's editable fields as an editing page shows them: the lists one entry a line, no logo, initiate-login or back-channel URL as ''. */
export function editableValues(c: ClientRecord): Record<EditableField, string> {
  return {
    client_name: c.client_name, callback_url: c.callback_url, initiate_login_uri: c.initiate_login_uri ?? '',
    allowed_ips: c.allowed_ips.join('\n'), logo_url: c.logo_url ?? '',
    redirect_uris: c.redirect_uris.join('\n'), post_logout_redirect_uris: c.post_logout_redirect_uris.join('\n'),
    backchannel_logout_uri: c.backchannel_logout_uri ?? '',
  };
}
