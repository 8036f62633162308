// An account's catalog (the default catalog under its partner's items under its reseller's), the
// plan an id names in it, and a plan's limits put into the organization's task limits. Used by
// the billing service and by the accounts service, whose productPlanId, offeredProductPlanId and
// sellPlanId name plans of these catalogs.
import type { AccountRow, Executor } from '../../db/types.ts';
import { Invalid } from '../../http/errors.ts';
import { notifyQueue } from '../../queue/waker.ts';
import { mergeLimits, type TaskLimits } from '../tasks/limits.ts';
import { TASKS } from '../tasks/queue-hooks.ts';
import { limitRepo, taskRepo } from '../tasks/repository.ts';
import { DEFAULT_ADDONS, DEFAULT_PLANS, layer, limitsOf, type Addon, type Catalog, type Layered, type Plan, type Source } from './catalog.ts';
import { catalogRepo } from './repository.ts';

/** Whose catalog an account reads: its partner's items, and its reseller's over them (none for a partner). */
export function catalogOwners(account: Pick<AccountRow, 'id' | 'kind' | 'partner_id' | 'reseller_id'>): { partnerId: number | null; resellerId: number | null } {
  if (account.kind === 'partner') return { partnerId: account.id, resellerId: null };
  if (account.kind === 'reseller') return { partnerId: account.partner_id, resellerId: account.id };
  return { partnerId: account.partner_id, resellerId: account.reseller_id };
}

/** The catalog in force for these owners: each id from the highest layer that has it. */
export async function catalogOf(db: Executor, owners: { partnerId: number | null; resellerId: number | null }): Promise<Catalog> {
  const ids = [owners.partnerId, owners.resellerId].filter((id): id is number => id !== null);
  const rows = await catalogRepo.listFor(db, ids);
  const of = (ownerId: number | null, kind: 'plan' | 'addon') =>
    rows.filter((r) => r.owner_id === ownerId && r.kind === kind).map((r) => JSON.parse(r.body) as unknown);
  const plans = layer<Plan>((p) => p.productPlanId, [
    ['default', DEFAULT_PLANS], ['partner', of(owners.partnerId, 'plan') as Plan[]], ['reseller', of(owners.resellerId, 'plan') as Plan[]],
  ]);
  const addons = layer<Addon>((a) => a.addonId, [
    ['default', DEFAULT_ADDONS], ['partner', of(owners.partnerId, 'addon') as Addon[]], ['reseller', of(owners.resellerId, 'addon') as Addon[]],
  ]);
  return { plans, addons };
}

export async function findPlan(db: Executor, owners: { partnerId: number | null; resellerId: number | null }, planId: string): Promise<Layered<Plan> | undefined> {
  return (await catalogOf(db, owners)).plans.find((p) => p.item.productPlanId === planId);
}

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
  await taskRepo.undeferPending(tx, orgId, now);
  await notifyQueue(tx, TASKS);
  return merged;
}

export type { Source };
