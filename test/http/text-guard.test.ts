import { describe, expect, it } from 'vitest';
import { findUnstorableText } from '../../src/http/text-guard.ts';

describe('where a request holds text the database cannot store', () => {
  it('names the path to the first NUL or lone surrogate, in a value or in a key, at any depth', () => {
    expect(findUnstorableText('a\u0000b')).toBe('(value)');
    expect(findUnstorableText({ token: 'ab\ud800' })).toBe('token');
    expect(findUnstorableText({ user: { names: ['ok', 'x\u0000'] } })).toBe('user.names.1');
    expect(findUnstorableText({ a: 'fine', ['k\u0000']: 'v' })).toBe('k\u0000');
    expect(findUnstorableText({ outer: { ['in\udc00ner']: 1 } })).toBe('outer.in\udc00ner');
    expect(findUnstorableText({ first: 'x\u0000', second: 'y\u0000' }), 'the first one').toBe('first');
  });

  it('passes well-formed text, numbers, nulls and emoji (paired surrogates)', () => {
    expect(findUnstorableText({ token: 'eyJ.abc.def', n: 1, nothing: null, list: ['😀', { deep: 'é' }] })).toBe(null);
    expect(findUnstorableText(undefined)).toBe(null);
  });
});
