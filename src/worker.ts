// Background work of a worker process. The foundation has one periodic job (pruning expired
// one-time tokens); the task queue and webhook deliveries plug in here as they arrive.
import type { FastifyBaseLogger } from 'fastify';
import type { Database } from './db/index.ts';
import { tokenRepo } from './modules/tokens/repository.ts';

export interface PeriodicJob {
  name: string;
  everyMs: number;
  run(): Promise<number | void>;
}

export function maintenanceJobs(database: Database): PeriodicJob[] {
  return [
    { name: 'prune-expired-one-time-tokens', everyMs: 60_000, run: () => tokenRepo.pruneExpired(database.db, Date.now()) },
  ];
}

export class Worker {
  #timers: NodeJS.Timeout[] = [];
  #running = new Set<Promise<unknown>>();

  constructor(private readonly jobs: PeriodicJob[], private readonly log: Pick<FastifyBaseLogger, 'info' | 'error'>) {}

  start(): void {
    for (const job of this.jobs) {
      const tick = () => {
        const p = job.run()
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
