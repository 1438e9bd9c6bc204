import { describe, expect, it } from 'vitest';
import { passwordPolicyProblem } from '../../src/auth/password-policy.ts';
import { TEST_PASSWORD } from '../helpers/factories.ts';

describe('the password policy', () => {
  it('accepts long, uncommon passwords, the test and demo ones included', () => {
    for (const ok of [TEST_PASSWORD, 'a long password', 'four unrelated words here', 'k7m2-x9qr-4hvt-wn3c', 'é'.repeat(36)]) {
      expect(passwordPolicyProblem(ok, 10, { username: 'alice', email: 'alice@example.com' }), ok).toBe(null);
    }
  });

  it('refuses, saying what to fix: too short, over 72 bytes, common, the username, the email address', () => {
    const owner = { username: 'alice.smith', email: 'Alice.Smith@example.com' };
    expect(passwordPolicyProblem('nine char', 10, owner)).toBe('The password must be at least 10 characters long.');
    expect(passwordPolicyProblem('x'.repeat(12), 16, owner)).toMatch(/at least 16 characters/);
    expect(passwordPolicyProblem('x'.repeat(73), 10, owner)).toMatch(/at most 72 bytes/);
    expect(passwordPolicyProblem('é'.repeat(37), 10, owner), '74 bytes in 37 characters').toMatch(/at most 72 bytes/);
    for (const common of ['password123', 'Password123', '1234567890', 'qwertyuiop', 'iloveyou123', 'pass word 1 2 3']) {
      expect(passwordPolicyProblem(common, 10, owner), common).toMatch(/most commonly used/);
    }
    expect(passwordPolicyProblem('ALICE.SMITH', 10, owner)).toBe('The password must not be the username.');
    expect(passwordPolicyProblem(' alice.smith@example.com ', 10, owner)).toBe('The password must not be the email address.');
  });

  it('refuses a password containing the username or the email local part, case-insensitively, parts of 3 characters or more', () => {
    const owner = { username: 'alice', email: 'a.smith@example.com' };
    expect(passwordPolicyProblem('alice1', 6, owner), 'refused, as a common password too').not.toBe(null);
    expect(passwordPolicyProblem('Alice.7291', 6, owner)).toBe('The password must not contain the username.');
    expect(passwordPolicyProblem('My ALICE password 9', 10, owner)).toBe('The password must not contain the username.');
    expect(passwordPolicyProblem('correct a.Smith battery', 10, owner)).toMatch(/must not contain the first part of the email address/);
    expect(passwordPolicyProblem('albatross trees', 10, { username: 'al', email: 'ab@example.com' }), 'two-letter parts do not count').toBe(null);
    expect(passwordPolicyProblem('fine fine fine', 10, { username: 'bob', email: 'bob@example.com' })).toBe(null);
  });
});
