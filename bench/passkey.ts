/**
 * npm run bench:passkey: passkey sign-ins per second beside the signature checks they are
 * built on, measured in one run on this machine.
 *
 * The service runs as it is deployed (dist/server.js after `npm run build`; BENCH_FROM_SOURCE=1
 * runs src/server.ts through tsx) on a fresh PostgreSQL database. PASSKEY_BENCH_IN_FLIGHT users
 * (default 8, made by the admin command line) each get one passkey of a software authenticator
 * of this process: an ES256 (P-256) key pair from node:crypto, its row written into `passkeys`
 * as a registration stores it (the credential id base64url, the public key as COSE_Key bytes,
 * the counter 0). A sign-in is what a browser does: POST /api/passkeys/authentication/options,
 * then POST /api/passkeys/authentication/verify with an assertion of that challenge made here
 * (authenticatorData = SHA-256(RP ID) ‖ flags UP|UV ‖ the counter, 4 bytes big-endian, one more
 * each time; clientDataJSON {type: 'webauthn.get', challenge, origin}; the signature ES256, DER,
 * over authenticatorData ‖ SHA-256(clientDataJSON)), answered 200 with a session. Each user
 * signs in one sign-in after another (the counter of a passkey only moves forward), all users
 * at once, for PASSKEY_BENCH_SECONDS (default 10); making the assertions (one ECDSA signature
 * each) is this process's work, as it is a browser's.
 *
 * The reference, in the same process and run, as many at a time: the same library's
 * verifyAuthenticationResponse (@simplewebauthn/server, as src/passkeys/service.ts calls it)
 * of assertions made beforehand, and node:crypto's verify of their ES256 signatures alone.
 * In PASSKEY_BENCH_ROUNDS rounds (default 2), alternating. Printed: every run (per second,
 * p50/p99 of a whole sign-in, the service's CPU time per sign-in), then the medians, and
 * sign-ins ÷ verifications.
 *
 * DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres) names the server; the
 * benchmark creates and drops its own database there.
 */
import type { ChildProcess } from 'node:child_process';
import { createHash, generateKeyPairSync, type KeyObject, randomBytes, sign, verify } from 'node:crypto';
import http from 'node:http';
import path from 'node:path';
import { type AuthenticationResponseJSON, verifyAuthenticationResponse } from '@simplewebauthn/server';
import pg from 'pg';
import {
  adminCli, benchDatabase, benchServiceEnv, cpuMicros, DEFAULT_ADMIN_URL, NODE_FLAGS, quantile, SERVICE_ROOT, serviceEntry, startProcess, stopProcess, median,
} from './support.ts';

const IN_FLIGHT = Number(process.env.PASSKEY_BENCH_IN_FLIGHT ?? 8);
const SECONDS = Number(process.env.PASSKEY_BENCH_SECONDS ?? 10);
const ROUNDS = Number(process.env.PASSKEY_BENCH_ROUNDS ?? 2);
/** Assertions made beforehand for the reference (used round robin). */
const PREMADE = 500;

const sha256 = (data: Buffer | string) => createHash('sha256').update(data).digest();
const b64url = (data: Buffer) => data.toString('base64url');

/** A software authenticator holding one ES256 passkey. */
class SoftAuthenticator {
  readonly credentialId = b64url(randomBytes(32));
  private readonly privateKey: KeyObject;
  readonly publicKey: KeyObject;
  private counter = 0;

  constructor(readonly userId: number) {
    const pair = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    this.privateKey = pair.privateKey;
    this.publicKey = pair.publicKey;
  }

  /** The public key as a COSE_Key (RFC 9053: kty EC2, alg ES256, crv P-256, x, y), as a registration stores it. */
  coseKey(): Buffer {
    const jwk = this.publicKey.export({ format: 'jwk' });
    const x = Buffer.from(jwk.x!, 'base64url');
    const y = Buffer.from(jwk.y!, 'base64url');
    // CBOR map of 5: {1: 2, 3: -7, -1: 1, -2: bstr(32) x, -3: bstr(32) y}
    return Buffer.concat([Buffer.from([0xa5, 0x01, 0x02, 0x03, 0x26, 0x20, 0x01, 0x21, 0x58, 0x20]), x, Buffer.from([0x22, 0x58, 0x20]), y]);
  }

  /** An assertion of `challenge` for `rpId` at `origin`, with the next counter. */
  assert(challenge: string, rpId: string, origin: string): AuthenticationResponseJSON {
    const counter = Buffer.alloc(4);
    counter.writeUInt32BE(++this.counter);
    const authenticatorData = Buffer.concat([sha256(rpId), Buffer.from([0x05]), counter]);
    const clientDataJSON = Buffer.from(JSON.stringify({ type: 'webauthn.get', challenge, origin, crossOrigin: false }));
    const signature = sign('sha256', Buffer.concat([authenticatorData, sha256(clientDataJSON)]), this.privateKey); // DER
    return {
      id: this.credentialId, rawId: this.credentialId, type: 'public-key', clientExtensionResults: {}, authenticatorAttachment: 'platform',
      response: {
        clientDataJSON: b64url(clientDataJSON), authenticatorData: b64url(authenticatorData), signature: b64url(signature),
        userHandle: b64url(Buffer.from(`user:${this.userId}`)),
      },
    };
  }
}

/** POSTs JSON on a keep-alive agent: the status and the parsed body. */
function postJson(agent: http.Agent, port: number, pathname: string, body: unknown): Promise<{ status: number; body: any }> {
  const data = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path: pathname, method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => { text += chunk; });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text ? JSON.parse(text) : undefined }));
    });
    req.on('error', reject);
    req.end(data);
  });
}

interface Figures {
  run: string;
  'per s': number;
  p50_ms: number;
  p99_ms: number;
  'cpu µs/op': number;
  refused: number;
  done: number;
}

/** `inFlight` loops of `op` for SECONDS: per second over (last end - start), latencies of each op. */
async function loops(run: string, inFlight: number, op: (worker: number) => Promise<boolean>, pid?: number): Promise<Figures> {
  const latencies: number[] = [];
  let refused = 0;
  const before = pid === undefined ? process.cpuUsage() : undefined;
  const cpuBefore = pid === undefined ? 0 : cpuMicros(pid);
  const started = performance.now();
  const until = started + SECONDS * 1000;
  let last = started;
  await Promise.all(Array.from({ length: inFlight }, async (_, worker) => {
    while (performance.now() < until) {
      const t = performance.now();
      if (await op(worker)) latencies.push(performance.now() - t);
      else refused++;
      last = performance.now();
    }
  }));
  const cpu = pid === undefined ? ((u) => u.user + u.system)(process.cpuUsage(before)) : cpuMicros(pid) - cpuBefore;
  latencies.sort((a, b) => a - b);
  const round1 = (x: number) => Math.round(x * 10) / 10;
  return {
    run,
    'per s': Math.round(latencies.length / ((last - started) / 1000)),
    p50_ms: round1(quantile(latencies, 0.5)),
    p99_ms: round1(quantile(latencies, 0.99)),
    'cpu µs/op': Math.round(cpu / Math.max(1, latencies.length)),
    refused,
    done: latencies.length,
  };
}

async function main() {
  const adminUrl = process.env.DATABASE_URL ?? DEFAULT_ADMIN_URL;
  const db = await benchDatabase(adminUrl, 'auth_bench_passkey');
  const children: ChildProcess[] = [];
  try {
    const entry = serviceEntry();
    const service = await startProcess(entry, benchServiceEnv(db.url), '/readyz', SERVICE_ROOT);
    children.push(service.child);
    console.log(`service: ${path.join(SERVICE_ROOT, entry)}`);
    console.log(`node options of every process: ${NODE_FLAGS.join(' ') || '(none)'}`);
    // the relying party of a service without PUBLIC_URL (src/passkeys/relying-party.ts)
    const rpId = 'localhost';
    const origin = `http://localhost:${service.port}`;

    // the users, and a passkey each, written as a registration writes it (src/passkeys/queries.ts insertPasskey)
    const authenticators: SoftAuthenticator[] = [];
    const sql = new pg.Client({ connectionString: db.url });
    await sql.connect();
    try {
      for (let i = 0; i < IN_FLIGHT; i++) {
        const user = adminCli(db.url, ['user', 'create', '--username', `passkey${i}`, `--email`, `passkey${i}@example.com`, '--password', `amber meadow signal ${i}7`]);
        const a = new SoftAuthenticator(user.id);
        await sql.query(
          `INSERT INTO passkeys (user_id, credential_id, public_key, counter, transports, name) VALUES ($1, $2, $3, 0, '{internal}', 'Bench')`,
          [user.id, a.credentialId, a.coseKey()],
        );
        authenticators.push(a);
      }
    } finally {
      await sql.end();
    }

    const agents = authenticators.map(() => new http.Agent({ keepAlive: true, maxSockets: 1 }));
    let firstRefusal: string | undefined;
    const signIn = async (worker: number): Promise<boolean> => {
      const options = await postJson(agents[worker], service.port, '/api/passkeys/authentication/options', {});
      if (options.status !== 200) {
        firstRefusal ??= `options ${options.status} ${JSON.stringify(options.body)}`;
        return false;
      }
      const response = authenticators[worker].assert(options.body.challenge, rpId, origin);
      const verified = await postJson(agents[worker], service.port, '/api/passkeys/authentication/verify', { response });
      if (verified.status !== 200) firstRefusal ??= `verify ${verified.status} ${JSON.stringify(verified.body)}`;
      return verified.status === 200;
    };
    const check = await signIn(0);
    if (!check) throw new Error(`a passkey sign-in failed: ${firstRefusal}`);

    // the reference's assertions, made beforehand: the library's whole check, and the signature alone
    const reference = new SoftAuthenticator(0);
    const premade = Array.from({ length: PREMADE }, () => {
      const challenge = b64url(randomBytes(32));
      return { challenge, response: reference.assert(challenge, rpId, origin) };
    });
    const publicKey = new Uint8Array(reference.coseKey());
    let nextLibrary = 0;
    const library = async (): Promise<boolean> => {
      const { challenge, response } = premade[nextLibrary++ % PREMADE];
      const result = await verifyAuthenticationResponse({
        response, expectedChallenge: challenge, expectedOrigin: origin, expectedRPID: rpId, requireUserVerification: true,
        credential: { id: reference.credentialId, publicKey, counter: 0 },
      });
      return result.verified;
    };
    const signed = premade.map(({ response }) => {
      const authenticatorData = Buffer.from(response.response.authenticatorData, 'base64url');
      const clientDataHash = sha256(Buffer.from(response.response.clientDataJSON, 'base64url'));
      return { data: Buffer.concat([authenticatorData, clientDataHash]), signature: Buffer.from(response.response.signature, 'base64url') };
    });
    let nextRaw = 0;
    const raw = async (): Promise<boolean> => {
      const { data, signature } = signed[nextRaw++ % PREMADE];
      const ok = verify('sha256', data, reference.publicKey, signature);
      if (nextRaw % 64 === 0) await new Promise(setImmediate); // let the other loops and the clock in
      return ok;
    };

    const rows: Figures[] = [];
    const by: Record<'signIn' | 'library' | 'raw', Figures[]> = { signIn: [], library: [], raw: [] };
    for (let r = 1; r <= ROUNDS; r++) {
      const s = await loops(`passkey sign-in (options + verify) #${r}`, IN_FLIGHT, signIn, service.child.pid!);
      const l = await loops(`verifyAuthenticationResponse #${r}`, IN_FLIGHT, library);
      const n = await loops(`node:crypto verify (ES256) #${r}`, IN_FLIGHT, raw);
      by.signIn.push(s);
      by.library.push(l);
      by.raw.push(n);
      rows.push(s, l, n);
    }
    agents.forEach((a) => a.destroy());
    console.table(rows);
    const m = (k: keyof typeof by) => median(by[k].map((f) => f['per s']));
    console.log([
      `Medians of ${ROUNDS} rounds, ${IN_FLIGHT} at a time, ${SECONDS} s each:`,
      `  passkey sign-ins ${m('signIn')}/s (p99 ${median(by.signIn.map((f) => f.p99_ms))} ms, ${median(by.signIn.map((f) => f['cpu µs/op']))} µs of the service's CPU each)`,
      `  verifyAuthenticationResponse ${m('library')}/s: sign-ins ÷ it ${(m('signIn') / m('library')).toFixed(3)}`,
      `  node:crypto ES256 verify ${m('raw')}/s: sign-ins ÷ it ${(m('signIn') / m('raw')).toFixed(3)}`,
    ].join('\n'));
    const refused = by.signIn.reduce((n, f) => n + f.refused, 0);
    if (refused > 0) console.log(`note: ${refused} sign-ins were refused, the first: ${firstRefusal}`);
  } finally {
    await Promise.all(children.map(stopProcess));
    await db.drop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
