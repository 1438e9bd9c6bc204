// The client system as the other capabilities see it (src/clients/queries.ts reads it).
/** A client system as stored (the secret only as hash and last four characters). */
export interface ClientRecord {
  client_id: string;
  client_name: string;
  secret_hash: string;
  secret_last4: string;
  callback_url: string;
  /**
   * Where the dashboard's one-click sign-in sends the browser (OpenID Connect's
   * initiate_login_uri): the client starts its own sign-in there, with its own state. Null: none.
   */
  initiate_login_uri: string | null;
  allowed_ips: string[];
  /** Shown on its sign-in page: a path under /assets or a data: image (see validation/logo-url.ts), or null. */
  logo_url: string | null;
  active: boolean;
  /** OpenID Connect (migrations/0024): redirect URIs besides callback_url. */
  redirect_uris: string[];
  /** Where an OpenID Connect sign-out may send the browser back to. */
  post_logout_redirect_uris: string[];
  /** A public client (single-page or native app): no secret, PKCE required, no allow list. */
  public: boolean;
  /** Where back-channel logout tokens are posted when a user's session here ends; null: none. */
  backchannel_logout_uri: string | null;
  created_at: Date;
  updated_at: Date;
  /** The secret a rotation replaced, while its grace lasts (by the database clock); otherwise null. */
  previous_secret_hash: string | null;
  /** When the previous secret stops working; null when there is none (or its grace is over). */
  previous_secret_expires_at: Date | null;
  /** Who may use it (docs/access.md): users in one of these groups or with one of these roles; both empty: every active user. Sorted. */
  allow_groups: string[];
  allow_roles: string[];
  /** Shown on the dashboard's launcher (false: a machine-only client). */
  listed: boolean;
  /**
   * The version of the row this record was read from (its xmin): every write to the row, by
   * any means, gives it another. The hot statements write only while the row still has it.
   */
  version: string;
}

/**
 * Thrown when a statement found the client's row changed since the record the request was
 * authenticated with was read: nothing was written; the request is to be decided again on
 * the client's current record (src/clients/guards.ts, onCurrentClient).
 */
export class ClientChanged extends Error {
  constructor(readonly clientId: string) {
    super(`client ${clientId} changed while the request was handled`);
    this.name = 'ClientChanged';
  }
}
