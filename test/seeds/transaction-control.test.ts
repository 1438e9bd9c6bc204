import { describe, expect, it } from 'vitest';
import { transactionControl } from '../../src/seeds/apply.ts';

/** The scan of a seed file for statements that would end the run's transaction, read as PostgreSQL reads SQL. */
describe('transactionControl', () => {
  it('sees a COMMIT after an escape string whose quote is escaped with a backslash', () => {
    expect(transactionControl("SELECT E'it\\'s'; COMMIT; SELECT 'x';")).toBe('COMMIT');
    expect(transactionControl("SELECT e'it\\'s'; commit;")).toBe('COMMIT');
    expect(transactionControl("SELECT E'a\\\\'; ROLLBACK; SELECT 'b';"), 'an escaped backslash before the closing quote').toBe('ROLLBACK');
    expect(transactionControl("SELECT E'a''b\\n'; ABORT;")).toBe('ABORT');
  });

  it('reads a plain, U& or prefixed string as standard: a backslash does not escape its quote', () => {
    expect(transactionControl("SELECT 'a\\'; COMMIT; SELECT 'b';")).toBe('COMMIT');
    expect(transactionControl("SELECT U&'d\\0061t\\'; COMMIT;")).toBe('COMMIT');
    expect(transactionControl("SELECT xE'it\\'; COMMIT;"), 'E only starts an escape string as a word of its own').toBe('COMMIT');
  });

  it('takes a $ inside a name as part of the name, not as a dollar quote', () => {
    expect(transactionControl('SELECT 1 AS x$$; COMMIT; SELECT 1 AS y$$;')).toBe('COMMIT');
    expect(transactionControl('SELECT $1$$; COMMIT; $$')).toBe(null); // $1 then a dollar quote, as PostgreSQL reads it
  });

  it('skips dollar-quoted bodies, quoted names, line comments and nested block comments', () => {
    expect(transactionControl('DO $body$ BEGIN PERFORM 1; COMMIT; END $body$; SELECT 1;')).toBe(null);
    expect(transactionControl('DO $$ BEGIN PERFORM 1; END $$;')).toBe(null);
    expect(transactionControl('SELECT 1 AS "x"";\nCOMMIT"; -- ; COMMIT\nSELECT 2;')).toBe(null);
    expect(transactionControl('/* outer /* inner */ ; COMMIT; */ SELECT 1;')).toBe(null);
    expect(transactionControl("SELECT E'\\''; /* ' */ BEGIN;")).toBe('BEGIN');
  });
});
