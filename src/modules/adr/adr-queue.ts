// The activity-record export's queue in one process: the engine over adr_windows, and, in a worker,
// the window maker (adds each export's windows once they have ended and settled, in order, never
// skipping one) and the runner that ships them (ship-window.ts). Built once by src/platform.ts.
import path from 'node:path';
import fs from 'node:fs';
import type { Config } from '../../config.ts';
import type { AdrWindowsTable, QueueState } from '../../db/types.ts';
import type { SecretBox } from '../../lib/crypto.ts';
import { newId } from '../../lib/ids.ts';
import { QueueEngine } from '../../queue/engine.ts';
import { lastErrorPatch, newWorkerId, type QueueProcessDeps, QueueRunner } from '../../queue/runner.ts';
import { notifyQueue, type Wakeups } from '../../queue/waker.ts';
import { policyFromConfig } from '../../webhooks/ssrf.ts';
import type { Insertable } from 'kysely';
import { adrConfigRepo, adrWindowRepo } from './repository.ts';
import { adrRetryDelayMs, ADR_MAX_ATTEMPTS, createShipWindowHandler, type AdrRetryDelay } from './ship-window.ts';
import { windowFileName, windowFrom } from './windows.ts';

export const ADR_WINDOWS = 'adr_windows';
/** Windows one pass adds for one export at most (a long outage of the workers catches up over passes). */
const WINDOWS_PER_PASS = 200;

function stamp({ to, now }: { from: QueueState; to: QueueState; now: number }) {
  const set: Record<string, unknown> = { updated_at: now };
  if (to === 'finished' || to === 'failed' || to === 'canceled') set.finished_at = now;
  return set;
}

export interface AdrQueueDeps extends QueueProcessDeps {
  config: Pick<Config, 'dataDir' | 'deliveryLeaseMs' | 'adrDelaySeconds' | 'adrTlsCaFile' | 'adrTransferMaxSeconds' | 'allowPrivateTargets' | 'privateTargetCidrs'>;
  box: SecretBox;
  /** The retry schedule; tests pass a fast one. Default adrRetryDelayMs. */
  retryDelay?: AdrRetryDelay;
  /** How often the window maker looks for ended windows. Default 5 s. */
  makeEveryMs?: number;
  /** Longest wait for a server's connection and answers. Default 30 s. */
  transferTimeoutMs?: number;
  /** Longest one shipment may take in all. Default CALLPLANE_ADR_TRANSFER_MAX_SECONDS. */
  transferMaxMs?: number;
}

export class AdrQueue {
  readonly engine: QueueEngine<'adr_windows'>;
  readonly wakeups: Wakeups;
  #runner: QueueRunner<'adr_windows'> | undefined;
  #timer: NodeJS.Timeout | undefined;
  #making: Promise<void> | undefined;

  constructor(readonly deps: AdrQueueDeps) {
    this.wakeups = deps.wakeups;
    this.engine = new QueueEngine({
      table: ADR_WINDOWS, workerId: newWorkerId('adr'), leaseMs: deps.leaseMs ?? deps.config.deliveryLeaseMs, now: deps.now, stamp,
      serialWrites: deps.database.serialWrites,
    });
  }

  /**
   * Adds the windows of every export that have ended (and settled: CALLPLANE_ADR_DELAY_SECONDS
   * after their end, for records whose transactions were still committing), from each export's
   * next window on, in order, and moves its next window past them in the same transaction.
   * Returns how many were added.
   */
  async makeWindows(): Promise<number> {
    const { db } = this.deps.database;
    const now = this.engine.now();
    const settled = now - this.deps.config.adrDelaySeconds * 1000;
    let added = 0;
    for (const cfg of await adrConfigRepo.due(db, settled, 100)) {
      const from = Number(cfg.next_window_at);
      const rows: Insertable<AdrWindowsTable>[] = [];
      let start = from;
      while (rows.length < WINDOWS_PER_PASS) {
        const w = windowFrom(start, cfg.rotation_minutes);
        if (w.end > settled) break;
        rows.push({
          id: newId('adrw', now), account_id: cfg.account_id, window_start: w.start, window_end: w.end,
          file_name: windowFileName(cfg.account_id, w.start, w.end), run_at: now, max_attempts: ADR_MAX_ATTEMPTS,
          created_at: now, updated_at: now,
        });
        start = w.end;
      }
      if (rows.length === 0) continue;
      const made = await db.transaction().execute(async (tx) => {
        // Another worker that made these windows first moved the next window: nothing to do.
        if (!(await adrConfigRepo.advance(tx, cfg.account_id, from, start, windowFrom(start, cfg.rotation_minutes).end, now))) return false;
        await adrWindowRepo.insertMany(tx, rows);
        await notifyQueue(tx, ADR_WINDOWS);
        return true;
      });
      if (made) added += rows.length;
    }
    if (added > 0) this.notify();
    return added;
  }

  /** Starts making and shipping windows in this process (worker roles). */
  startWorker(): void {
    if (this.#runner) return;
    const { database, config, box, log } = this.deps;
    const tlsCa = config.adrTlsCaFile ? fs.readFileSync(config.adrTlsCaFile, 'utf8') : undefined;
    this.#runner = new QueueRunner({
      engine: this.engine,
      db: database.db,
      writers: database.concurrentWriters,
      handler: createShipWindowHandler({
        db: database.db, box, now: this.engine.now, log,
        spoolDir: path.join(config.dataDir, 'adr-spool'),
        retryDelay: this.deps.retryDelay ?? adrRetryDelayMs,
        transfer: {
          policy: policyFromConfig(config), tlsCa, timeoutMs: this.deps.transferTimeoutMs ?? 30_000,
          maxMs: this.deps.transferMaxMs ?? config.adrTransferMaxSeconds * 1000, log,
        },
      }),
      concurrency: 4,
      wakeups: this.wakeups,
      heartbeatMs: this.deps.heartbeatMs,
      rescueEveryMs: this.deps.rescueEveryMs,
      errorPatch: lastErrorPatch,
      log,
    });
    this.#runner.start();
    const make = () => {
      this.#making ??= this.makeWindows().then(() => undefined, (err: unknown) => log?.error({ err }, 'adr: making windows failed'))
        .finally(() => { this.#making = undefined; });
    };
    this.#timer = setInterval(make, this.deps.makeEveryMs ?? 5000);
    this.#timer.unref();
    make();
  }

  notify(): void {
    this.wakeups.emit(ADR_WINDOWS);
  }

  async stop(opts: { timeoutMs?: number } = {}): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
    await this.#making;
    await this.#runner?.stop(opts);
    this.#runner = undefined;
  }
}
