/**
 * The practical limit of this service's validation design on this machine, for `npm run bench`:
 * plain node:http and pg, no framework. Each POST /validate {client_id, token} consumes one
 * single-use token with the service's own statement (consumeTokens, src/sso/consume-queries.ts: the
 * token marked used and its audit row written), batched as the service batches it
 * (src/db/batch.ts: one statement out at a time, shared by every validation that arrived
 * meanwhile), and answers a small JSON body. It does only
 * that: no client credentials, no signature, no rate limit, no log line, so the service can
 * only come close to it. Here `token` is the token's jti (the rows are written by bench/run.ts).
 *
 * DATABASE_URL names the service's database.
 */
import http from 'node:http';
import { createBatchLoader } from '../src/db/batch.ts';
import { openPostgres } from '../src/db/postgres.ts';
import { consumeTokens, type ConsumeRequest } from '../src/sso/consume-queries.ts';
import { CLIENT_CHANGED } from '../src/sso/queries.ts';

const db = openPostgres(process.env.DATABASE_URL!);
const consumer = createBatchLoader((requests: readonly ConsumeRequest[]) => consumeTokens(db, requests));

function answer(res: http.ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text), 'cache-control': 'no-store' });
  res.end(text);
}

const server = http.createServer((req, res) => {
  if (req.method === 'GET') return answer(res, 200, { status: 'ok' });
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    let body: { client_id?: unknown; token?: unknown };
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch {
      return answer(res, 400, { error: 'invalid_json' });
    }
    if (typeof body.token !== 'string' || typeof body.client_id !== 'string') return answer(res, 400, { error: 'invalid_request' });
    consumer.load({ jti: body.token, clientId: body.client_id, ipAddress: req.socket.remoteAddress ?? '', userAgent: req.headers['user-agent'] ?? null }).then(
      (user) => (user && user !== CLIENT_CHANGED // no client version given: never CLIENT_CHANGED
        ? answer(res, 200, { valid: true, user: { id: user.user_id, username: user.username, email: user.email }, expires_at: user.expires_at })
        : answer(res, 401, { valid: false, error: 'invalid_token' })),
      () => answer(res, 500, { error: 'internal' }),
    );
  });
});
server.keepAliveTimeout = 60_000;
server.listen(Number(process.env.PORT ?? 0), '127.0.0.1');
process.on('SIGTERM', () => {
  server.close();
  server.closeAllConnections();
  void db.close().then(() => process.exit(0));
});
