import { z } from 'zod';

const credential = z.string().min(1).max(256);

export const issueTokenSchema = z.object({
  client_id: credential,
  client_secret: credential,
  username: z.string().min(1).max(254),
  /** The end user's IP as the client saw it; the token is bound to it. Default: the caller's IP. */
  ip_address: z.union([z.ipv4(), z.ipv6()]).optional(),
});

export const validateTokenSchema = z.object({
  token: z.string().min(1).max(8192),
  client_id: credential,
  client_secret: credential,
  /** When given, must equal the token's ip_address claim. */
  ip_address: z.union([z.ipv4(), z.ipv6()]).optional(),
});

/** POST /api/sso/logout: a token this client received for the user who signs out (expired or used is fine). */
export const logoutTokenSchema = z.object({
  token: z.string().min(1).max(8192),
  client_id: credential,
  client_secret: credential,
});
