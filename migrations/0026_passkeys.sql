-- Passkeys (WebAuthn credentials) of users, and the challenges of the ceremonies in flight
-- (src/passkeys/). The database checks every column, whoever writes the row (seed files, psql),
-- as it does a client's callback_url: the service reads these rows back into the WebAuthn
-- library and must never be handed something it cannot use.
CREATE TABLE passkeys (
  id            integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  user_id       integer NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  -- the credential id as the browser names it: base64url, as WebAuthn's JSON forms carry it
  credential_id text NOT NULL UNIQUE
                CONSTRAINT passkeys_credential_id_valid CHECK (
                  char_length(credential_id) BETWEEN 16 AND 1366 AND credential_id ~ '^[A-Za-z0-9_-]+$'),
  -- the COSE public key the credential signs with
  public_key    bytea NOT NULL CONSTRAINT passkeys_public_key_valid CHECK (octet_length(public_key) BETWEEN 16 AND 4096),
  -- the authenticator's signature counter (32 bits; 0 for authenticators that keep none)
  counter       bigint NOT NULL DEFAULT 0 CONSTRAINT passkeys_counter_valid CHECK (counter BETWEEN 0 AND 4294967295),
  transports    text[] NOT NULL DEFAULT '{}'
                CONSTRAINT passkeys_transports_valid CHECK (
                  transports <@ ARRAY['ble', 'cable', 'hybrid', 'internal', 'nfc', 'smart-card', 'usb']::text[]
                  AND cardinality(transports) <= 7),
  -- the user's name for it, shown on the security page: no control characters, no blank
  name          text NOT NULL CONSTRAINT passkeys_name_valid CHECK (
                  char_length(name) BETWEEN 1 AND 64 AND btrim(name) = name AND name !~ '[[:cntrl:]]'),
  created_at    timestamptz NOT NULL DEFAULT now(),
  last_used_at  timestamptz
);
CREATE INDEX passkeys_by_user ON passkeys (user_id, id);

-- A challenge handed to a browser, good for one ceremony until it expires: taken by one
-- DELETE ... RETURNING, so a replayed answer finds none. A registration's is the user's.
CREATE TABLE webauthn_challenges (
  challenge  text PRIMARY KEY CONSTRAINT webauthn_challenges_challenge_valid CHECK (challenge ~ '^[A-Za-z0-9_-]{32,128}$'),
  purpose    text NOT NULL CONSTRAINT webauthn_challenges_purpose_valid CHECK (purpose IN ('registration', 'authentication')),
  user_id    integer REFERENCES users (id) ON DELETE CASCADE,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL,
  CONSTRAINT webauthn_challenges_owner CHECK ((purpose = 'registration') = (user_id IS NOT NULL)),
  CONSTRAINT webauthn_challenges_lifetime CHECK (expires_at > created_at AND expires_at <= created_at + interval '15 minutes')
);
CREATE INDEX webauthn_challenges_expiry ON webauthn_challenges (expires_at);
