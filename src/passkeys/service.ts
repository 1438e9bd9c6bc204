import type {
  AuthenticationResponseJSON, PublicKeyCredentialCreationOptionsJSON, PublicKeyCredentialRequestOptionsJSON, RegistrationResponseJSON,
} from '@simplewebauthn/server';
import { actorDetails, type Actor } from '../audit/actor.ts';
import { writeAudit } from '../audit/writer.ts';
import { PasswordChangeRequired, refuseWhileLocked } from '../auth/login-errors.ts';
import { createLoginFailures, type LoginInput } from '../auth/login-failures.ts';
import { activeLock, resetLoginFailures } from '../auth/queries.ts';
import type { AuthService } from '../auth/service.ts';
import { OWN_SYSTEM } from '../auth/sign-out.ts';
import { admitSignIn } from '../access/service.ts';
import type { ClientRecord } from '../clients/client.ts';
import { accessDenied } from '../sso/service.ts';
import type { Deps } from '../context.ts';
import { AppError } from '../http/errors.ts';
import { metricFailureReason } from '../auth/login-failures.ts';
import { findUserById } from '../users/queries.ts';
import type { UserRecord } from '../users/user.ts';
import { normalizeUsername } from '../validation/username.ts';
import {
  countPasskeys, credentialIdsOf, deletePasskey, findPasskeyByCredential, insertPasskey, listPasskeys, type PasskeySummary,
  recordPasskeyUse, signInState, storeChallenge, takeChallenge,
} from './queries.ts';
import { relyingParty } from './relying-party.ts';

/**
 * SimpleWebAuthn, loaded by the first ceremony (then kept): about 10 MiB resident that a service
 * nobody signs in to with a passkey never needs (docs/performance.md, "Memory at rest and under load").
 */
const webauthn = () => import('@simplewebauthn/server');

/** At most this many passkeys per user. */
export const MAX_PASSKEYS = 10;
/** How long a ceremony may take, from its options to its answer. */
const CHALLENGE_TTL_SECONDS = 5 * 60;

/** Where a ceremony came from, for the audit log. */
export interface CeremonyContext {
  ipAddress: string;
  userAgent: string | null;
  via: 'page' | 'api';
  /** The client system the sign-in is for (the sign-in page's target): refused to a user its access rule does not admit. */
  forClient?: Pick<ClientRecord, 'client_id' | 'client_name'>;
}

/** The one answer to every refused passkey sign-in: nothing says which check failed. */
export function passkeyRefused(): AppError {
  return new AppError(401, 'passkey_refused', 'This passkey could not be used to sign in.');
}

/**
 * Passkeys (WebAuthn through SimpleWebAuthn): registration by a signed-in user, sign-in with
 * a discoverable credential, listing and removal by the user and by administrators. The RP ID
 * and origin come from PUBLIC_URL (relying-party.ts) and are checked on every ceremony; every
 * challenge is stored, single-use and short-lived (migrations/0026_passkeys.sql). A sign-in
 * follows the rules of a password sign-in: the lock, the active flag, the must-change flag,
 * the audit entry and user.login (2fa_used: a user-verified passkey is both factors).
 */
export function createPasskeyService(deps: Pick<Deps, 'db' | 'config' | 'events' | 'metrics'>, auth: Pick<AuthService, 'confirmPassword'>) {
  const { db, config, events, metrics } = deps;
  const rp = relyingParty(config);
  const { fail, refuseLocked } = createLoginFailures(deps);

  /** The options of a registration for `user`, after their current password (counted toward the lock like a sign-in). */
  async function registrationOptions(user: UserRecord, password: string, ctx: CeremonyContext): Promise<PublicKeyCredentialCreationOptionsJSON> {
    await auth.confirmPassword(user, password, { ipAddress: ctx.ipAddress, userAgent: ctx.userAgent, via: 'passkey_add' });
    const existing = await credentialIdsOf(db, user.id);
    if (existing.length >= MAX_PASSKEYS) throw limitReached();
    const options = await (await webauthn()).generateRegistrationOptions({
      rpName: rp.name, rpID: rp.id,
      userName: user.username, userDisplayName: user.full_name || user.username,
      // the user handle: stable per user, so an authenticator replaces its older passkey for this account
      userID: new TextEncoder().encode(`user:${user.id}`),
      attestationType: 'none',
      excludeCredentials: existing.map((c) => ({ id: c.credential_id, transports: c.transports })),
      authenticatorSelection: { residentKey: 'required', requireResidentKey: true, userVerification: 'required' },
      timeout: CHALLENGE_TTL_SECONDS * 1000,
    });
    await storeChallenge(db, options.challenge, 'registration', user.id, CHALLENGE_TTL_SECONDS);
    return options;
  }

  /** Checks the browser's answer to a registration and stores the passkey under `name`; audited. */
  async function register(user: UserRecord, name: string, response: RegistrationResponseJSON, ctx: CeremonyContext): Promise<PasskeySummary> {
    let verified;
    try {
      verified = await (await webauthn()).verifyRegistrationResponse({
        response,
        expectedChallenge: (challenge) => takeChallenge(db, challenge, 'registration', user.id),
        expectedOrigin: rp.origin, expectedRPID: rp.id, requireUserVerification: true,
      });
    } catch (err) {
      throw new AppError(400, 'passkey_not_registered', 'The passkey could not be added. Please try again.', { cause: err });
    }
    if (!verified.verified) throw new AppError(400, 'passkey_not_registered', 'The passkey could not be added. Please try again.');
    const { credential } = verified.registrationInfo;
    return db.transaction(async (tx) => {
      if (await findPasskeyByCredential(tx, credential.id)) throw new AppError(409, 'passkey_exists', 'This passkey is already registered.');
      const created = await insertPasskey(tx, {
        userId: user.id, credentialId: credential.id, publicKey: credential.publicKey, counter: credential.counter,
        transports: (credential.transports ?? []).filter((t) => KNOWN_TRANSPORTS.has(t)), name,
      }, MAX_PASSKEYS);
      if (created === 'limit') throw limitReached();
      if (created === null) throw new AppError(401, 'unauthenticated', 'Sign in first');
      await writeAudit(tx, {
        action: 'passkey.added', outcome: 'success', userId: user.id, username: user.username, ipAddress: ctx.ipAddress,
        userAgent: ctx.userAgent, details: { via: ctx.via, passkey_id: created.id, name },
      });
      return created;
    });
  }

  /** The options of a sign-in: no user named, any of this service's discoverable credentials. */
  async function authenticationOptions(): Promise<PublicKeyCredentialRequestOptionsJSON> {
    const options = await (await webauthn()).generateAuthenticationOptions({ rpID: rp.id, userVerification: 'required', timeout: CHALLENGE_TTL_SECONDS * 1000 });
    await storeChallenge(db, options.challenge, 'authentication', null, CHALLENGE_TTL_SECONDS);
    return options;
  }

  /**
   * Signs in with a passkey's assertion. 401 passkey_refused for an unknown credential, a
   * refused check (origin, RP ID, a challenge unknown, used or expired, the signature, user
   * verification, a counter that went backwards) or an inactive user, audited as a failed
   * sign-in (counted toward the lock when the passkey is the user's); 423 while the account
   * is locked; 403 password_change_required as for a password. On success the same
   * bookkeeping as auth.login, in one transaction with the passkey's new counter.
   */
  async function signIn(response: AuthenticationResponseJSON, ctx: CeremonyContext): Promise<{ user: UserRecord; twoFactorUsed: true; credentialsVersion: string }> {
    const passkey = await findPasskeyByCredential(db, response.id);
    const user = passkey ? await findUserById(db, passkey.user_id) : null;
    if (!passkey || !user) {
      // the challenge is spent all the same: an answer is good for one try
      await (await webauthn()).verifyAuthenticationResponse({
        response, expectedChallenge: (c) => takeChallenge(db, c, 'authentication', null), expectedOrigin: rp.origin, expectedRPID: rp.id,
        credential: { id: response.id, publicKey: new Uint8Array(0), counter: 0 }, requireUserVerification: true,
      }).catch(() => undefined);
      return refuseUnknown(ctx);
    }
    const login = normalizeUsername(user.username);
    const input: LoginInput = { login, password: '', ipAddress: ctx.ipAddress, userAgent: ctx.userAgent, via: ctx.via };
    const lock = await activeLock(db, login);
    if (lock) return refuseLocked(login, lock.remaining_seconds, input);
    let newCounter: number;
    try {
      const result = await (await webauthn()).verifyAuthenticationResponse({
        response,
        expectedChallenge: (c) => takeChallenge(db, c, 'authentication', null),
        expectedOrigin: rp.origin, expectedRPID: rp.id, requireUserVerification: true,
        credential: { id: passkey.credential_id, publicKey: passkey.public_key, counter: passkey.counter, transports: passkey.transports as never },
      });
      if (!result.verified || !result.authenticationInfo.userVerified) throw new Error('not verified');
      newCounter = result.authenticationInfo.newCounter;
    } catch {
      return fail(login, loginUser(user), 'invalid_passkey', input).catch(asPasskeyRefusal);
    }
    if (!user.active) return fail(login, loginUser(user), 'user_inactive', input).catch(asPasskeyRefusal);

    const outcome = await db.transaction(async (tx) => {
      await refuseWhileLocked(tx, login);
      const now = await signInState(tx, user.id);
      if (!now || !now.active) return { state: 'inactive' as const };
      if (now.mustChange) return { state: 'must_change' as const };
      // the counter the check saw is still the stored one: a second use of the same answer finds it moved
      if (!(await recordPasskeyUse(tx, passkey.id, passkey.counter, newCounter))) return { state: 'replayed' as const };
      await resetLoginFailures(tx, login);
      // a passkey of a user the client's rule does not admit: no session, no user.login (as auth.login)
      if (ctx.forClient && !(await admitSignIn(tx, user, ctx.forClient.client_id, {
        action: 'user.login', ipAddress: ctx.ipAddress, userAgent: ctx.userAgent, details: { via: ctx.via, method: 'passkey', passkey_id: passkey.id, two_factor: true },
      }))) {
        return { state: 'access_denied' as const };
      }
      await writeAudit(tx, {
        action: 'user.login', outcome: 'success', userId: user.id, username: user.username, ipAddress: ctx.ipAddress,
        userAgent: ctx.userAgent, details: { via: ctx.via, method: 'passkey', passkey_id: passkey.id, two_factor: true },
      });
      await events.record(tx, 'user.login', {
        user_id: user.id, email: user.email, ip_address: ctx.ipAddress, user_agent: ctx.userAgent ?? '', client_system: OWN_SYSTEM, '2fa_used': true,
      });
      return { state: 'signed_in' as const, version: now.version };
    });
    if (outcome.state === 'must_change') throw new PasswordChangeRequired(user.id, true);
    if (outcome.state === 'access_denied') throw accessDenied(ctx.forClient!.client_name);
    if (outcome.state !== 'signed_in') {
      return fail(login, loginUser(user), outcome.state === 'inactive' ? 'user_inactive' : 'invalid_passkey', input).catch(asPasskeyRefusal);
    }
    return { user, twoFactorUsed: true, credentialsVersion: outcome.version };
  }

  /** An assertion for a credential nobody has: audited, not counted (there is no name to count it for). */
  async function refuseUnknown(ctx: CeremonyContext): Promise<never> {
    await writeAudit(db, {
      action: 'user.login', outcome: 'failure', userId: null, username: null, ipAddress: ctx.ipAddress, userAgent: ctx.userAgent,
      details: { via: ctx.via, method: 'passkey', reason: 'unknown_passkey' },
    });
    metrics.loginFailures.inc({ reason: metricFailureReason('invalid_passkey') });
    throw passkeyRefused();
  }

  /** Removes one of a user's passkeys; audited (by the user, or by an administrator: `actor`). 404 when the user has no such passkey. */
  async function remove(user: Pick<UserRecord, 'id' | 'username'>, passkeyId: number, by: { actor: Actor } | CeremonyContext): Promise<void> {
    await db.transaction(async (tx) => {
      const gone = await deletePasskey(tx, user.id, passkeyId);
      if (!gone) throw new AppError(404, 'passkey_not_found', 'No such passkey');
      const who = 'actor' in by
        ? { ipAddress: by.actor.ipAddress ?? null, userAgent: by.actor.userAgent ?? null, details: actorDetails(by.actor) }
        : { ipAddress: by.ipAddress, userAgent: by.userAgent, details: { via: by.via } };
      await writeAudit(tx, {
        action: 'passkey.removed', outcome: 'success', userId: user.id, username: user.username, ipAddress: who.ipAddress, userAgent: who.userAgent,
        details: { ...who.details, passkey_id: passkeyId, name: gone.name },
      });
    });
  }

  return {
    relyingParty: rp,
    registrationOptions,
    register,
    authenticationOptions,
    signIn,
    remove,
    list: (userId: number) => listPasskeys(db, userId),
    counts: (userIds: number[]) => countPasskeys(db, userIds),
  };
}

export type PasskeyService = ReturnType<typeof createPasskeyService>;

const KNOWN_TRANSPORTS = new Set(['ble', 'cable', 'hybrid', 'internal', 'nfc', 'smart-card', 'usb']);

function limitReached(): AppError {
  return new AppError(409, 'passkey_limit', `You have ${MAX_PASSKEYS} passkeys, the most an account may have. Remove one first.`);
}

/** The failure bookkeeping wants a LoginUser; it reads only the id and email of it. */
function loginUser(user: UserRecord) {
  return { ...user, password_hash: '', totp_secret: null, totp_last_step: null, must_change_password: false };
}

/** A counted failure says "invalid login or password"; a passkey's says the one passkey message (a lock stays 423). */
function asPasskeyRefusal(err: unknown): never {
  if (err instanceof AppError && err.code === 'invalid_credentials') {
    throw new AppError(401, 'passkey_refused', passkeyRefused().message, { extra: err.extra });
  }
  throw err;
}
