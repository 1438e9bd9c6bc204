import http from 'node:http';
import net from 'node:net';
import supertest from 'supertest';
import { checkAnswer } from './contract.ts';

/**
 * An HTTP Basic authorization header for a client's credentials, each form-encoded first as
 * RFC 6749 section 2.3.1 asks (client_secret_basic).
 */
export function basicAuth(id: string, secret: string): string {
  return `Basic ${Buffer.from(`${encodeURIComponent(id)}:${encodeURIComponent(secret)}`).toString('base64')}`;
}

export interface HttpResponse<T = any> {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
  /** The parsed JSON body, or undefined when the body is not JSON. */
  body: T;
}

export interface RequestOptions {
  method?: string;
  /** An object is sent as JSON; a string or Buffer is sent as is. */
  body?: unknown;
  headers?: Record<string, string>;
  /** Source address of the connection, e.g. 127.0.0.2 to be a second caller on loopback. */
  localAddress?: string;
}

/**
 * What requests go to: the Express app in-process (supertest serves it on an ephemeral
 * loopback port for each request), or the base URL of a real server (a child process).
 */
export type Target = http.RequestListener | string;

function encode(options: RequestOptions): { headers: Record<string, string>; payload?: Buffer } {
  const headers: Record<string, string> = { ...options.headers };
  if (options.body === undefined) return { headers };
  if (typeof options.body === 'string' || Buffer.isBuffer(options.body)) return { headers, payload: Buffer.from(options.body as string) };
  headers['content-type'] ??= 'application/json';
  return { headers, payload: Buffer.from(JSON.stringify(options.body)) };
}

function toResponse(status: number, headers: http.IncomingHttpHeaders, raw: Buffer): HttpResponse {
  const text = raw.toString('utf8');
  let body: any;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  return { status, headers, text, body };
}

/** Every answer is held to the API reference (test/helpers/contract.ts) before the test sees it. */
function checked(method: string, path: string, response: HttpResponse): HttpResponse {
  checkAnswer(method, path, response.status, response.headers, response.text);
  return response;
}

/**
 * One request through supertest, exactly as given: no redirect followed, every status
 * resolved (the test looks at it), the body read raw whatever its type.
 */
async function viaSupertest(app: http.RequestListener, path: string, options: RequestOptions): Promise<HttpResponse> {
  const { headers, payload } = encode(options);
  const method = (options.method ?? (payload ? 'POST' : 'GET')).toLowerCase() as 'get';
  // The payload is already bytes: superagent must not serialize it again (it would turn a
  // Buffer into JSON), nor guess a content type the test did not give.
  let req = supertest(app)[method](path).redirects(0).ok(() => true).buffer(true).serialize((data) => data)
    .parse((res, done) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => done(null, Buffer.concat(chunks)));
    });
  // A fresh agent per request, so the connection's source address is the one asked for.
  if (options.localAddress) req = req.agent(new http.Agent({ localAddress: options.localAddress, keepAlive: false }));
  for (const [name, value] of Object.entries(headers)) if (value !== undefined) req = req.set(name, value);
  if (payload) req = req.send(payload);
  const res = await req;
  return checked(method, path, toResponse(res.status, res.headers, res.body as Buffer));
}

/** One request to a real server by URL, on a fresh connection (so localAddress always applies). */
function viaUrl(url: string, options: RequestOptions): Promise<HttpResponse> {
  const { headers, payload } = encode(options);
  if (payload) headers['content-length'] = String(payload.length);
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: options.method ?? (payload ? 'POST' : 'GET'), headers, localAddress: options.localAddress, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        try {
          resolve(checked(req.method, new URL(url).pathname, toResponse(res.statusCode ?? 0, res.headers, Buffer.concat(chunks))));
        } catch (err) {
          reject(err);
        }
      });
    });
    req.on('error', reject);
    if (payload) req.write(payload);
    req.end();
  });
}

/** One HTTP request to `path` of a target (the app in-process, or a server's base URL). */
export function send<T = any>(target: Target, path: string, options: RequestOptions = {}): Promise<HttpResponse<T>> {
  return typeof target === 'string' ? viaUrl(target + path, options) : viaSupertest(target, path, options);
}

/** One HTTP request to a whole URL (a real server), on a fresh connection. */
export function request<T = any>(url: string, options: RequestOptions = {}): Promise<HttpResponse<T>> {
  return viaUrl(url, options);
}

/** Request helpers bound to a target: the app in-process, or a server's base URL. */
export function client(target: Target, defaults: Omit<RequestOptions, 'body' | 'method'> = {}) {
  const merge = (o: RequestOptions) => ({ ...defaults, ...o, headers: { ...defaults.headers, ...o.headers } });
  return {
    get: <T = any>(path: string, o: RequestOptions = {}) => send<T>(target, path, merge({ ...o, method: 'GET' })),
    /**
     * POST; without a body it still says `content-type: application/json`, as a same-origin
     * script calling the API does (a cookie-carrying POST without it is refused as CSRF).
     * Use `send()` to send exactly what a test needs.
     */
    post: <T = any>(path: string, body?: unknown, o: RequestOptions = {}) =>
      send<T>(target, path, merge({ ...o, method: 'POST', body, headers: body === undefined ? { 'content-type': 'application/json', ...o.headers } : o.headers })),
    patch: <T = any>(path: string, body?: unknown, o: RequestOptions = {}) => send<T>(target, path, merge({ ...o, method: 'PATCH', body })),
    delete: <T = any>(path: string, o: RequestOptions = {}) => send<T>(target, path, merge({ ...o, method: 'DELETE' })),
    /** Any method, exactly as given. */
    send: <T = any>(path: string, o: RequestOptions = {}) => send<T>(target, path, merge(o)),
  };
}

/** A port nobody listens on right now. */
export async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const { port } = s.address() as net.AddressInfo;
  await new Promise((resolve) => s.close(resolve));
  return port;
}
