import http from 'node:http';
import net from 'node:net';

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

/** One HTTP request on a fresh connection (so localAddress always applies). */
export function request<T = any>(url: string, options: RequestOptions = {}): Promise<HttpResponse<T>> {
  const headers: Record<string, string> = { ...options.headers };
  let payload: Buffer | undefined;
  if (options.body !== undefined) {
    if (typeof options.body === 'string' || Buffer.isBuffer(options.body)) {
      payload = Buffer.from(options.body as string);
    } else {
      payload = Buffer.from(JSON.stringify(options.body));
      headers['content-type'] ??= 'application/json';
    }
    headers['content-length'] = String(payload.length);
  }
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: options.method ?? (payload ? 'POST' : 'GET'), headers, localAddress: options.localAddress, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let body: any;
        try {
          body = JSON.parse(text);
        } catch {
          body = undefined;
        }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text, body });
      });
    });
    req.on('error', reject);
    if (payload) req.write(payload);
    req.end();
  });
}

/** Request helpers bound to a base URL. */
export function client(baseUrl: string, defaults: Omit<RequestOptions, 'body' | 'method'> = {}) {
  const merge = (o: RequestOptions) => ({ ...defaults, ...o, headers: { ...defaults.headers, ...o.headers } });
  return {
    get: <T = any>(path: string, o: RequestOptions = {}) => request<T>(baseUrl + path, merge({ ...o, method: 'GET' })),
    /**
     * POST; without a body it still says `content-type: application/json`, as a same-origin
     * script calling the API does (a cookie-carrying POST without it is refused as CSRF).
     * Use `request()` to send exactly what a test needs.
     */
    post: <T = any>(path: string, body?: unknown, o: RequestOptions = {}) =>
      request<T>(baseUrl + path, merge({ ...o, method: 'POST', body, headers: body === undefined ? { 'content-type': 'application/json', ...o.headers } : o.headers })),
    patch: <T = any>(path: string, body?: unknown, o: RequestOptions = {}) => request<T>(baseUrl + path, merge({ ...o, method: 'PATCH', body })),
    delete: <T = any>(path: string, o: RequestOptions = {}) => request<T>(baseUrl + path, merge({ ...o, method: 'DELETE' })),
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
