// Subscriptions without a payment processor renew at the end of their period (docs/billing.md,
// "Subscriptions"): the period rolls over by whole terms until it holds now, the plan as subscribed
// continues, and the included amounts start again (they are counted per period). A processor's
// subscription is renewed by the processor's own events instead. Run by the worker's maintenance
// (src/maintenance.ts) every minute; each renewal is its own transaction under the organization's
// lock, so two processes renew a subscription once.
import type { Db } from '../../db/types.ts';
import { accountRepo } from '../accounts/repository.ts';
import { periodEnd } from './catalog.ts';
import { releaseHeldTasks } from './plans.ts';
import { subscriptionRepo } from './repository.ts';

/** Renews every subscription due at `now` in batches of `batch`; answers how many were renewed. */
export async function renewSubscriptions(db: Db, now: number, batch = 100): Promise<number> {
  let renewed = 0;
  for (;;) {
    const due = await subscriptionRepo.dueForRenewal(db, now, batch);
    for (const row of due) {
      const done = await db.transaction().execute(async (tx) => {
        await accountRepo.lock(tx, row.org_id); // as a billing period change: one at a time per organization
        const sub = await subscriptionRepo.find(tx, row.id);
        if (!sub || sub.state !== 'active' || sub.processor !== null || Number(sub.period_end) > now) return false;
        let start = Number(sub.period_end);
        let end = periodEnd(start, sub.term);
        // A process that was down for several terms renews to the term that holds now.
        while (end <= now) { start = end; end = periodEnd(start, sub.term); }
        await subscriptionRepo.update(tx, sub.id, { period_start: start, period_end: end, updated_at: now });
        // Tasks an included amount of the ended period held back are looked at again.
        await releaseHeldTasks(tx, sub.org_id, now);
        return true;
      });
      if (done) renewed++;
    }
    if (due.length < batch) return renewed;
  }
}
