// Whose a number is (docs/numbers.md, "Whose a number is"): the organization and agent holding it
// in phone_numbers, else the organizations whose numbering provider names it (numbering's
// orgsOwningNumber); and the agent's own number to call and text from. Here, above numbering,
// because it reads both.
import type { Db } from '../../db/types.ts';
import { normalizePhone } from '../../lib/phone.ts';
import { numberTimeZones } from '../../lib/phone-zones.ts';
import type { Carrier } from '../../providers/index.ts';
import { digitsOf, orgsOwningNumber } from '../numbering-providers/carriers.ts';
import { phoneNumberRepo } from './repository.ts';

/**
 * A number as E.164, compared as orgsOwningNumber compares: its digits are the international form,
 * with or without `+` (14155552671, +1 415-555-2671, tel:+14155552671).
 */
function e164Of(text: string): ReturnType<typeof normalizePhone> {
  const digits = digitsOf(text);
  return normalizePhone(/^\d{7,15}$/.test(digits) ? `+${digits}` : text);
}

/** Who a number reaches: the organization holding it, and the agent (null: the organization's first agent). */
export interface NumberHolder { orgId: number; agentId: number | null }

/**
 * Every organization a number is its own to (docs/numbers.md, "Whose a number is"): the one holding
 * it in phone_numbers (bought or brought, `active`), answered by the agent holding it, then those
 * whose numbering provider names it as `phoneNumber` (configured by hand), answered by their first
 * agent. The one lookup by number behind receiveMessage's `targetAgent` and the checks that keep a
 * number one organization's.
 */
export async function numberHolders(db: Db, called: string): Promise<NumberHolder[]> {
  const holders: NumberHolder[] = [];
  const e164 = e164Of(called);
  const held = e164.ok ? await phoneNumberRepo.findByNumber(db, e164.e164) : undefined;
  if (held?.state === 'active') holders.push({ orgId: held.org_id, agentId: held.agent_id });
  for (const orgId of await orgsOwningNumber(db, called)) {
    if (!holders.some((x) => x.orgId === orgId)) holders.push({ orgId, agentId: null });
  }
  return holders;
}

/**
 * Why `number` cannot become organization `orgId`'s, or undefined when it can: another
 * organization holds it in phone_numbers (any state: a purchase in progress counts), or, with
 * `providers`, another organization's numbering provider names it as its `phoneNumber` (its
 * carrier sends from it). The same answer whichever it is, so nobody learns which.
 */
export async function numberTakenElsewhere(db: Db, orgId: number, number: string, opts: { providers: boolean }): Promise<boolean> {
  const e164 = e164Of(number);
  if (e164.ok) {
    const held = await phoneNumberRepo.findByNumber(db, e164.e164);
    if (held && held.org_id !== orgId) return true;
  }
  return opts.providers && (await orgsOwningNumber(db, number)).some((o) => o !== orgId);
}

/**
 * The number an agent's calls and texts go out from on `carrier` (docs/numbers.md, "Calling and
 * texting from a number"): the oldest `active` number it bought at that carrier's provider;
 * undefined (the provider's own `phoneNumber` or Messaging Service, as configured) when it holds
 * none there. A number brought from elsewhere (BYO) is not used: we cannot tell that the carrier
 * may send from it.
 */
export async function agentCallerId(db: Db, orgId: number, agentId: number, carrier: Pick<Carrier, 'name'>): Promise<string | undefined> {
  const rows = await phoneNumberRepo.listForOrg(db, orgId, agentId);
  return rows.find((r) => r.state === 'active' && r.kind === 'bought' && r.provider === carrier.name)?.number;
}

/** How a caller ID was chosen (docs/campaigns.md, "Caller ID"). */
export type CallerIdBasis = 'agent' | 'area-code' | 'time-zone' | 'country' | 'default';

/** The area code of a NANP number (+1 NPA …), the only plan whose area codes the kept data names; else undefined. */
function nanpAreaCode(e164: string): string | undefined {
  return /^\+1\d{10}$/.test(e164) ? e164.slice(2, 5) : undefined;
}

/**
 * Among `numbers` (E.164, in the organization's order), the one nearest `target`: the same area
 * code (NANP), else the same single time zone (the kept numbering data maps numbers to zones, not
 * to states or regions: the zone stands in for the region), else the same country; undefined when
 * none is near. Pure apart from the zone table (lib/phone-zones.ts).
 */
export async function nearestNumber(target: string, numbers: readonly string[]): Promise<{ number: string; basis: Exclude<CallerIdBasis, 'agent' | 'default'> } | undefined> {
  const area = nanpAreaCode(target);
  if (area) {
    const same = numbers.find((n) => nanpAreaCode(n) === area);
    if (same) return { number: same, basis: 'area-code' };
  }
  const zones = await numberTimeZones(target);
  if (zones.length === 1) {
    for (const n of numbers) {
      const z = await numberTimeZones(n);
      if (z.length === 1 && z[0] === zones[0]) return { number: n, basis: 'time-zone' };
    }
  }
  const country = normalizePhone(target);
  if (country.ok && country.country) {
    const same = numbers.find((n) => { const p = normalizePhone(n); return p.ok && p.country === country.country; });
    if (same) return { number: same, basis: 'country' };
  }
  return undefined;
}

/**
 * The number a call to `target` goes out from under the agent's callerIdStrategy `nearest`: among
 * the organization's active numbers bought at `carrier`'s provider (any of its agents'), the
 * nearest (nearestNumber); else the agent's own (agentCallerId) or the provider's default.
 */
export async function nearestCallerId(db: Db, orgId: number, agentId: number, target: string, carrier: Pick<Carrier, 'name'>): Promise<{ from: string | undefined; basis: CallerIdBasis }> {
  const rows = await phoneNumberRepo.listForOrg(db, orgId);
  const usable = rows.filter((r) => r.state === 'active' && r.kind === 'bought' && r.provider === carrier.name).map((r) => r.number);
  const near = await nearestNumber(target, usable);
  if (near) return { from: near.number, basis: near.basis };
  const own = await agentCallerId(db, orgId, agentId, carrier);
  return { from: own, basis: own ? 'agent' : 'default' };
}
