// Background work of a worker process: periodic jobs that keep the tables bounded (expired
// one-time tokens, finished tasks and old daily counters, subscriptions to renew, ended webhook deliveries and relayed
// events, ended conversation turns, call recordings, rate-limit counters of ended windows,
// finished releases of numbers, ended activity-record export windows with their shipment log) and
// end message conversations that have gone quiet. Each
// deletes in small batches, so no run holds a long transaction. Every worker process schedules
// every job; with `turns` (main.ts gives the database's, src/db/job-leases.ts) each job's turn is
// taken by one process per period, so N workers do the work of one (docs/deploy.md, "No singletons").
import type { FastifyBaseLogger } from 'fastify';
import type { Database } from './db/index.ts';
import { takeJobTurn } from './db/job-leases.ts';
import { pruneEndedWindows } from './db/rate-limit-counters.ts';
import { adrWindowRepo } from './modules/adr/repository.ts';
import { renewSubscriptions } from './modules/billing/renewals.ts';
import { turnRepo } from './modules/conversations/repository.ts';
import { releaseRepo } from './modules/phone-numbers/repository.ts';
import { tokenRepo } from './modules/tokens/repository.ts';
import { taskRepo } from './modules/tasks/repository.ts';
import { deliveryRepo, relayEventRepo } from './modules/webhooks/repository.ts';

export interface PeriodicJob {
  name: string;
  everyMs: number;
  run(): Promise<number | void>;
}

const DAY_MS = 86_400_000;

/** Deletes in batches until a batch comes back short, so one run never holds a long transaction. */
async function drain(step: () => Promise<number>, batch: number): Promise<number> {
  let total = 0;
  for (;;) {
    const n = await step();
    total += n;
    if (n < batch) return total;
  }
}

export function maintenanceJobs(database: Database, opts: {
  taskRetentionDays: number; deliveryRetentionDays?: number;
  /** Ends message conversations idle past the idle window (ConversationService.closeIdle). */
  closeIdleConversations?: () => Promise<number>;
  /** Deletes call recordings past their retention or whose conversation is gone (RecordingStore.sweep). */
  sweepRecordings?: () => Promise<number>;
  /** The rate limits' window (CALLPLANE_RATE_LIMIT_WINDOW_SECONDS); counters of ended windows go. */
  rateLimitWindowSeconds?: number;
}): PeriodicJob[] {
  const rateLimitWindowMs = (opts.rateLimitWindowSeconds ?? 60) * 1000;
  const retentionMs = opts.taskRetentionDays * DAY_MS;
  const deliveryRetentionMs = (opts.deliveryRetentionDays ?? 30) * DAY_MS;
  return [
    { name: 'prune-expired-one-time-tokens', everyMs: 60_000, run: () => tokenRepo.pruneExpired(database.db, Date.now()) },
    {
      name: 'prune-finished-tasks', everyMs: 600_000,
      run: () => drain(() => taskRepo.pruneFinished(database.db, Date.now() - retentionMs, 1000), 1000),
    },
    {
      // Kept a year past retention at least, so dailyCounts?date= answers for recent history.
      name: 'prune-daily-counters', everyMs: 3_600_000,
      run: () => taskRepo.pruneDailyCounters(database.db,
        new Date(Date.now() - Math.max(retentionMs, 400 * DAY_MS)).toISOString().slice(0, 10)),
    },
    {
      // Subscription deliveries that ended, and relayed events whose deliveries all ended, go once
      // older than the retention period (with their attempt logs).
      name: 'prune-webhook-deliveries', everyMs: 600_000,
      run: async () => {
        const before = Date.now() - deliveryRetentionMs;
        return (await drain(() => deliveryRepo.pruneEndedSubscriptionDeliveries(database.db, before, 1000), 1000))
          + (await drain(() => relayEventRepo.pruneEnded(database.db, before, 1000), 1000));
      },
    },
    {
      // A turn is only the queue's record of work done; the conversation and its messages stay.
      name: 'prune-ended-turns', everyMs: 600_000,
      run: () => drain(() => turnRepo.pruneEnded(database.db, Date.now() - retentionMs, 1000), 1000),
    },
    {
      // A deleted holder's number released at its provider (or found gone there): the row is only
      // the job's record. Failed releases stay for an operator (docs/numbers.md).
      name: 'prune-number-releases', everyMs: 600_000,
      run: () => drain(() => releaseRepo.pruneEnded(database.db, Date.now() - retentionMs, 1000), 1000),
    },
    {
      // An export window shipped (or given up) long ago, and the log of its attempts: the file is
      // on the customer's server (docs/billing.md, Activity records).
      name: 'prune-adr-windows', everyMs: 600_000,
      run: () => drain(() => adrWindowRepo.pruneEnded(database.db, Date.now() - retentionMs, 1000), 1000),
    },
    ...(opts.sweepRecordings ? [{ name: 'prune-call-recordings', everyMs: 600_000, run: opts.sweepRecordings }] : []),
    {
      // A counter whose window ended is never read again (the next request starts its key over);
      // a window's length more is left for clocks that differ between processes. Empty on SQLite.
      name: 'prune-rate-limit-counters', everyMs: 60_000,
      run: () => drain(() => pruneEndedWindows(database.db, Date.now() - 2 * rateLimitWindowMs, 1000), 1000),
    },
    // Subscriptions without a payment processor start their next term when a period ends.
    { name: 'renew-subscriptions', everyMs: 60_000, run: () => renewSubscriptions(database.db, Date.now()) },
    ...(opts.closeIdleConversations ? [{ name: 'close-idle-conversations', everyMs: 60_000, run: opts.closeIdleConversations }] : []),
  ];
}

/** Who runs a job's turn among the processes sharing a database: true when this one does now. */
export type JobTurns = (job: PeriodicJob) => Promise<boolean>;

/** The database's job turns (src/db/job-leases.ts) for the process `holder`. */
export function databaseJobTurns(database: Database, holder: string, now: () => number = Date.now): JobTurns {
  return (job) => takeJobTurn(database.db, job.name, holder, now(), job.everyMs);
}

export class Maintenance {
  #timers: NodeJS.Timeout[] = [];
  #running = new Set<Promise<unknown>>();

  constructor(
    private readonly jobs: PeriodicJob[],
    private readonly log: Pick<FastifyBaseLogger, 'info' | 'error'>,
    /** Without it every tick runs (one process, tests). */
    private readonly turns?: JobTurns,
  ) {}

  start(): void {
    for (const job of this.jobs) {
      const run = async () => (this.turns && !(await this.turns(job)) ? undefined : job.run());
      const tick = () => {
        const p = run()
          .then((n) => { if (typeof n === 'number' && n > 0) this.log.info({ job: job.name, n }, 'job done'); })
          .catch((err) => this.log.error({ err, job: job.name }, 'job failed'))
          .finally(() => this.#running.delete(p));
        this.#running.add(p);
      };
      tick();
      this.#timers.push(setInterval(tick, job.everyMs).unref());
    }
  }

  /** Stops scheduling and waits for runs in flight. */
  async stop(): Promise<void> {
    for (const t of this.#timers) clearInterval(t);
    this.#timers = [];
    await Promise.allSettled([...this.#running]);
  }
}
