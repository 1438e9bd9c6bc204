/** What `fn` throws (for `expect(thrownBy(fn)).toSatisfy(...)`); fails when it throws nothing. */
export function thrownBy(fn: () => unknown): unknown {
  try {
    fn();
  } catch (err) {
    return err;
  }
  throw new Error('expected the call to throw, and it returned');
}
