import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';

/** One message the test SMTP server received. */
export interface ReceivedMail {
  from: string;
  to: string[];
  raw: string;
  /** The raw message with quoted-printable soft breaks and escapes undone (enough to read a link). */
  text: string;
}

/** Undoes quoted-printable encoding (nodemailer's choice for long ASCII lines). */
function decodeQuotedPrintable(raw: string): string {
  return raw.replace(/=\r?\n/g, '').replace(/=([0-9A-F]{2})/g, (_m, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)));
}

/**
 * A real SMTP server on a loopback port (the `smtp-server` package), keeping every message.
 * `url` goes into SMTP_URL. No TLS, no authentication: the service's nodemailer transport
 * talks plain SMTP to it. With `holdUntil`, each message is answered only once it resolves.
 */
export async function startSmtpServer(options: { holdUntil?: Promise<void> } = {}) {
  const messages: ReceivedMail[] = [];
  let accepted = 0;
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS', 'AUTH'],
    logger: false,
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        const raw = Buffer.concat(chunks).toString('utf8');
        messages.push({
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
          to: session.envelope.rcptTo.map((r) => r.address),
          raw,
          text: decodeQuotedPrintable(raw),
        });
        // a held server has the message but does not answer for it yet
        void (options.holdUntil ?? Promise.resolve()).then(() => {
          accepted++;
          callback();
        });
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.server.address() as AddressInfo;
  return {
    url: `smtp://127.0.0.1:${port}`,
    messages,
    /** Messages the server has answered 250 for. */
    get accepted() {
      return accepted;
    },
    /** The messages to `address` so far. */
    to(address: string): ReceivedMail[] {
      return messages.filter((m) => m.to.includes(address));
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/**
 * Polls `check` until it returns something other than undefined, for at most `ms`; the
 * background work of a request (mail) finishes shortly after its answer.
 */
export async function eventually<T>(check: () => T | undefined | Promise<T | undefined>, what: string, ms = 10_000): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** The reset token of the (last) reset link in a message. */
export function resetToken(mail: ReceivedMail): string {
  const links = [...mail.text.matchAll(/\/reset-password\?token=([A-Za-z0-9_-]+)/g)];
  if (links.length === 0) throw new Error('no reset link in the message');
  return links[links.length - 1][1];
}
