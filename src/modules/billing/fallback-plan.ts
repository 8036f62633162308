// The plan an organization falls back to when its subscription ends (cancelled, or unpaid when a
// processor gives up): its reseller's sell plan, else the service's default plan unless that one is
// unmetered (ending a paid subscription must not lift every included amount), else pplan-free.
import type { AccountRow, Executor } from '../../db/types.ts';
import { accountRepo } from '../accounts/repository.ts';
import { DEFAULT_PLANS, FREE_PLAN_ID, unmetered, type Plan } from './catalog.ts';
import { catalogOwners, findPlan } from './plans.ts';

export async function fallbackPlan(db: Executor, org: AccountRow, defaultPlanId: string): Promise<Plan> {
  const owners = catalogOwners(org);
  const reseller = org.reseller_id === null ? undefined : await accountRepo.findById(db, org.reseller_id);
  const sell = reseller?.sell_plan_id ? await findPlan(db, owners, reseller.sell_plan_id) : undefined;
  if (sell) return sell.item;
  const byDefault = await findPlan(db, owners, defaultPlanId);
  if (byDefault && !unmetered(byDefault.item)) return byDefault.item;
  return DEFAULT_PLANS.find((p) => p.productPlanId === FREE_PLAN_ID)!;
}
