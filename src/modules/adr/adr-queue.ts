// The activity-record export's queue in one process: a durable queue over adr_windows, and, in a
// worker, the window maker (adds each export's windows once they have ended and settled, in order, never
// skipping one) and the runner that ships them (ship-window.ts). Built once by src/platform.ts.
import path from 'node:path';
import fs from 'node:fs';
import type { Config } from '../../config.ts';
import type { AdrWindowsTable } from '../../db/types.ts';
import type { SecretBox } from '../../lib/crypto.ts';
import { newId } from '../../lib/ids.ts';
import { DurableQueue, type DurableQueueDeps } from '../../queue/durable-queue.ts';
import { QueueProducer } from '../../queue/producer.ts';
import { policyFromConfig } from '../../webhooks/ssrf.ts';
import type { Insertable } from 'kysely';
import { adrConfigRepo, adrWindowRepo } from './repository.ts';
import { adrRetryDelayMs, ADR_MAX_ATTEMPTS, createShipWindowHandler, type AdrRetryDelay } from './ship-window.ts';
import { windowFileName, windowFrom } from './windows.ts';

export const ADR_WINDOWS = 'adr_windows';
/** Windows one pass adds for one export at most (a long outage of the workers catches up over passes). */
const WINDOWS_PER_PASS = 200;

export interface AdrQueueDeps extends DurableQueueDeps {
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

export type AdrQueue = DurableQueue<typeof ADR_WINDOWS> & {
  /**
   * Adds the windows of every export that have ended (and settled: CALLPLANE_ADR_DELAY_SECONDS
   * after their end, for records whose transactions were still committing), from each export's
   * next window on, in order, and moves its next window past them in the same transaction.
   * Returns how many were added.
   */
  makeWindows(): Promise<number>;
};

export function adrQueue(deps: AdrQueueDeps): AdrQueue {
  const { config, box, log } = deps;
  const { db } = deps.database;
  const queue: DurableQueue<typeof ADR_WINDOWS> = new DurableQueue(deps, {
    producer: new QueueProducer(ADR_WINDOWS, deps.wakeups), name: 'adr', leaseMs: config.deliveryLeaseMs, concurrency: 4,
    // In a worker: the runner ships windows, and the window maker adds them every few seconds.
    worker: (now) => {
      const tlsCa = config.adrTlsCaFile ? fs.readFileSync(config.adrTlsCaFile, 'utf8') : undefined;
      let timer: NodeJS.Timeout | undefined;
      let making: Promise<void> | undefined;
      const make = () => {
        making ??= makeWindows().then(() => undefined, (err: unknown) => log?.error({ err }, 'adr: making windows failed'))
          .finally(() => { making = undefined; });
      };
      return {
        handler: createShipWindowHandler({
          db, box, now, log,
          spoolDir: path.join(config.dataDir, 'adr-spool'),
          retryDelay: deps.retryDelay ?? adrRetryDelayMs,
          transfer: {
            policy: policyFromConfig(config), tlsCa, timeoutMs: deps.transferTimeoutMs ?? 30_000,
            maxMs: deps.transferMaxMs ?? config.adrTransferMaxSeconds * 1000, log,
          },
        }),
        started: () => {
          timer = setInterval(make, deps.makeEveryMs ?? 5000);
          timer.unref();
          make();
        },
        stopping: async () => {
          clearInterval(timer);
          await making;
        },
      };
    },
  });

  async function makeWindows(): Promise<number> {
    const now = queue.engine.now();
    const settled = now - config.adrDelaySeconds * 1000;
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
      // Another worker that made these windows first moved the next window: nothing to do.
      const made = await queue.enqueue(db, async (tx) => {
        if (!(await adrConfigRepo.advance(tx, cfg.account_id, from, start, windowFrom(start, cfg.rotation_minutes).end, now))) return false;
        await adrWindowRepo.insertMany(tx, rows);
        return true;
      });
      if (made) added += rows.length;
    }
    return added;
  }

  return Object.assign(queue, { makeWindows });
}
