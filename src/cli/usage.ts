import { ACCESS_USAGE } from './access-commands.ts';

/** The admin command line's help: every command, as `npx auth-admin` (no command) prints it. */
export const USAGE = `Usage: npx auth-admin <command> [--json]   (or: npm run -s admin -- <command> [--json])

  client create --name NAME --callback-url URL [--allow-ip IP_OR_CIDR]... [--allow-everything] [--id CLIENT_ID]
                [--initiate-login-uri URL]   where the dashboard's one-click sign-in starts the client's own sign-in
                [--redirect-uri URL]... [--post-logout-redirect-uri URL]... [--backchannel-logout-uri URL] [--public]
                             OpenID Connect (docs/openid-connect.md): more redirect URIs, where a sign-out may
                             return to, back-channel logout; --public: a browser or native app, no secret
  client rotate-secret CLIENT_ID [--grace-seconds N]   the old secret keeps working N seconds (default 0)
  client update CLIENT_ID [--name N] [--callback-url U] [--initiate-login-uri U] [--active true|false] [--redirect-uri URL]...
                [--post-logout-redirect-uri URL]... [--backchannel-logout-uri URL|""]   (each list replaces the old one)
                             --initiate-login-uri '' removes it
                [--allow-group GROUP]... [--allow-role ROLE]... | [--open-to-all]  [--listed true|false]   (create and update)
                             who may use it (docs/access.md): each list given replaces that list;
                             --open-to-all clears both (every active user); --listed false hides
                             it from the dashboard's launcher
  client new-secret          a fresh secret and its secret_hash, for a seed file (no database)
  client set-ips CLIENT_ID IP_OR_CIDR... | --none   replace the allow list; --none empties it (nobody
                             is admitted); 0.0.0.0/0 or ::/0 needs --allow-everything
  client list
  client export              every client and webhook as a seed file (secret hashes; webhook secrets
                             by the environment variable to read them from); --json: its rows too
  user create --username U --email E --password P [--role R] [--full-name N] [--inactive]
  user set-password USERNAME --password P [--must-change]
                             set a password (the policy applies); signs the user out everywhere
  user set-active USERNAME true|false
  user unlock USERNAME
  user passkeys USERNAME     list a user's passkeys (id, name, created, last used)
  user remove-passkey USERNAME ID   remove one; the user keeps their password
${ACCESS_USAGE}
  link list [--status pending|active] [--client CLIENT_ID]
  link approve USERNAME CLIENT_ID [--name NAME]
                             prove a user's pending dashboard link: its name goes into tokens
                             (--name: only while the link names NAME, as \`link list\` showed it)
  link revoke USERNAME CLIENT_ID    remove a dashboard link; its name stops at once
  demo [--base-url URL]      create (or refresh) the demo client and user; not in production. Without
                             --base-url: PUBLIC_URL, else the running service's address, else the
                             demo client's current one, else PORT
  prune [--dry-run]          delete now what is past retention (TOKEN_RETENTION, WEBHOOK_RETENTION,
                             AUDIT_RETENTION), expired sessions and ended failed-login counters;
                             --dry-run only counts`;
