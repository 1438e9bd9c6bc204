import http, { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';

/** The headers every error answer of the service carries (as errorHandler's JSON does). */
const HEADERS = {
  'Content-Type': 'application/json; charset=utf-8',
  'Cache-Control': 'no-store',
  'X-Content-Type-Options': 'nosniff',
};

function body(error: string, message: string): string {
  return JSON.stringify({ error, message });
}

/** What Node's HTTP parser could not take, as the service words it. */
function answerFor(code: string | undefined): { status: number; error: string; message: string } {
  if (code === 'HPE_HEADER_OVERFLOW') return { status: 431, error: 'headers_too_large', message: 'The request headers are too large' };
  if (code === 'HPE_CHUNK_EXTENSIONS_OVERFLOW') return { status: 413, error: 'payload_too_large', message: 'The chunk extensions are too large' };
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') return { status: 408, error: 'request_timeout', message: 'The request took too long to arrive' };
  return { status: 400, error: 'bad_request', message: 'The request is not valid HTTP' };
}

/**
 * Node answers what its parser refuses before Express sees it (headers over the size limit
 * 431, chunk extensions over it 413, a malformed request line, header, Content-Length or
 * chunk 400, a request that never finishes arriving 408) with a bare status line, and an
 * `Expect` other than 100-continue with 417: the only answers of the service without a JSON
 * body. These handlers give them
 * one, in the same shape as every other error. No library does this: it is the socket-level
 * `clientError` hook of node:http, with the decisions Node's default makes (which status,
 * answering only while nothing of a response has gone out on that socket, and closing the
 * socket afterwards: the server's timeouts no longer watch it, so a peer that keeps its side
 * open would hold it for ever).
 */
export function answerUnparsedRequests(server: http.Server): void {
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    const inFlight = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
    if (err.code === 'ECONNRESET' || !socket.writable || inFlight?.headersSent) {
      socket.destroy();
      return;
    }
    const { status, error, message } = answerFor(err.code);
    const text = body(error, message);
    const head = Object.entries({ ...HEADERS, 'Content-Length': String(Buffer.byteLength(text)), Connection: 'close' })
      .map(([name, value]) => `${name}: ${value}\r\n`).join('');
    socket.end(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\n${head}\r\n${text}`, () => socket.destroy());
  });
  server.on('checkExpectation', (_req: http.IncomingMessage, res: http.ServerResponse) => {
    const text = body('expectation_failed', 'Only "Expect: 100-continue" is understood');
    res.writeHead(417, { ...HEADERS, 'Content-Length': Buffer.byteLength(text), Connection: 'close' });
    res.end(text);
  });
}
