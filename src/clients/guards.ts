import type { ErrorRequestHandler, RequestHandler } from 'express';
import { AppError } from '../http/errors.ts';
import { clientIp } from '../http/client-ip.ts';
import { ClientChanged, type ClientRecord } from './client.ts';
import type { ClientService } from './service.ts';
import { isIpAllowed } from './allowlist.ts';
import type { FailureLimit } from '../http/failure-limit.ts';

/** The client authenticated earlier in the chain by `authenticateClient`. */
export function authenticatedClient(res: { locals: Record<string, unknown> }): ClientRecord {
  return res.locals.client as ClientRecord;
}

/** The credentials of the (validated) JSON body. */
const credentialsOf = (res: { locals: Record<string, unknown> }) => res.locals.input as { client_id: string; client_secret: string };

function tooManyFailures(retryAfter: number): AppError {
  return new AppError(429, 'rate_limited', 'Too many failed client authentications for this client from this address; try again later', {
    extra: { retry_after: retryAfter },
    headers: { 'Retry-After': String(retryAfter) },
  });
}

/**
 * Requires valid client_id and client_secret in the (validated) JSON body: 401 invalid_client.
 * Each failure counts toward `failures`, per caller address and client id: past its limit the
 * failures of that address at that client id are answered 429 rate_limited until the window
 * ends. Right credentials are never refused for failures.
 * With `kept`, a client record kept in memory may decide (src/clients/cache.ts): only for
 * the hot routes, whose statements write only while the client's row is the one the record
 * was read from and whose refusals `onCurrentClient` confirms (res.locals.clientConfirmed
 * says whether the record was read for this request).
 */
export function authenticateClient(clients: ClientService, failures: FailureLimit, options: { kept?: boolean } = {}): RequestHandler {
  const check = options.kept
    ? (id: string, secret: string) => clients.authenticateClientFast(id, secret)
    : async (id: string, secret: string) => ({ client: await clients.authenticateClient(id, secret), confirmed: true });
  return async (req, res, next) => {
    const body = credentialsOf(res);
    let checked: { client: ClientRecord; confirmed: boolean };
    try {
      checked = await check(body.client_id, body.client_secret);
    } catch (err) {
      if (!(err instanceof AppError && err.code === 'invalid_client')) throw err;
      // only a failure is limited, and only at the client id it guessed at: the right
      // credentials are served whatever other requests from this address did
      const address = clientIp(req);
      const wait = failures.refusedFor(address, body.client_id);
      if (wait > 0) throw tooManyFailures(wait);
      const refused = await failures.count(address, body.client_id);
      throw refused > 0 ? tooManyFailures(refused) : err;
    }
    res.locals.client = checked.client;
    res.locals.clientConfirmed = checked.confirmed;
    next();
  };
}

/** Whether the caller's address is on the client's allow list. */
function callerAllowed(req: Parameters<RequestHandler>[0], client: ClientRecord): boolean {
  return isIpAllowed(clientIp(req), client.allowed_ips); // clientIp is normalized
}

function ipNotAllowed(req: Parameters<RequestHandler>[0]): AppError {
  return new AppError(403, 'ip_not_allowed', `IP address ${clientIp(req)} is not allowed for this client`);
}

/**
 * Admits only callers inside the authenticated client's allow list: 403 ip_not_allowed.
 * Runs after authentication, so an unknown client_id learns nothing from a 403.
 */
export const requireAllowedIp: RequestHandler = (req, res, next) => {
  if (!callerAllowed(req, authenticatedClient(res))) throw ipNotAllowed(req);
  next();
};

/**
 * The error step of a hot client route (after its handler): a request decided on a client
 * record kept in memory is decided again on the client's current record before anything
 * but success is answered, so no refusal and no answer rests on a record a change has
 * overtaken. With the current record read: wrong credentials are 401 invalid_client, an
 * address off its allow list (`checkIp`) 403; a statement that found the client changed
 * (ClientChanged: it wrote nothing) is run again on the current record by `handler`; the
 * allow list's refusal on an overtaken record by `rest` (the steps after the allow list: the
 * limit and the handler); the handler's refusals that rest on the record (DECIDED_ON_RECORD)
 * by `handler`; any other refusal stands. A record read for this very
 * request is decided again only when a statement found it overtaken (the client changed
 * between the read and the statement). A request is decided again once: a ClientChanged
 * after that (the client keeps changing) is a 503 with Retry-After.
 */
export function onCurrentClient(
  clients: ClientService,
  options: { checkIp: boolean; rest: RequestHandler[]; handler: RequestHandler },
): ErrorRequestHandler {
  const changedMeanwhile = () => new AppError(503, 'service_unavailable', 'The client system was changed while this request was handled; try again', {
    headers: { 'Retry-After': '1' },
  });
  return async (err, req, res, next) => {
    // a record read for this request is decided again only when a statement found it overtaken since
    const decideAgain = res.locals.clientConfirmed === false || (err instanceof ClientChanged && res.locals.clientDecidedAgain !== true);
    if (!decideAgain) return next(err instanceof ClientChanged ? changedMeanwhile() : err);
    res.locals.clientDecidedAgain = true;
    const used = authenticatedClient(res);
    const { client_id: clientId, client_secret: secret } = credentialsOf(res);
    const current = await clients.authenticateClient(clientId, secret); // 401 on the current record
    res.locals.client = current;
    res.locals.clientConfirmed = true;
    if (options.checkIp && !callerAllowed(req, current)) throw ipNotAllowed(req);
    const overtaken = current.version !== used.version;
    const code = err instanceof AppError ? err.code : undefined;
    const rerun = err instanceof ClientChanged ? [options.handler]
      : overtaken && code === 'ip_not_allowed' ? options.rest
      : overtaken && code !== undefined && DECIDED_ON_RECORD.has(code) ? [options.handler]
      : null;
    if (!rerun) return next(err);
    runInOrder(rerun, req, res, (error) => next(error instanceof ClientChanged ? changedMeanwhile() : error));
  };
}

/**
 * The handler's refusals that rest on the client record's fields (the callback URL) and are
 * given before anything is written: the only ones run again when the record was overtaken.
 * Every other refusal stands once the current record admits the caller: the limit's (keyed by
 * the client's id, never by the record; a re-run would skip it), and the token's, which do not
 * depend on the record and have already been audited.
 */
const DECIDED_ON_RECORD = new Set(['client_misconfigured']);

/** Runs middleware one after another, handing an error (or the end) to `done`; one that answers ends it. */
function runInOrder(steps: readonly RequestHandler[], req: Parameters<RequestHandler>[0], res: Parameters<RequestHandler>[1], done: (err?: unknown) => void): void {
  const [first, ...rest] = steps;
  if (!first) return done();
  try {
    const ret = first(req, res, (err?: unknown) => (err ? done(err) : runInOrder(rest, req, res, done))) as unknown;
    if (ret && typeof (ret as Promise<unknown>).then === 'function') (ret as Promise<unknown>).then(undefined, (error: unknown) => done(error));
  } catch (error) {
    done(error);
  }
}
