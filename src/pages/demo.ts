import type { Request, RequestHandler } from 'express';
import { readDemoCredentials } from '../demo/credentials.ts';
import { DEMO_CLIENT_ID } from '../demo/seed.ts';
import { renderPage } from './render.ts';

/**
 * This instance's own address as the browser reached it (the socket's local end), so the
 * demo callback can call the API over HTTP like any client system, whatever HOST and PORT are.
 */
function selfUrl(req: Request): string {
  let host = req.socket.localAddress ?? '127.0.0.1';
  if (host.startsWith('::ffff:')) host = host.slice(7);
  if (host === '::' || host === '0.0.0.0') host = '127.0.0.1';
  return `http://${host.includes(':') ? `[${host}]` : host}:${req.socket.localPort}`;
}

function one(value: unknown, max: number): string | undefined {
  return typeof value === 'string' && value.length > 0 && value.length <= max ? value : undefined;
}

/**
 * GET /demo/callback: the demo client system's callback page. It does what a real client
 * does with the token in its URL: POST /api/sso/validate (with the demo client's id and
 * secret, over HTTP, server-side), then shows the user the answer names.
 */
export function demoCallback(deps: { dataDir: string }): RequestHandler {
  return async (req, res) => {
    const loginUrl = `/sso/login?client_id=${DEMO_CLIENT_ID}&state=demo`;
    const state = one(req.query.state, 1024) ?? null;
    const credentials = await readDemoCredentials(deps.dataDir);
    if (!credentials) {
      return renderPage(req, res, 'demo-callback', { outcome: 'unavailable', result: null, state, loginUrl }, { status: 404, csrf: false });
    }
    const token = one(req.query.token, 8192);
    let status = 200;
    let result: Record<string, unknown>;
    if (!token) {
      status = 400;
      result = { error: 'invalid_token', message: 'The callback URL carries no token' };
    } else {
      try {
        const answer = await fetch(`${selfUrl(req)}/api/sso/validate`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'user-agent': 'auth-service-demo-client' },
          body: JSON.stringify({ token, ...credentials }),
          signal: AbortSignal.timeout(5000),
          redirect: 'error',
        });
        result = (await answer.json().catch(() => ({ error: 'invalid_response', message: 'The service did not answer JSON' }))) as Record<string, unknown>;
        if (!answer.ok || result.valid !== true) status = 401;
      } catch {
        status = 502;
        result = { error: 'service_unreachable', message: 'The demo client could not reach the service to validate the token' };
      }
    }
    renderPage(req, res, 'demo-callback', { outcome: status === 200 ? 'valid' : 'invalid', result, state, loginUrl }, { status, csrf: false });
  };
}
