-- What the OpenID Connect provider (oidc-provider, src/oidc/) keeps: authorization codes,
-- access and refresh tokens, grants, sessions, interactions, replay markers, one row each,
-- the library's payload as JSON. `pk` is "<model>:<id>". The columns beside the payload are
-- the ones it looks rows up by (grant, session uid, user code) and the user the row belongs
-- to (so a password change can revoke that user's tokens). Rows past expires_at are never
-- read and are deleted by the pruner (src/retention/).

CREATE TABLE oidc_artefacts (
  pk text PRIMARY KEY,
  model text NOT NULL,
  payload jsonb NOT NULL,
  grant_id text,
  uid text,
  user_code text,
  account_id text,
  expires_at timestamptz NOT NULL,
  consumed_at timestamptz
);

CREATE INDEX oidc_artefacts_grant ON oidc_artefacts (grant_id) WHERE grant_id IS NOT NULL;
CREATE INDEX oidc_artefacts_uid ON oidc_artefacts (uid) WHERE uid IS NOT NULL;
CREATE INDEX oidc_artefacts_user_code ON oidc_artefacts (user_code) WHERE user_code IS NOT NULL;
CREATE INDEX oidc_artefacts_account ON oidc_artefacts (account_id) WHERE account_id IS NOT NULL;
CREATE INDEX oidc_artefacts_expires ON oidc_artefacts (expires_at);
