import type { RequestHandler, Response } from 'express';

/*
 * JSON in and out for the fast path of the hot routes (src/routes/fast-path.ts), written by
 * hand because body-parser and Express's res.json spend more on a small machine-to-machine
 * request than the rest of the route together (docs/performance.md): content-type parsing
 * with several packages, a charset decoder stream, mime lookups for the answer's type. Each
 * handles only the plain, common case and hands everything else to Express's own code, so
 * the answers are those of the Express chain (test/http/fast-path.test.ts compares them).
 */

/** The content types read here; any other (other charsets, +json suffixes) goes to body-parser. */
// Spaces and tabs only: body-parser's content-type parser trims nothing else (a no-break space
// after the type makes it another type, whose body body-parser leaves unread).
const PLAIN_JSON = /^application\/json[ \t]*(?:;[ \t]*charset=(?:"utf-8"|utf-8)[ \t]*)?$/i;
const DECIMAL = /^\d{1,9}$/;

/**
 * A 400 as body-parser and raw-body raise it; the error handler maps it by `type`
 * (src/http/errors.ts): `entity.parse.failed` (invalid_json), `request.aborted`,
 * `request.size.invalid` (bad_request).
 */
function readError(type: string, err: Error, extra: Record<string, unknown> = {}): Error {
  return Object.assign(err, { status: 400, statusCode: 400, expose: true, type, ...extra });
}

/**
 * The JSON body of a request with a Content-Length of 1 to `limitBytes` bytes, an
 * `application/json` type (charset utf-8 or none) and no content or transfer encoding, read
 * and parsed as body-parser's `json({ strict: false })` would (a UTF-8 BOM dropped); every
 * other request goes to `bodyParser`, the app's own JSON parser.
 */
export function fastJsonBody(bodyParser: RequestHandler, limitBytes: number): RequestHandler {
  return (req, res, next) => {
    const h = req.headers;
    const declared = h['content-length'];
    if (
      h['transfer-encoding'] !== undefined || h['content-encoding'] !== undefined || declared === undefined
      || !DECIMAL.test(declared) || !PLAIN_JSON.test(h['content-type'] ?? '') || req.readableEnded || req.socket.destroyed
    ) {
      return bodyParser(req, res, next);
    }
    const length = Number(declared);
    if (length === 0 || length > limitBytes) return bodyParser(req, res, next);
    const chunks: Buffer[] = [];
    let received = 0;
    const onData = (chunk: Buffer) => {
      chunks.push(chunk);
      received += chunk.length;
    };
    const onAborted = () => {
      cleanup();
      next(readError('request.aborted', new Error('request aborted')));
    };
    const onEnd = () => {
      cleanup();
      if (received !== length) return next(readError('request.size.invalid', new Error('request size did not match content length')));
      let text = (chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, received)).toString('utf8');
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1); // as iconv-lite's decoder does
      if (text.length === 0) {
        req.body = {};
        return next();
      }
      try {
        req.body = JSON.parse(text);
      } catch (err) {
        return next(readError('entity.parse.failed', err instanceof Error ? err : new SyntaxError(String(err)), { body: text }));
      }
      next();
    };
    const cleanup = () => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('aborted', onAborted);
      req.off('error', onAborted);
    };
    req.on('data', onData);
    req.once('end', onEnd);
    req.once('aborted', onAborted);
    req.once('error', onAborted);
  };
}

/** Statuses whose answer has no body, which Express's send handles. */
const BODYLESS = new Set([204, 205, 304]);

/**
 * `res.json` for the fast path's answers: the same bytes and headers as Express's
 * (`Content-Type: application/json; charset=utf-8`, `Content-Length`), written directly.
 * Express's own `json` answers whenever it would do more than that: app settings that shape
 * the JSON or add an ETag, a HEAD request, a bodyless status, a Content-Type or
 * Transfer-Encoding already set, a value JSON cannot show. It is set on `lean`, an object
 * whose prototype chain leads to `expressResponse` (a new one by default).
 */
export function leanJsonResponse(
  expressResponse: Response,
  settings: { get(name: string): unknown },
  lean: Response = Object.create(expressResponse) as Response,
): Response {
  const expressJson = expressResponse.json;
  const plain = ['json replacer', 'json spaces', 'json escape', 'etag fn'].every((name) => !settings.get(name));
  lean.json = function json(this: Response, value: unknown) {
    const text = !plain || this.req.method === 'HEAD' || BODYLESS.has(this.statusCode)
      || this.hasHeader('content-type') || this.hasHeader('transfer-encoding') ? undefined : JSON.stringify(value);
    if (text === undefined) return expressJson.call(this, value);
    this.setHeader('Content-Type', 'application/json; charset=utf-8');
    this.setHeader('Content-Length', String(Buffer.byteLength(text)));
    this.end(text, 'utf8');
    return this;
  };
  return lean;
}
