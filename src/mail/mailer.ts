import { randomBytes } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import nodemailer, { type Transporter } from 'nodemailer';
import type { Logger } from 'pino';
import type { Config } from '../config.ts';

/** One message to one person. */
export interface MailMessage {
  to: string;
  subject: string;
  text: string;
}

/** Sends mail; `available` is false where nothing can be sent (production without SMTP_URL). */
export interface Mailer {
  readonly available: boolean;
  /** How mail leaves: through SMTP, or (development) to the log and DATA_DIR/mail/. */
  readonly mode: 'smtp' | 'log' | 'none';
  send(message: MailMessage): Promise<void>;
  close(): void;
}

/**
 * The mailer the configuration asks for. With SMTP_URL: nodemailer over SMTP (smtp:// with
 * STARTTLS when the server offers it, smtps:// for TLS from the start), from MAIL_FROM.
 * Without it, outside production, each message is written to the log and as an .eml file to
 * DATA_DIR/mail/ (and its text as a .txt beside it), so the reset flow works on a bare machine; the message holds a reset link,
 * which is why this never happens in production: there, nothing is available.
 */
export function createMailer(config: Pick<Config, 'SMTP_URL' | 'MAIL_FROM' | 'NODE_ENV' | 'DATA_DIR'>, logger: Logger): Mailer {
  if (config.SMTP_URL) {
    const transport: Transporter = nodemailer.createTransport(config.SMTP_URL);
    return {
      available: true,
      mode: 'smtp',
      async send(message) {
        await transport.sendMail({ from: config.MAIL_FROM, to: message.to, subject: message.subject, text: message.text });
      },
      close: () => transport.close(),
    };
  }
  if (config.NODE_ENV === 'production') {
    return {
      available: false,
      mode: 'none',
      async send() {
        throw new Error('no SMTP_URL: mail cannot be sent in production');
      },
      close() {},
    };
  }
  const render = nodemailer.createTransport({ streamTransport: true, buffer: true, newline: 'unix' });
  const dir = path.resolve(config.DATA_DIR, 'mail');
  return {
    available: true,
    mode: 'log',
    async send(message) {
      const info = await render.sendMail({ from: config.MAIL_FROM, to: message.to, subject: message.subject, text: message.text });
      const file = path.join(dir, `${new Date().toISOString().replace(/[:.]/g, '-')}-${randomBytes(3).toString('hex')}.eml`);
      await mkdir(dir, { recursive: true, mode: 0o700 });
      await writeFile(file, info.message as Buffer, { mode: 0o600 });
      // the body as plain text beside it: the .eml is quoted-printable, where a long link is
      // broken over lines with `=` and cannot be copied as it stands
      await writeFile(file.replace(/\.eml$/, '.txt'), `${message.text}\n`, { mode: 0o600 });
      // development only (see above): the text is shown so the link can be followed from the console
      logger.info({ mail: { to: message.to, subject: message.subject, file }, text: message.text }, 'mail not sent (no SMTP_URL): written to the log and DATA_DIR/mail/');
    },
    close() {},
  };
}
