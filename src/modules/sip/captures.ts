// Captures of a worker's SIP messages for GET /api/v2/sip/captures: every message sent and
// received (retransmissions included) of a Call-ID whose organization is known, written in
// batches; messages that arrive before their Call-ID is attributed are held briefly (bounded);
// refused INVITEs are captured at a bounded rate; old captures are pruned.
import type { Insertable } from 'kysely';
import type { SipCapturesTable } from '../../db/types.ts';
import { newId } from '../../lib/ids.ts';
import type { Remote, SipMessage } from '../../sip/endpoint.ts';
import { formatHost } from './parse.ts';
import { sipRepo } from './repository.ts';
import type { CallTracker, SipWorkerDeps } from './worker-deps.ts';

interface PendingCapture { rows: Omit<Insertable<SipCapturesTable>, 'org_id'>[]; until: number; bytes: number }

/** How often the batch of captured messages is written. */
export const CAPTURE_FLUSH_MS = 200;
const CAPTURE_MAX_BYTES = 65_536;
const PENDING_CAPTURE_MS = 10_000;
/** Bytes of not-yet-attributed messages held at once: strangers' traffic cannot grow the process past this. */
const PENDING_MAX_BYTES = 4 * 1024 * 1024;
const UNTRACK_GRACE_MS = 32_000;
/**
 * Refused INVITEs captured per organization and minute (per worker). Anyone can send INVITEs naming
 * an organization's AOR; beyond this the refusals are answered but not stored, so strangers cannot
 * fill an organization's captures.
 */
export const REFUSED_CAPTURES_PER_MINUTE = 30;
const PRUNE_EVERY_MS = 3600_000;

const hostPort = (address: string, port: number) => `${formatHost(address)}:${port}`;

export class SipCaptures implements CallTracker {
  /** Call-ID → organization, for captures; `until` is when an untracked Call-ID is forgotten. */
  readonly #callOrgs = new Map<string, { orgId: number; until: number }>();
  /** Messages of Call-IDs not (yet) attributed: the INVITE arrives before we know whose it is. */
  readonly #pending = new Map<string, PendingCapture>();
  #pendingBytes = 0;
  #buffer: Insertable<SipCapturesTable>[] = [];
  #flushing: Promise<void> = Promise.resolve();
  /** Refused INVITEs captured this minute, per organization. */
  readonly #refused = new Map<number, { minute: number; n: number }>();
  #lastPrune = 0;

  constructor(readonly deps: Pick<SipWorkerDeps, 'database' | 'config' | 'log'>) {}

  /** Bytes of messages held while nobody knows their organization yet. */
  get pendingBytes(): number {
    return this.#pendingBytes;
  }

  /** Messages of this Call-ID are the organization's (and so are those that arrived just before). */
  track(callId: string, orgId: number): void {
    this.#callOrgs.set(callId, { orgId, until: Infinity });
    const pending = this.#pending.get(callId);
    if (pending) {
      this.#forget(callId, pending);
      for (const row of pending.rows) this.#buffer.push({ ...row, org_id: orgId });
    }
  }

  /** The call or registration is over; late retransmissions are still captured for a while. */
  untrack(callId: string): void {
    const t = this.#callOrgs.get(callId);
    if (t) t.until = Date.now() + UNTRACK_GRACE_MS;
  }

  /** One message sent or received (the endpoint's onMessage); `local` is our advertised address. */
  capture(dir: 'in' | 'out', msg: SipMessage, remote: Remote, raw: Buffer, local: { host: string; port: number }): void {
    const callId = msg.headers.get('call-id');
    if (!callId) return;
    const now = Date.now();
    const text = raw.subarray(0, CAPTURE_MAX_BYTES).toString('utf8').replaceAll('\u0000', '\uFFFD');
    const row = {
      id: newId('cap', now), call_id: callId.slice(0, 500), direction: dir, transport: remote.transport,
      remote: hostPort(remote.address, remote.port), local: hostPort(local.host, local.port), message: text, created_at: now,
    };
    const owner = this.#callOrgs.get(callId);
    if (owner && owner.until >= now) {
      this.#buffer.push({ ...row, org_id: owner.orgId });
      return;
    }
    let pending = this.#pending.get(callId);
    if (!pending) {
      if (this.#pending.size >= 1000) return; // unsolicited traffic is not ours to keep
      this.#pending.set(callId, (pending = { rows: [], until: now + PENDING_CAPTURE_MS, bytes: 0 }));
    }
    if (pending.rows.length >= 50 || this.#pendingBytes + text.length > PENDING_MAX_BYTES) return;
    pending.rows.push(row);
    pending.bytes += text.length;
    this.#pendingBytes += text.length;
  }

  /** Whether this refused INVITE of the organization is captured (REFUSED_CAPTURES_PER_MINUTE). */
  mayCaptureRefusal(orgId: number): boolean {
    const minute = Math.floor(Date.now() / 60_000);
    const seen = this.#refused.get(orgId);
    if (!seen || seen.minute !== minute) {
      if (this.#refused.size >= 10_000) this.#refused.clear();
      this.#refused.set(orgId, { minute, n: 1 });
      return true;
    }
    return ++seen.n <= REFUSED_CAPTURES_PER_MINUTE;
  }

  #forget(callId: string, pending: PendingCapture): void {
    this.#pending.delete(callId);
    this.#pendingBytes -= pending.bytes;
  }

  /** Writes the messages captured since the last flush (and forgets what is held too long). */
  flush(): Promise<void> {
    const now = Date.now();
    for (const [id, p] of this.#pending) if (p.until < now) this.#forget(id, p);
    for (const [id, t] of this.#callOrgs) if (t.until < now) this.#callOrgs.delete(id);
    if (this.#buffer.length === 0) return this.#flushing;
    const rows = this.#buffer;
    this.#buffer = [];
    const db = this.deps.database.db;
    this.#flushing = this.#flushing.then(async () => {
      for (let i = 0; i < rows.length; i += 100) {
        await sipRepo.insertCaptures(db, rows.slice(i, i + 100)).catch((err: unknown) =>
          // An organization deleted mid-call (foreign key) or a database hiccup: captures are best effort.
          this.deps.log?.warn({ err: (err as Error).message }, 'SIP captures not stored'));
      }
    });
    return this.#flushing;
  }

  /** Deletes captures older than the retention (CALLPLANE_SIP_CAPTURE_RETENTION_DAYS), at most hourly. */
  async pruneIfDue(): Promise<void> {
    if (Date.now() - this.#lastPrune <= PRUNE_EVERY_MS) return;
    this.#lastPrune = Date.now();
    const before = Date.now() - this.deps.config.sipCaptureRetentionDays * 86_400_000;
    await sipRepo.pruneCaptures(this.deps.database.db, before).catch((err: unknown) => this.deps.log?.warn({ err }, 'pruning SIP captures failed'));
  }
}
