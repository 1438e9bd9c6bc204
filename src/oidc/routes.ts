import { z } from 'zod';
import { route } from '../routes/declare.ts';

/** The discovery document (OpenID Connect Discovery 1.0), as far as this reference describes it. */
const discovery = z.looseObject({
  issuer: z.string().describe('PUBLIC_URL'),
  authorization_endpoint: z.string(),
  token_endpoint: z.string(),
  userinfo_endpoint: z.string(),
  jwks_uri: z.string(),
  introspection_endpoint: z.string(),
  revocation_endpoint: z.string(),
  end_session_endpoint: z.string(),
  code_challenge_methods_supported: z.array(z.string()),
  grant_types_supported: z.array(z.string()),
  id_token_signing_alg_values_supported: z.array(z.string()),
}).meta({ id: 'OpenIdConfiguration' });

/**
 * The OpenID Connect provider's endpoints are oidc-provider's, mounted at /oidc (src/app.ts)
 * and listed by this document; the issuer is PUBLIC_URL, so the document is served where the
 * issuer says, at the root (and at /oidc/.well-known/openid-configuration).
 */
export const OIDC_ROUTES = [
  route({
    method: 'get', path: '/.well-known/openid-configuration', tag: 'OpenID Connect', access: 'public', limit: 'none', sessionless: true,
    summary: 'OpenID Connect discovery document',
    description: 'Names the authorization, token, userinfo, JWKS, introspection, revocation and end-session endpoints (all under `/oidc/`, served by oidc-provider) and what they support. See docs/openid-connect.md.',
    responses: {
      200: {
        description: 'The discovery document', schema: discovery,
        example: {
          issuer: 'https://auth.example.com', authorization_endpoint: 'https://auth.example.com/oidc/auth', token_endpoint: 'https://auth.example.com/oidc/token',
          userinfo_endpoint: 'https://auth.example.com/oidc/me', jwks_uri: 'https://auth.example.com/oidc/jwks',
          introspection_endpoint: 'https://auth.example.com/oidc/token/introspection', revocation_endpoint: 'https://auth.example.com/oidc/token/revocation',
          end_session_endpoint: 'https://auth.example.com/oidc/session/end', code_challenge_methods_supported: ['S256'],
          grant_types_supported: ['authorization_code', 'refresh_token'], id_token_signing_alg_values_supported: ['RS256', 'ES256'],
        },
      },
    },
    handle: ({ oidc }) => ({ req, res }) => {
      // as if asked at the mount: oidc-provider takes its mount path from originalUrl minus url
      req.originalUrl = '/oidc/.well-known/openid-configuration';
      req.url = '/.well-known/openid-configuration';
      return oidc.handle(req, res);
    },
  }),
];
