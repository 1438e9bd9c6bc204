import { z } from 'zod';

/** Sizes generous for any real name/password, small enough that nothing big reaches bcrypt. */
const loginName = z.string().min(1).max(254);
const password = z.string().min(1).max(1024);
const totp = z.string().max(64).optional();

/** POST /api/auth/login */
export const sessionLoginSchema = z.object({ login: loginName, password, totp });

/** POST /api/login */
export const tokenLoginSchema = z.object({ username: loginName, password, totp });
