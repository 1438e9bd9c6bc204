import { z } from 'zod';

/*
 * Readable messages for every schema that does not give its own, process-wide (zod's own
 * global hook): request bodies and query strings, the pages' forms, and the configuration.
 * zod's defaults are written for developers ("Too big: expected string to have <=200
 * characters", "Invalid input: expected string, received array", "Invalid string: must
 * match pattern /^…$/") and reached the pages and the startup error as they were. A message a
 * schema sets itself still wins. Imported for its effect by src/config.ts and
 * src/http/validate.ts, so it is in force before anything is parsed.
 */

/** What a value of each JSON type is called in a message. */
function kindOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'object') return 'an object';
  return typeof value === 'number' || typeof value === 'boolean' ? `a ${typeof value}` : typeof value === 'string' ? 'text' : typeof value;
}

const EXPECTED: Record<string, string> = { string: 'text', number: 'a number', int: 'a whole number', boolean: 'true or false', array: 'a list', object: 'an object' };

/** "characters" for text, "items" for a list (one of each in the singular), nothing for a number. */
function unit(origin: string, count: unknown): string {
  const one = Number(count) === 1;
  if (origin === 'string') return one ? ' character' : ' characters';
  if (origin === 'array' || origin === 'set') return one ? ' item' : ' items';
  return '';
}

const FORMATS: Record<string, string> = { email: 'an email address', url: 'a URL', uuid: 'a UUID', datetime: 'a date and time (ISO 8601)', date: 'a date (YYYY-MM-DD)' };

/** The message for one issue, or undefined for zod's own. */
export function plainMessage(issue: z.core.$ZodRawIssue): string | undefined {
  switch (issue.code) {
    case 'invalid_type': {
      if (issue.input === undefined) return 'Required';
      if (Array.isArray(issue.input) && issue.expected !== 'array') return 'Give one value, not a list';
      const wanted = `Must be ${EXPECTED[issue.expected] ?? issue.expected}`;
      // a number that is not the number wanted (NaN from a coerced "abc", 1.5 for a whole number)
      return typeof issue.input === 'number' && (issue.expected === 'number' || issue.expected === 'int') ? wanted : `${wanted}, not ${kindOf(issue.input)}`;
    }
    case 'too_big': {
      const limit = `${issue.maximum}${unit(issue.origin, issue.maximum)}`;
      if (issue.exact) return `Must be exactly ${limit}`;
      return issue.inclusive === false ? `Must be less than ${limit}` : `At most ${limit}`;
    }
    case 'too_small': {
      if (issue.origin === 'string' && Number(issue.minimum) === 1 && issue.inclusive !== false && !issue.exact) return 'Must not be empty';
      const limit = `${issue.minimum}${unit(issue.origin, issue.minimum)}`;
      if (issue.exact) return `Must be exactly ${limit}`;
      return issue.inclusive === false ? `Must be more than ${limit}` : `At least ${limit}`;
    }
    case 'invalid_value': {
      // an empty choice ("any", in a filter) is left out of the list
      const values = issue.values.filter((v) => v !== '').map(String);
      return values.length > 0 && values.length <= 12 ? `Must be one of: ${values.join(', ')}` : 'Not one of the allowed values';
    }
    case 'invalid_format':
      // the pattern itself says nothing to a person
      return FORMATS[issue.format] ? `Must be ${FORMATS[issue.format]}` : 'Not in the form expected here';
    default:
      return undefined;
  }
}

z.config({ customError: plainMessage });
