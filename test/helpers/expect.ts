import { expect } from 'vitest';

/** What `fn` throws (for `expect(thrownBy(fn)).toSatisfy(...)`); fails when it throws nothing. */
export function thrownBy(fn: () => unknown): unknown {
  try {
    fn();
  } catch (err) {
    return err;
  }
  throw new Error('expected the call to throw, and it returned');
}

/** The value `promise` rejects with, checked to be a `type`; fails when it resolves. */
export async function rejectionOf<E>(promise: Promise<unknown>, type: abstract new (...args: any[]) => E): Promise<E> {
  const outcome = await promise.then(() => undefined, (err: unknown) => ({ err }));
  expect(outcome, 'the call was refused').toBeDefined();
  expect(outcome!.err).toBeInstanceOf(type);
  return outcome!.err as E;
}
