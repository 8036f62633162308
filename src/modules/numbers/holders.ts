// Whose a number is (docs/numbers.md, "Whose a number is"): the organization and agent holding it
// in phone_numbers, else the organizations whose numbering provider names it (numbering's
// orgsOwningNumber); and the agent's own number to call and text from. Here, above numbering,
// because it reads both.
import type { Db } from '../../db/types.ts';
import type { SecretBox } from '../../lib/crypto.ts';
import { Conflict, Forbidden } from '../../http/errors.ts';
import { normalizePhone } from '../../lib/phone.ts';
import { TWILIO, verifyTwilioSignature, type Carrier } from '../../providers/index.ts';
import { digitsOf, orgsOwningNumber, providerSettings, refuseTwilioRequest, TWILIO_REFUSED, type TwilioNumberRequest } from '../numbering/carriers.ts';
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

/**
 * The organization a Twilio webhook for one of our numbers belongs to (inbound texts and calls):
 * the one whose twilio provider's phoneNumber is `To`; of several, those whose accountSid is the
 * posted AccountSid. Each candidate is checked with its own auth token, so another
 * organization's token never helps. An unknown number and a signature that does not match are
 * the same 403 (refuseTwilioRequest).
 */
export async function twilioNumberOwner(db: Db, box: SecretBox, r: TwilioNumberRequest, log: { warn(obj: object, msg: string): void }, what: string): Promise<number> {
  return (await twilioNumberHolder(db, box, r, log, what)).orgId;
}

/** Who a Twilio webhook's number reaches: its organization, and the agent holding it (null: the organization's first agent). */
export interface TwilioNumberHolder { orgId: number; agentId: number | null }

/**
 * Who a Twilio webhook for one of our numbers is for. A number in phone_numbers (bought or BYO,
 * docs/numbers.md) is its organization's and its agent's, once `active`: checked with that
 * organization's twilio auth token; `reserved` or `attention` is refused like a bad signature.
 * A number nobody holds there falls back to the twilio provider whose phoneNumber it is
 * (twilioNumberOwner's rule, numbers configured by hand), answered by the first agent.
 */
export async function twilioNumberHolder(db: Db, box: SecretBox, r: TwilioNumberRequest, log: { warn(obj: object, msg: string): void }, what: string): Promise<TwilioNumberHolder> {
  const to = r.to ? normalizePhone(r.to) : undefined;
  const held = to?.ok ? await phoneNumberRepo.findByNumber(db, to.e164) : undefined;
  if (!held) return { orgId: await providerNumberOwner(db, box, r, log, what), agentId: null };
  if (held.state !== 'active') refuseTwilioRequest(r, log, what, `the number is ${held.state}`, { to: r.to, orgId: held.org_id });
  const s = await providerSettings(db, box, held.org_id, TWILIO);
  const token = s?.authToken ?? '';
  if (token === '') refuseTwilioRequest(r, log, what, 'the organization holding the number has no twilio provider', { to: r.to, orgId: held.org_id });
  if (!verifyTwilioSignature(token, r.url, r.signed, r.signature)) {
    log.warn({ to: r.to, hasSignature: Boolean(r.signature) }, `${what} refused: signature missing or invalid`);
    throw new Forbidden(TWILIO_REFUSED);
  }
  if (r.accountSid !== undefined && r.accountSid !== (s?.accountSid ?? '')) throw new Forbidden('AccountSid does not match the organization\'s twilio account');
  return { orgId: held.org_id, agentId: held.agent_id };
}

/** The organization whose twilio provider's phoneNumber is `To` (see twilioNumberOwner). */
async function providerNumberOwner(db: Db, box: SecretBox, r: TwilioNumberRequest, log: { warn(obj: object, msg: string): void }, what: string): Promise<number> {
  const owners: Array<{ orgId: number; accountSid: string; authToken: string }> = [];
  for (const orgId of r.to ? await orgsOwningNumber(db, r.to) : []) {
    const s = await providerSettings(db, box, orgId, TWILIO);
    if (s?.phoneNumber && sameNumber(s.phoneNumber, r.to!)) owners.push({ orgId, accountSid: s.accountSid ?? '', authToken: s.authToken ?? '' });
  }
  if (owners.length === 0) refuseTwilioRequest(r, log, what, 'no organization has this number', { to: r.to });
  const candidates = owners.length > 1 ? owners.filter((o) => o.accountSid === r.accountSid) : owners;
  const verified = candidates.filter((o) => o.authToken !== '' && verifyTwilioSignature(o.authToken, r.url, r.signed, r.signature));
  if (verified.length === 0) {
    log.warn({ to: r.to, hasSignature: Boolean(r.signature) }, `${what} refused: signature missing or invalid`);
    throw new Forbidden(TWILIO_REFUSED);
  }
  if (verified.length > 1) {
    log.warn({ to: r.to, orgs: verified.map((o) => o.orgId) }, `${what} refused: the number belongs to several organizations with the same twilio account`);
    throw new Conflict('This number is configured in more than one organization with the same Twilio account');
  }
  const org = verified[0]!;
  if (r.accountSid !== undefined && r.accountSid !== org.accountSid) throw new Forbidden('AccountSid does not match the organization\'s twilio account');
  return org.orgId;
}

function sameNumber(a: string, b: string): boolean {
  const x = normalizePhone(a);
  const y = normalizePhone(b);
  return x.ok && y.ok && x.e164 === y.e164;
}
