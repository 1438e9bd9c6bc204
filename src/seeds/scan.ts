/**
 * Reading a seed file before it runs, as PostgreSQL's lexer reads it: the friendly refusals of
 * statements a seed run does not allow (applySeeds checks the database after each file too).
 */

/**
 * The first statement that would keep the clients table's triggers from firing: ALTER TABLE
 * ... DISABLE TRIGGER (pg_dump's --disable-triggers wraps its rows in it), or setting
 * session_replication_role (pg_restore's way). Read as transactionControl reads a file: the
 * friendly refusal before anything runs; applySeeds checks the triggers after each file too.
 */
export function triggerSwitch(sql: string): string | null {
  for (const statement of codeOf(sql).split(';')) {
    if (/\bdisable\s+trigger\b|\bsession_replication_role\b/i.test(statement)) return statement.trim().replace(/\s+/g, ' ').slice(0, 80);
  }
  // the setting's name in a string too: set_config('session_replication_role', 'replica', false)
  return /\bsession_replication_role\b/i.test(sql) ? 'session_replication_role' : null;
}

/**
 * The first statement that would end or nest the run's transaction (BEGIN, COMMIT, ...),
 * outside comments, quoted text and dollar-quoted bodies (a DO block's BEGIN ... END is fine).
 * A friendly refusal before anything runs; applySeeds does not rely on it alone.
 */
export function transactionControl(sql: string): string | null {
  for (const statement of codeOf(sql).split(';')) {
    const m = /^\s*(begin|commit|rollback|end|abort|start\s+transaction|savepoint|release|prepare\s+transaction)\b/i.exec(statement);
    if (m) return m[1].replace(/\s+/g, ' ').toUpperCase();
  }
  return null;
}

// PostgreSQL's lexer (scan.l): identifiers may hold digits and $ after the first character,
// and every byte above 0x7F counts as a letter
const IDENT_START = /[A-Za-z_\u0080-\uffff]/;
const IDENT_CONT = /[A-Za-z0-9_$\u0080-\uffff]/;
const DOLLAR_TAG = /\$(?:[A-Za-z_\u0080-\uffff][A-Za-z0-9_\u0080-\uffff]*)?\$/y;

/**
 * `sql` with comments, quoted text, quoted identifiers and dollar-quoted bodies blanked, read
 * as PostgreSQL reads them: a whole identifier is one token, so `E'...'` (an escape string,
 * where \' does not end it) is one only when the E stands alone, and `x$$` is a name, not the
 * start of a dollar quote; block comments nest. U&'...', B'...', N'...' end like plain strings.
 */
function codeOf(sql: string): string {
  let code = '';
  let i = 0;
  while (i < sql.length) {
    const c = sql[i];
    if (IDENT_START.test(c)) {
      let end = i + 1;
      while (end < sql.length && IDENT_CONT.test(sql[end])) end += 1;
      const escapeString = end === i + 1 && (c === 'E' || c === 'e') && sql[end] === "'";
      code += sql.slice(i, end) + (escapeString ? ' ' : '');
      i = escapeString ? quotedEnd(sql, end + 1, "'", true) : end;
      continue;
    }
    DOLLAR_TAG.lastIndex = i;
    const tag = c === '$' ? DOLLAR_TAG.exec(sql)?.[0] : undefined;
    let end: number | undefined;
    if (tag) {
      const close = sql.indexOf(tag, i + tag.length);
      end = close < 0 ? sql.length : close + tag.length;
    } else if (c === "'" || c === '"') {
      end = quotedEnd(sql, i + 1, c, false);
    } else if (sql.startsWith('--', i)) {
      const newline = sql.indexOf('\n', i);
      end = newline < 0 ? sql.length : newline;
    } else if (sql.startsWith('/*', i)) {
      end = blockCommentEnd(sql, i);
    }
    code += end === undefined ? c : ' ';
    i = end ?? i + 1;
  }
  return code;
}

/** Where text quoted by `quote` that starts at `from` ends: a doubled quote is one; with `backslash`, \x is one character. */
function quotedEnd(sql: string, from: number, quote: string, backslash: boolean): number {
  let i = from;
  while (i < sql.length) {
    if (backslash && sql[i] === '\\') i += 2;
    else if (sql[i] !== quote) i += 1;
    else if (sql[i + 1] === quote) i += 2;
    else return i + 1;
  }
  return sql.length;
}

/** Where the block comment opening at `from` ends, counting the comments nested in it. */
function blockCommentEnd(sql: string, from: number): number {
  let depth = 0;
  let i = from;
  while (i < sql.length) {
    if (sql.startsWith('/*', i)) {
      depth += 1;
      i += 2;
    } else if (sql.startsWith('*/', i)) {
      depth -= 1;
      i += 2;
      if (depth === 0) return i;
    } else {
      i += 1;
    }
  }
  return sql.length;
}
