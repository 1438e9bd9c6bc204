import { type AuditEntry, auditRows } from '../audit/queries.ts';
import { createBatchLoader } from '../db/batch.ts';
import type { Db } from '../db/db.ts';
import { writeTogether } from '../db/statement.ts';
import { lockLiveSession } from '../auth/session-queries.ts';
import type { EventData, EventRecorder } from '../webhooks/events.ts';
import { type ConsumedToken, type ConsumeRequest, consumeTokens, tokenState } from './consume-queries.ts';
import {
  CLIENT_CHANGED, type IssueByUsernameRequest, issuedTokenRows, type IssuedTokenRow, type IssueOutcome, holdTokenOwners, issueTokensByUsername,
} from './queries.ts';

/**
 * What became of a token to record: recorded (with the user's groups as read then, for its
 * roles), or nothing written and why ('access_denied': the client's access rule refuses the user).
 */
export type IssueRecorded = { recorded: true; groups: string[] } | 'session_ended' | 'client_gone' | 'access_denied';

/** What one token issue writes: its row, its audit entry and its user.login event. */
export interface IssueRecord {
  token: IssuedTokenRow;
  audit: AuditEntry;
  event: EventData;
}

/**
 * The SSO tokens' repository: the hot paths' writes, batched below the service. Requests
 * arriving together share one statement (src/db/batch.ts).
 */
export function createTokenStore(db: Db, events: EventRecorder) {
  /** Validations arriving together consume their tokens in one statement. */
  const consumer = createBatchLoader<ConsumeRequest, ConsumedToken | null | typeof CLIENT_CHANGED>((requests) => consumeTokens(db, requests));
  /**
   * What recording issued tokens writes, in one statement: their rows, audit rows and
   * user.login events, each kind in one part of it. A token exists (and can be validated)
   * exactly when its audit row and event do.
   */
  const parts = (records: readonly IssueRecord[]) => [
    issuedTokenRows(records.map((r) => r.token)),
    auditRows(records.map((r) => r.audit)),
    events.part('user.login', records.map((r) => r.event)),
  ];
  /**
   * A token issued for a user already read (a browser's sign-in) is recorded while its user
   * and client are held (holdTokenOwners: a delete of either meanwhile waits, then deletes it)
   * and, when issued in a browser session, while that session is: a sign-out of it at the same
   * time either ends it first (no token) or waits and then invalidates the token with the
   * others, never misses it. Not batched: these are not the hot path.
   */
  const recordHeld = (record: IssueRecord): Promise<IssueRecorded> =>
    db.transaction(async (tx) => {
      const { sessionId, userId, clientId } = record.token;
      if (sessionId != null && !(await lockLiveSession(tx, sessionId, userId))) return 'session_ended';
      const owners = await holdTokenOwners(tx, userId, clientId);
      if (!owners.client) return 'client_gone';
      if (!owners.user) return 'session_ended';
      if (!owners.admitted) return 'access_denied';
      await writeTogether(tx, parts([record]));
      return { recorded: true, groups: owners.groups };
    });
  /**
   * Server-to-server issues arriving together find their users and record their tokens,
   * audit rows and user.login events in one statement (src/sso/queries.ts).
   */
  const issuer = createBatchLoader<IssueByUsernameRequest, IssueOutcome>(
    (requests) => issueTokensByUsername(db, requests, (source) => events.part('user.login', source)),
  );
  return {
    /**
     * Records one issued token with its audit row and event; resolves once committed. Nothing
     * is recorded when the browser session it was issued in has ended, or its user
     * ('session_ended'), or its client was deleted meanwhile ('client_gone'), or the client's
     * access rule does not admit the user ('access_denied').
     */
    recordIssue: recordHeld,
    /**
     * Records a token for the active user with this normalized username, with its audit row
     * and event, or (no such user, or inactive) the failure's audit row; resolves once committed.
     */
    issueByUsername: (request: IssueByUsernameRequest): Promise<IssueOutcome> => issuer.load(request),
    /**
     * Consumes a token for one validation: its user, null when nothing was consumed, or
     * CLIENT_CHANGED (nothing consumed) when the client's row is no longer the version given.
     */
    consume: (request: ConsumeRequest): Promise<ConsumedToken | null | typeof CLIENT_CHANGED> => consumer.load(request),
    /** Why a token could not be consumed. */
    state: (jti: string) => tokenState(db, jti),
  };
}
