import type { Adapter, AdapterPayload } from 'oidc-provider';
import { createBatchLoader, createTurnLookupLoader, createWriteBatch } from '../db/batch.ts';
import type { Db } from '../db/db.ts';
import { oidcLibrary } from './library.ts';
import {
  type ArtefactRow, artefactKey, type ArtefactWrite, consumeArtefactsByKey, destroyArtefact, findArtefact, findArtefactBy,
  findArtefactsWithGrants, revokeGrantArtefacts, revokeModelByGrant, upsertArtefacts,
} from './queries.ts';

/** What is kept when oidc-provider gives no lifetime (it always does for the models used here). */
const DEFAULT_EXPIRES_IN = 14 * 86_400;

/** Models whose consumption is single use: a second consumer is refused (and the grant revoked). */
const SINGLE_USE = new Set(['AuthorizationCode', 'RefreshToken', 'DeviceCode', 'BackchannelAuthenticationRequest']);

/**
 * The writes every token request makes (its code or refresh token consumed, the new tokens
 * written), each coalesced across the requests that arrive together, as the spec's hot paths'
 * are (src/db/batch.ts): under load many token requests share one statement and one commit per
 * step. Reads are not held for each other: one statement out at a time made the requests wait
 * for each other's reads (bench:oidc, 2026-12-03: introspection 0.36 of the bare provider with
 * its reads coalesced that way, 0.88 without). What one request reads together goes as one
 * statement, sent at once:
 *  - the look-ups oidc-provider starts in one go (introspection asks for the token as an access
 *    token and as a refresh token at once) are one statement (`find`, createTurnLookupLoader:
 *    nothing waits for another statement);
 *  - a code's or token's grant is read with it, and kept on the request being served
 *    (`requestOf`) for the provider's Grant.find that follows: its one read, taken once, and
 *    dropped by any write of a grant in that request.
 * Nothing is kept beyond the request. One per provider, shared by its models' adapters.
 */
export function createArtefactBatches(db: Db, requestOf: () => object | undefined = () => undefined) {
  /** Per request being served: the grants read with its tokens (null: read as gone), until the provider asks for them. */
  const grantsRead = new WeakMap<object, Map<string, ArtefactRow | null>>();
  return {
    /** true for the one caller that consumed the artefact; false for every other, in the batch or not. */
    consume: createBatchLoader<string, boolean>(async (pks) => {
      const consumed = await consumeArtefactsByKey(db, [...new Set(pks)]);
      // two callers of one key in one batch: the first consumed it, the second is refused, as it would be a moment later
      return pks.map((pk) => consumed.delete(pk));
    }),
    upsert: createWriteBatch<ArtefactWrite>((writes) => upsertArtefacts(db, writes)),
    /** A live artefact by key, with its grant (null: none), in one statement with the others asked for in the same turn. */
    find: createTurnLookupLoader((pks: string[]) => findArtefactsWithGrants(db, pks), (row) => row.pk),
    /** Keeps a grant read with a token for the request being served (when there is one). */
    keepGrant(id: string, row: ArtefactRow | null): void {
      const req = requestOf();
      if (!req) return;
      let kept = grantsRead.get(req);
      if (!kept) grantsRead.set(req, (kept = new Map()));
      kept.set(id, row);
    },
    /** The grant read with a token in this request, once (undefined: none was). */
    takeGrant(id: string): ArtefactRow | null | undefined {
      const req = requestOf();
      const kept = req && grantsRead.get(req);
      const row = kept?.get(id);
      kept?.delete(id);
      return row;
    },
    /** A grant was written or revoked in this request: what was read before is no longer what is stored. */
    forgetGrants(): void {
      const req = requestOf();
      if (req) grantsRead.delete(req);
    },
  };
}

export type ArtefactBatches = ReturnType<typeof createArtefactBatches>;

/**
 * oidc-provider's storage adapter (its documented Adapter interface) on the service's own
 * database layer, so it works on PostgreSQL and on the embedded database alike and every
 * instance sees every code, token and session. One instance per model; the Client model is
 * served by `clients` (the clients table), never written.
 */
export class DbAdapter implements Adapter {
  constructor(private readonly db: Db, private readonly model: string, private readonly batches: ArtefactBatches) {}

  async upsert(id: string, payload: AdapterPayload, expiresIn: number): Promise<void> {
    if (this.model === 'Grant') this.batches.forgetGrants();
    await this.batches.upsert({ model: this.model, id, payload: payload as Record<string, unknown>, expiresIn: expiresIn > 0 ? expiresIn : DEFAULT_EXPIRES_IN });
  }

  async find(id: string): Promise<AdapterPayload | undefined> {
    if (this.model === 'Grant') {
      const kept = this.batches.takeGrant(id);
      if (kept !== undefined) return kept ? withConsumed(kept) : undefined;
    }
    const row = await this.batches.find.load(artefactKey(this.model, id));
    if (!row) return undefined;
    if (row.grant) this.batches.keepGrant(row.grant.id, row.grant.row);
    return withConsumed(row);
  }

  async findByUserCode(userCode: string): Promise<AdapterPayload | undefined> {
    const row = await findArtefactBy(this.db, this.model, 'user_code', userCode);
    return row ? withConsumed(row) : undefined;
  }

  async findByUid(uid: string): Promise<AdapterPayload | undefined> {
    const row = await findArtefactBy(this.db, this.model, 'uid', uid);
    return row ? withConsumed(row) : undefined;
  }

  /**
   * Consumes in one statement (consumeArtefactsByKey), shared with the requests consuming at
   * the same moment. The library reads the artefact, sees it unconsumed, then consumes it; two
   * instances racing on one code would both get that far.
   * The one whose statement did not consume it is refused here as a replay is: invalid_grant,
   * and what the grant issued revoked (RFC 6749 section 4.1.2).
   */
  async consume(id: string): Promise<void> {
    if (await this.batches.consume.load(artefactKey(this.model, id))) return;
    if (!SINGLE_USE.has(this.model)) return;
    const row = await findArtefact(this.db, this.model, id);
    const grantId = row?.payload.grantId;
    if (typeof grantId === 'string') {
      this.batches.forgetGrants();
      await revokeGrantArtefacts(this.db, grantId);
    }
    const { errors } = await oidcLibrary(); // loaded: the provider that called is built on it
    throw new errors.InvalidGrant(`${this.model === 'RefreshToken' ? 'refresh token' : 'authorization code'} already consumed`);
  }

  async destroy(id: string): Promise<void> {
    if (this.model === 'Grant') this.batches.forgetGrants();
    await destroyArtefact(this.db, this.model, id);
  }

  async revokeByGrantId(grantId: string): Promise<void> {
    this.batches.forgetGrants();
    await revokeModelByGrant(this.db, this.model, grantId);
  }
}

function withConsumed(row: ArtefactRow): AdapterPayload {
  return (row.consumed ? { ...row.payload, consumed: true } : row.payload) as AdapterPayload;
}

/** The adapter of the Client model: the registered client systems, read only. */
export class ClientAdapter implements Adapter {
  constructor(private readonly metadata: (clientId: string) => Promise<AdapterPayload | undefined>) {}
  find(id: string) {
    return this.metadata(id);
  }
  async upsert() { throw new Error('clients are registered by administrators, not by oidc-provider'); }
  async findByUserCode() { return undefined; }
  async findByUid() { return undefined; }
  async consume() {}
  async destroy() {}
  async revokeByGrantId() {}
}
