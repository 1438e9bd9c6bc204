import { z } from 'zod';

/** Sizes generous for any real name/password, small enough that nothing big reaches bcrypt. */
const loginName = z.string().min(1).max(254);
const password = z.string().min(1).max(1024);
const totp = z.string().max(64).optional();

/** POST /api/auth/login */
export const sessionLoginSchema = z.object({ login: loginName, password, totp });

/** POST /api/login */
export const tokenLoginSchema = z.object({ username: loginName, password, totp });

/** POST /api/auth/password/forgot: a username or an email address. */
export const forgotPasswordSchema = z.object({ login: loginName });

/** POST /api/auth/password/reset: the token from the emailed link and the new password. */
export const resetPasswordSchema = z.object({ token: z.string().min(1).max(200), new_password: password });

/**
 * POST /api/user/password. A signed-in caller (session or bearer) gives the current and the
 * new password; a caller whose sign-in answered password_change_required adds `login` (and
 * `totp` for two-factor users) instead of signing in.
 */
export const changePasswordSchema = z.object({
  current_password: password,
  new_password: password,
  login: loginName.optional(),
  totp,
});
