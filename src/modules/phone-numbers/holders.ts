// Whose a number is (docs/numbers.md, "Whose a number is"): the organization and agent holding it
// in phone_numbers, else the organizations whose numbering provider names it (numbering's
// orgsOwningNumber); and the agent's own number to call and text from. Here, above numbering,
// because it reads both.
import type { Db } from '../../db/types.ts';
import { normalizePhone } from '../../lib/phone.ts';
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
