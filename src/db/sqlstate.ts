/**
 * SQLSTATEs that mean "the database cannot serve this now", not "this statement is wrong":
 * class 08 (connection exception), 53 (insufficient resources: too many connections, disk
 * full), 57P01-57P05 (the server shuts down, is starting, or dropped the session), 57014
 * (statement cancelled: a timeout), 25006 (a read-only standby after a failover). Such a
 * failure is an outage (src/http/unavailable.ts) and never the statement's own refusal
 * (src/db/batch.ts).
 */
export function isOutageSqlState(code: string): boolean {
  return /^08[0-9A-Z]{3}$/.test(code) || /^53[0-9A-Z]{3}$/.test(code) || /^57P0[1-5]$/.test(code) || code === '57014' || code === '25006';
}

/** The form of a SQLSTATE: five digits or capital letters. */
export const SQLSTATE = /^[0-9A-Z]{5}$/;
