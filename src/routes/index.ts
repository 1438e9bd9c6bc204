import { ACCESS_ADMIN_ROUTES } from '../admin/access-routes.ts';
import { ADMIN_API_ROUTES } from '../admin/api-routes.ts';
import { ACCESS_PANEL_ROUTES } from '../admin/panel-access.ts';
import { ADMIN_PANEL_ROUTES } from '../admin/panel-routes.ts';
import { ADMIN_PASSKEY_ROUTES } from '../admin/passkey-routes.ts';
import { AUTH_ROUTES } from '../auth/routes.ts';
import { HEALTH_ROUTES } from '../health/routes.ts';
import { LINK_ROUTES } from '../links/routes.ts';
import { OIDC_ROUTES } from '../oidc/routes.ts';
import { OPENAPI_ROUTES } from '../openapi/routes.ts';
import { ACCOUNT_PAGE_ROUTES } from '../pages/account-routes.ts';
import { OIDC_PAGE_ROUTES } from '../pages/oidc-routes.ts';
import { PAGE_ROUTES } from '../pages/routes.ts';
import { PASSKEY_ROUTES } from '../passkeys/routes.ts';
import { SSO_ROUTES } from '../sso/routes.ts';
import { USER_ROUTES } from '../users/routes.ts';
import { WEBHOOK_ROUTES } from '../webhooks/routes.ts';
import type { AnyRoute } from './declare.ts';

/**
 * Every endpoint of the service, each declared once in its capability's routes module. The
 * app mounts exactly these (src/routes/mount.ts) and the API reference documents exactly
 * these (src/openapi/document.ts).
 */
export const ROUTES: readonly AnyRoute[] = [
  ...HEALTH_ROUTES,
  ...OPENAPI_ROUTES,
  ...SSO_ROUTES,
  ...OIDC_ROUTES,
  ...LINK_ROUTES,
  ...AUTH_ROUTES,
  ...USER_ROUTES,
  ...WEBHOOK_ROUTES,
  ...PASSKEY_ROUTES,
  ...ADMIN_API_ROUTES,
  ...ADMIN_PASSKEY_ROUTES,
  ...ACCESS_ADMIN_ROUTES,
  ...PAGE_ROUTES,
  ...OIDC_PAGE_ROUTES,
  ...ACCOUNT_PAGE_ROUTES,
  ...ADMIN_PANEL_ROUTES,
  ...ACCESS_PANEL_ROUTES,
];
