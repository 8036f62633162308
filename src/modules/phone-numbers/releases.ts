// Deleting an organization or an agent gives its numbers back (docs/numbers.md, "Deleting an
// organization or agent"): in the deletion's transaction, each number it holds is unbound, and each
// one bought at a real provider gets a durable release job (number_releases, run by
// release-number.ts), which keeps what releasing needs once the holder is gone: the provider, the
// number's reference there, and a copy of the provider's settings (secrets still sealed). BYO
// numbers are only unbound (the customer keeps them); simulated ones cost nothing and ask no one.
import type { Executor } from '../../db/types.ts';
import { newId } from '../../lib/ids.ts';
import { SIMULATED_NUMBERS } from '../../providers/index.ts';
import { numberingRepo } from '../numbering-providers/repository.ts';
import { releaseRepo, phoneNumberRepo } from './repository.ts';
import { STALE_RESERVATION_MS } from './service.ts';

/** The queue's table, and the name its runners are woken by. */
export const NUMBER_RELEASES = 'number_releases' as const;

/**
 * Unbinds the numbers of organization `orgId` (of its agent `agentId` only, when given) and queues
 * the release of each bought one, in `tx` (the deletion's transaction). Returns how many releases
 * were queued; the caller wakes the queue after its commit.
 */
export async function queueNumberReleases(tx: Executor, holder: { orgId: number; agentId?: number; reason: string }, now: number): Promise<number> {
  const rows = await phoneNumberRepo.listForOrg(tx, holder.orgId, holder.agentId);
  const bought = rows.filter((r) => r.kind === 'bought' && r.provider && r.provider !== SIMULATED_NUMBERS);
  const providers = new Map<string, Awaited<ReturnType<typeof numberingRepo.find>>>();
  for (const p of new Set(bought.map((r) => r.provider!))) providers.set(p, await numberingRepo.find(tx, holder.orgId, p));
  await releaseRepo.insert(tx, bought.map((r) => {
    const settings = providers.get(r.provider!);
    return {
      id: newId('nrel', now), number: r.number, org_id: holder.orgId, agent_id: r.agent_id, reason: holder.reason,
      provider: r.provider!, provider_ref: r.provider_ref,
      provider_config: settings?.config ?? null, provider_secrets: settings?.secrets ?? null,
      // A purchase still in flight (reserved) settles within its timeout: its number is looked up
      // once it has, so one bought just after the deletion is released too.
      run_at: r.state === 'reserved' ? now + STALE_RESERVATION_MS : now,
      created_at: now, updated_at: now,
    };
  }));
  await phoneNumberRepo.deleteForHolder(tx, holder.orgId, holder.agentId);
  return bought.length;
}
