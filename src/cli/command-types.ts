// The shapes every command module shares (src/cli/commands.ts, src/cli/access-commands.ts).

/** A command's result: the JSON document for --json, and lines for people. */
export interface CommandResult {
  json: unknown;
  text: string;
  /** A note for the person at the terminal, on stderr (so --json output stays one document). */
  notice?: string;
}

/** Parsed command line: positional words and options (repeatable ones as arrays). */
export interface ParsedArgs {
  words: string[];
  options: Record<string, string | boolean | string[] | undefined>;
}
