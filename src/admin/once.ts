import { hash, randomBytes } from 'node:crypto';
import type { Request } from 'express';

/** A fresh key naming one form as rendered, for its hidden `submission` field. */
export function newSubmissionKey(): string {
  return randomBytes(16).toString('base64url');
}

/** The shape of newSubmissionKey's keys. */
export const SUBMISSION_KEY = /^[A-Za-z0-9_-]{22}$/;

/**
 * Runs the work of a panel form once per submitted form: the same form sent again (a double
 * click or Enter pressed twice without JavaScript, which public/js/admin.js would stop) while
 * the first is under way or up to `ttlMs` after it gets the first one's answer instead of doing
 * it again. Where it matters: the answer is the only place a new client secret is ever shown,
 * and the browser shows only the last answer. A second grace rotation would be refused (409,
 * only one previous secret is kept) and a second registration too (the id is taken), so the
 * secret made by the first would be lost. The key is the session's id, the path (which names
 * the client), the form's `submission` field and a digest of what else the form says: the
 * same key with other fields (edited after Back) is another submission. A form without the
 * field (an older page, a script) runs every time. In
 * memory of this instance only, never in the session, which is a database row (secrets are
 * only ever stored hashed): behind a load balancer a browser session's panel requests must
 * all reach one instance, as deploy/nginx.conf sends them (by the session cookie), or a
 * double submit that reaches another instance runs again. A failed run is forgotten at once, so sending the form again retries it.
 *
 * Written by hand: idempotency-key middleware for Express stores whole responses for APIs and
 * needs a store of its own; this is one map over the panel's own handlers.
 */
export function oncePerSubmission<T>(ttlMs = 120_000, max = 1000) {
  const runs = new Map<string, Promise<T>>();
  return (req: Request, form: { submission?: string }, work: () => Promise<T>): Promise<T> => {
    const { submission, ...fields } = form;
    if (submission === undefined || !SUBMISSION_KEY.test(submission)) return work();
    const key = `${req.sessionID} ${req.originalUrl} ${submission} ${hash('sha256', JSON.stringify(fields), 'base64url')}`;
    const known = runs.get(key);
    if (known) return known;
    if (runs.size >= max) runs.delete(runs.keys().next().value!);
    const running = work();
    runs.set(key, running);
    const forget = () => {
      if (runs.get(key) === running) runs.delete(key);
    };
    running.then(() => setTimeout(forget, ttlMs).unref(), forget);
    return running;
  };
}
