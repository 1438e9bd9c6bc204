/**
 * The time a stop (SIGTERM, SIGINT) may take, and its parts. Orchestrators kill a process some
 * seconds after asking it to stop (Kubernetes: 30 s), so the whole fits in STOP_MS, and each
 * part ends before the next one's deadline: the drain of requests in flight, then the workers
 * that carry on what requests started (webhook attempts, reset mail), the webhook thread
 * inside their share.
 */

/** After this, server.ts exits with 1 whatever is left. */
export const STOP_MS = 25_000;
/** How long in-flight requests may take before their connections are cut (service.ts). */
export const DRAIN_MS = 15_000;
/** How long the workers after the requests may take (service.ts); the rest is left to the next start. */
export const AFTER_DRAIN_MS = 8_000;
/**
 * How long the webhook thread may take before it is terminated (dispatcher-thread.ts): inside
 * AFTER_DRAIN_MS, so that it is ended, not left running, when that deadline comes. An attempt
 * cut off is not recorded and is made again when its lease ends.
 */
export const THREAD_STOP_MS = AFTER_DRAIN_MS - 1_000;
