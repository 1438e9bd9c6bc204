/** A seed file the database refused (or that cannot run in one transaction); nothing was applied. */
export class SeedError extends Error {
  constructor(readonly file: string, message: string) {
    super(`${file}: ${message}`);
  }
}

/**
 * A seed file ended the run's transaction (a ROLLBACK the scan did not see): the run stopped
 * there, but what the file did after it may have been committed, so "nothing was applied"
 * cannot be said.
 */
export class SeedTransactionEndedError extends SeedError {}
