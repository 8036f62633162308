// An account's catalog (the default catalog under its partner's items under its reseller's), the
// plan an id names in it, and a plan's limits put into the organization's task limits. Used by
// the billing service and by the accounts service, whose productPlanId, offeredProductPlanId and
// sellPlanId name plans of these catalogs.
import type { Executor } from '../../db/types.ts';
import { Invalid } from '../../http/errors.ts';
import { notifyQueue } from '../../queue/waker.ts';
import { mergeLimits, type TaskLimits } from '../limits/task-limits.ts';
import { TASKS } from '../tasks/queue-hooks.ts';
import { limitRepo, taskRepo } from '../tasks/repository.ts';
import { limitsOf, type Plan, type Source } from './catalog.ts';
import { findPlan } from './catalogs.ts';

export { catalogOf, catalogOwners, findPlan } from './catalogs.ts';

/** The plan `planId` names in the owners' catalog, or a 400 naming `field`. */
export async function requirePlan(db: Executor, owners: { partnerId: number | null; resellerId: number | null }, planId: string, field: string): Promise<Plan> {
  const found = await findPlan(db, owners, planId);
  if (!found) throw new Invalid(`${field} '${planId}' is not a plan of this catalog (see GET /api/v2/product/productCatalog or /allAvailablePlans)`);
  return found.item;
}

/**
 * The organization's task limits under `plan`: its concurrency and daily caps replace the ones in
 * force (business hours, cooldowns and retries are kept), and tasks a limit had put off are looked
 * at again. Inside the caller's transaction; the caller wakes the task runners after it commits.
 */
export async function applyPlanLimits(tx: Executor, orgId: number, plan: Plan, now: number): Promise<TaskLimits> {
  await limitRepo.lock(tx, orgId);
  const merged = mergeLimits(await limitRepo.load(tx, orgId), limitsOf(plan));
  await limitRepo.save(tx, orgId, merged, now);
  await releaseHeldTasks(tx, orgId, now);
  return merged;
}

/**
 * Tasks of the organization a limit or an included amount held back are looked at again now (a
 * new plan, billing period or add-on may let them start), and the runners of every process are
 * notified when the caller's transaction commits; the caller wakes this process's runner after it.
 */
export async function releaseHeldTasks(tx: Executor, orgId: number, now: number): Promise<void> {
  await taskRepo.undeferPending(tx, orgId, now);
  await notifyQueue(tx, TASKS);
}

export type { Source };
