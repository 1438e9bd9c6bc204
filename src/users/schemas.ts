import { z } from 'zod';

/** POST /api/user/2fa/enable and /disable: a TOTP code (or, to disable, a recovery code). */
export const twoFactorCodeSchema = z.object({ code: z.string().trim().min(1).max(64) });
