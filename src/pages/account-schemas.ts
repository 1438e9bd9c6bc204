import { z } from 'zod';

const password = (what: string) => z.string().min(1, `Enter ${what}`).max(1024);

/** /account/password: the current password, the new one twice. */
export const changePasswordFormSchema = z.object({
  current_password: password('your current password'),
  new_password: password('a new password'),
  confirm_password: z.string().max(1024),
});

/** /account/sessions/end: one session, by the handle the page shows. */
export const endSessionFormSchema = z.object({ session: z.string().min(1).max(64) });

/** /forgot-password: a username or email address. */
export const forgotFormSchema = z.object({ login: z.string().trim().min(1, 'Enter your username or email address').max(254) });

/** /reset-password: the token from the link and the new password twice. */
export const resetFormSchema = z.object({
  token: z.string().min(1).max(200),
  new_password: password('a new password'),
  confirm_password: z.string().max(1024),
});

/** GET /reset-password?token= */
export const resetQuerySchema = z.object({ token: z.string().max(200).optional() });
