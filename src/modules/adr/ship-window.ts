// The job of one rotation window: build its file from the records (build-file.ts), ship it
// (transfer.ts), and record the outcome in the window and in the account's shipment log, in the
// transaction that settles the window. A failure is retried on the ADR schedule (ADR_RETRY_MS).
import fs from 'node:fs';
import path from 'node:path';
import type { AdrShipmentsTable, AdrWindowRow, Db } from '../../db/types.ts';
import type { SecretBox } from '../../lib/crypto.ts';
import { newId } from '../../lib/ids.ts';
import type { HandlerContext, Outcome } from '../../queue/runner.ts';
import type { QueueRow } from '../../queue/engine.ts';
import { accountRepo } from '../accounts/repository.ts';
import { buildWindowFile } from './build-file.ts';
import { adrConfigRepo, adrShipmentRepo, destinationKey } from './repository.ts';
import { scrub, shipFile, type TransferOptions } from './transfer.ts';
import type { Insertable } from 'kysely';

/**
 * Delays before the next attempt after attempt n failed (index n): 5 s, 1 min, 5 min, 30 min, 2 h,
 * then every 5 h, 50 attempts in all (about nine days); each ±20%.
 */
const SCHEDULE_MS = [0, 5_000, 60_000, 300_000, 1_800_000, 7_200_000];
const LAST_MS = 5 * 3_600_000;
export const ADR_MAX_ATTEMPTS = 50;

export type AdrRetryDelay = (attemptJustFailed: number) => number | null;

export function adrRetryDelayMs(attemptJustFailed: number, random: () => number = Math.random): number | null {
  if (attemptJustFailed >= ADR_MAX_ATTEMPTS) return null;
  const scheduled = SCHEDULE_MS[attemptJustFailed] ?? LAST_MS;
  return Math.round(scheduled * (0.8 + 0.4 * random()));
}

type Row = QueueRow<'adr_windows'>;

export interface ShipWindowDeps {
  db: Db;
  box: SecretBox;
  transfer: TransferOptions;
  /** Where files are built before they are uploaded. */
  spoolDir: string;
  retryDelay: AdrRetryDelay;
  now: () => number;
  log?: { warn(obj: object, msg: string): void; info?(obj: object, msg: string): void };
}

export function createShipWindowHandler(deps: ShipWindowDeps) {
  const { db, box, now } = deps;
  const logRow = (row: AdrWindowRow, started: number, entry: Pick<Insertable<AdrShipmentsTable>, 'outcome' | 'message' | 'bytes' | 'next_attempt_at'>) =>
    async (tx: Parameters<NonNullable<Outcome<Row>['after']>>[0]) => {
      await adrShipmentRepo.insert(tx, {
        id: newId('adrs', now()), account_id: row.account_id, window_id: row.id, attempt: row.attempt,
        duration_ms: Math.max(0, now() - started), at: now(), ...entry,
      });
    };

  return async (row: Row, ctx: HandlerContext): Promise<Outcome<Row>> => {
    const started = now();
    const config = await adrConfigRepo.find(db, row.account_id);
    const account = await accountRepo.findById(db, row.account_id);
    if (!config || !account) {
      const message = 'the export is no longer configured';
      return { kind: 'complete', state: 'failed', set: { last_error: message }, after: logRow(row, started, { outcome: 'failed', message, bytes: null, next_attempt_at: null }) };
    }
    const password = box.open(config.password);
    await fs.promises.mkdir(deps.spoolDir, { recursive: true });
    const file = path.join(deps.spoolDir, `${row.id}.csv`);
    let bytes: number | null = null;
    try {
      const built = await buildWindowFile(db, account, row, file, ctx.signal);
      bytes = built.bytes;
      const shipped = await shipFile({
        protocol: config.protocol, host: config.host, port: config.port, username: config.username, password, path: config.path,
        hostKeyFingerprint: config.host_key_fingerprint,
      }, file, built.bytes, row.file_name, {
        ...deps.transfer,
        // Trust on first use: the key is recorded only for the server these settings still name.
        recordHostKey: (fingerprint) => adrConfigRepo.recordHostKey(db, config.account_id, destinationKey(config), fingerprint),
      }, ctx.signal);
      const message = shipped.outcome === 'shipped'
        ? `${row.file_name} shipped (${built.bytes} bytes, ${built.records} records)`
        : `${row.file_name} was already on the server (${shipped.remoteBytes} bytes, shipped by an earlier attempt): not sent again`;
      deps.log?.info?.({ window: row.id, account: row.account_id, file: row.file_name, outcome: shipped.outcome, bytes: built.bytes }, 'activity records shipped');
      return {
        kind: 'complete', state: 'finished',
        set: { records: built.records, bytes: built.bytes, checksum: built.checksum, shipped_at: now(), last_error: null },
        after: logRow(row, started, { outcome: shipped.outcome, message, bytes: built.bytes, next_attempt_at: null }),
      };
    } catch (err) {
      // Shutdown, a lost lease or a cancel: the runner returns the window to the queue.
      if (ctx.signal.aborted) throw err;
      const message = scrub(err instanceof Error ? err.message : String(err), password).slice(0, 1000);
      const delay = row.attempt >= row.max_attempts ? null : deps.retryDelay(row.attempt);
      const next = delay === null ? null : now() + delay;
      deps.log?.warn({ window: row.id, account: row.account_id, file: row.file_name, attempt: row.attempt, error: message }, 'activity records not shipped');
      const after = logRow(row, started, { outcome: 'failed', message, bytes, next_attempt_at: next });
      return next === null
        ? { kind: 'complete', state: 'failed', set: { last_error: message }, after }
        : { kind: 'retry', runAt: next, set: { last_error: message }, after };
    } finally {
      await fs.promises.rm(file, { force: true });
    }
  };
}
