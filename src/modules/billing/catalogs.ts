// An account's catalog: the default catalog under its partner's items under its reseller's, and
// the plan an id names in it. Read by the billing services, the accounts service (through
// plans.ts) and the task queue's admission (entitlements.ts), so it imports nothing of the tasks module.
import type { AccountRow, Executor } from '../../db/types.ts';
import { DEFAULT_ADDONS, DEFAULT_PLANS, layer, type Addon, type Catalog, type Layered, type Plan } from './catalog.ts';
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
