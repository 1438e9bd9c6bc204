import { z } from 'zod';

/** POST /api/user/2fa/enable and /disable: a TOTP code (or, to disable, a recovery code). */
export const twoFactorCodeSchema = z.object({ code: z.string().trim().min(1).max(64) });

/** Turning two-step verification on: a code from the new key, and the current password again. */
export const twoFactorEnableSchema = twoFactorCodeSchema.extend({ current_password: z.string().min(1).max(1024) });
