import type { Db, Listener } from '../db/db.ts';
import type { ClientRecord } from './client.ts';

/** The channel migrations/0010_client_change_notify.sql announces client changes on. */
export const CLIENT_CHANGED_CHANNEL = 'auth_client_changed';

/** A moment in the cache's history: a record read after it may be kept only if nothing changed since. */
export type CacheTicket = number;

/**
 * Client records kept in this instance for the credential checks of the hot paths, so a
 * token issue or validation does not read and parse its client's row before its own statement.
 *
 * A record is dropped the moment the database announces a change of its client (every
 * write to `clients`, whoever makes it, is announced at commit by a trigger: see
 * migrations/0010_client_change_notify.sql), on every instance that listens. While this
 * instance is not listening (not yet connected, or its listening connection was lost and
 * is being opened again) nothing is served from memory and nothing is kept, and the
 * records kept before are dropped: a change announced meanwhile would have been missed.
 * A notification can still be on its way when a request uses a kept record (it travels on
 * a connection of its own), so a kept record is only ever a candidate: it is served at once,
 * and what it decides is made good by the database (src/clients/guards.ts): the hot
 * statements write only while the client's row still has the version the record was read
 * at, and every refusal is confirmed on the current row before it is answered. A rotated
 * secret, a changed allow list or a deactivated client is so refused on the very next
 * request, without a round trip of its own; the notifications keep such mismatches rare.
 *
 * A lookup that was under way when a change was announced is not kept (its row may predate
 * the change): `ticket()` before the lookup, `remember(..., ticket)` after. Unknown client
 * ids are never kept, nor is a client whose previous secret is still in its grace: when
 * the grace ends is decided by the database's clock in the statement that reads it
 * (src/clients/queries.ts), and no write announces it.
 *
 * Without `Db.listen` nothing is ever kept.
 */
export function createClientCache(db: Pick<Db, 'listen'>) {
  const records = new Map<string, ClientRecord>();
  let listening = false;
  let generation = 0;
  const forgetAll = () => {
    generation++;
    records.clear();
  };
  let listener: Listener | undefined;
  let state: 'idle' | 'started' | 'closed' = 'idle';
  /** Listens from the first credential check on: a process that never checks one (the CLI) opens nothing. */
  const start = () => {
    state = 'started';
    listener = db.listen?.(CLIENT_CHANGED_CHANNEL, {
      notify(clientId) {
        generation++;
        if (clientId === '') records.clear();
        else records.delete(clientId);
      },
      listening(on) {
        forgetAll();
        listening = on && state === 'started';
      },
    });
  };

  return {
    /**
     * The kept record of this client, if any, only while listening: a candidate, which may
     * predate a change whose announcement is still on its way (see above).
     */
    get(clientId: string): ClientRecord | undefined {
      if (state === 'idle') start();
      return listening ? records.get(clientId) : undefined;
    },
    /** Take before looking a client up; hand to `remember` with the row found. */
    ticket(): CacheTicket {
      return generation;
    },
    /**
     * Keeps the record of `clientId` read after `ticket` (null: there is no such client), if
     * nothing was announced since and it may be kept; a record it may not replace (none, or
     * one in a secret's grace) is dropped, so an older one is not served in its place.
     */
    remember(clientId: string, client: ClientRecord | null, ticket: CacheTicket): void {
      if (!listening || ticket !== generation) return;
      if (!client || client.previous_secret_hash) records.delete(clientId);
      else {
        Object.freeze(client.allowed_ips); // shared by every request it serves, and its allow-list answers are kept by the array (allowlist.ts)
        records.set(client.client_id, client);
      }
    },
    /** Whether records are being kept (the database announces changes and is listened to), and how many are. */
    state: () => ({ listening, kept: records.size }),
    /** Stops listening and drops every record. */
    async close(): Promise<void> {
      state = 'closed';
      listening = false;
      forgetAll();
      await listener?.close();
    },
  };
}

export type ClientCache = ReturnType<typeof createClientCache>;
