/**
 * oidc-provider, loaded at the first OpenID Connect request rather than when the service starts:
 * its code is about 14 MB of V8 heap that a service nobody signs in to by OpenID Connect never
 * needs (docs/performance.md, "Memory at rest and under load"). What a start must check (the
 * signing keys) is checked without it (src/oidc/keys.ts, at start).
 */
type OidcLibrary = typeof import('oidc-provider');

let loaded: OidcLibrary | undefined;

export async function oidcLibrary(): Promise<OidcLibrary> {
  loaded ??= await import('oidc-provider');
  return loaded;
}

/** The library when it is loaded already, or undefined. */
export function oidcLibraryIfLoaded(): OidcLibrary | undefined {
  return loaded;
}
