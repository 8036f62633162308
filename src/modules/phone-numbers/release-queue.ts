// The number-release queue of one process (a durable queue over number_releases): in a worker, the
// runner releases numbers (release-number.ts). Built once per process by src/platform.ts.
import { DurableQueue, type DurableQueueDeps } from '../../queue/durable-queue.ts';
import { QueueProducer } from '../../queue/producer.ts';
import { createReleaseHandler, type ReleaseHandlerDeps } from './release-number.ts';
import { NUMBER_RELEASES } from './releases.ts';

export interface NumberReleaseQueueDeps extends DurableQueueDeps {
  /** What the job runs with (the providers' settings and adapters); `now` is the queue's clock. */
  handler: Omit<ReleaseHandlerDeps, 'now'>;
  /** Releases run at once by one process. Default 2. */
  concurrency?: number;
}

export type NumberReleaseQueue = DurableQueue<typeof NUMBER_RELEASES>;

export function numberReleaseQueue(deps: NumberReleaseQueueDeps): NumberReleaseQueue {
  return new DurableQueue(deps, {
    producer: new QueueProducer(NUMBER_RELEASES, deps.wakeups), name: 'number-releases', leaseMs: 60_000, concurrency: deps.concurrency ?? 2,
    worker: (now) => ({ handler: createReleaseHandler({ ...deps.handler, now }) }),
  });
}
