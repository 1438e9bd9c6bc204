import { AppError } from '../http/errors.ts';
import type { ParsedArgs } from './command-types.ts';

/** The value options of `client create` and `client update` (src/cli/commands.ts). */

/** An option with a value, '' included (a value that clears); undefined when absent; a bare flag is a usage error. */
export function optionalText(args: ParsedArgs, name: string): string | undefined {
  const v = args.options[name];
  if (v === undefined) return undefined;
  if (typeof v !== 'string') throw new AppError(400, 'usage', `--${name} needs a value ('' for none)`);
  return v;
}

/** The OpenID Connect options of client create/update: a list given replaces the old one; "" removes the back-channel URI. */
export function oidcOptions(args: ParsedArgs) {
  const o = args.options;
  const urls = (v: ParsedArgs['options'][string]) => (v === undefined ? undefined : list(v));
  const bcl = o['backchannel-logout-uri'];
  return {
    redirectUris: urls(o['redirect-uri']),
    postLogoutRedirectUris: urls(o['post-logout-redirect-uri']),
    backchannelLogoutUri: typeof bcl === 'string' ? (bcl.trim() === '' ? null : bcl.trim()) : undefined,
  };
}

export function list(v: ParsedArgs['options'][string]): string[] {
  return Array.isArray(v) ? v : typeof v === 'string' ? [v] : [];
}
