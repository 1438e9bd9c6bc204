import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import '../../src/validation/messages.ts';

/** The words of src/validation/messages.ts for each kind of refusal, singular and plural. */
describe('validation messages', () => {
  const messages = (schema: z.ZodType, value: unknown) =>
    (schema.safeParse(value).error?.issues ?? []).map((i) => `${i.path.join('.')}: ${i.message}`);

  it('says lengths, counts and ranges in words, one item or character in the singular', () => {
    const schema = z.object({
      list: z.array(z.string()).nonempty(), one: z.string().length(1), short: z.string().max(1), named: z.string().min(1),
      few: z.array(z.string()).max(1), many: z.array(z.string()).max(3), long: z.string().max(5), n: z.number().min(5), m: z.number().lt(3),
    });
    expect(messages(schema, { list: [], one: '', short: 'xx', named: '', few: ['a', 'b'], many: ['a', 'b', 'c', 'd'], long: 'xxxxxx', n: 1, m: 3 })).toStrictEqual([
      'list: At least 1 item', 'one: Must be exactly 1 character', 'short: At most 1 character', 'named: Must not be empty',
      'few: At most 1 item', 'many: At most 3 items', 'long: At most 5 characters', 'n: At least 5', 'm: Must be less than 3',
    ]);
  });

  it('names the choices, leaves out an empty one, and never shows a pattern', () => {
    expect(messages(z.object({ o: z.enum(['success', 'failure', '']) }), { o: 'x' })).toStrictEqual(['o: Must be one of: success, failure']);
    expect(messages(z.object({ p: z.string().regex(/^[a-z]+$/) }), { p: 'A1' })).toStrictEqual(['p: Not in the form expected here']);
    expect(messages(z.object({ e: z.email() }), { e: 'nope' })).toStrictEqual(['e: Must be an email address']);
    // a schema's own message still wins
    expect(messages(z.object({ q: z.string().min(1, 'enter a name') }), { q: '' })).toStrictEqual(['q: enter a name']);
  });
});
