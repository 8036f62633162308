// The one check of every request Twilio makes to us (docs/carriers.md, "Callbacks from Twilio"): which
// organization's auth token it is checked with, its X-Twilio-Signature over the URL Twilio was
// given (config.publicUrl + the path and query it called; src/providers/twilio/signature.ts does
// the arithmetic), the AccountSid it names, and one answer for every refusal. A request is for an
// organization we know from what it names — a task (task-callbacks.ts), a conversation (calls.ts),
// or the number called or texted (twilioNumberHolder: calls and texts to our numbers) — and is
// checked with that organization's own token only, so another organization's never helps.
import crypto from 'node:crypto';
import type { Config } from '../../config.ts';
import type { Db } from '../../db/types.ts';
import { Conflict, Forbidden } from '../../http/errors.ts';
import type { SecretBox } from '../../lib/crypto.ts';
import { normalizePhone } from '../../lib/phone.ts';
import { TWILIO } from '../../providers/index.ts';
import { first, type TwilioParams } from '../../providers/twilio/form.ts';
import { signedByTwilio, type SignedRequest } from '../../providers/twilio/signature.ts';
import { orgsOwningNumber, providerSettings } from '../numbering-providers/carriers.ts';
import { phoneNumberRepo } from '../phone-numbers/repository.ts';

type Log = { warn(obj: object, msg: string): void };

export interface TwilioVerifyDeps {
  db: Db;
  box: SecretBox;
  config: Pick<Config, 'publicUrl'>;
}

/** A request Twilio made, as far as its check goes: what it signed, and the parameters it sent. */
export interface TwilioRequest extends SignedRequest {
  /** The parameters Twilio sent (the form, or the query of a GET): AccountSid, To. */
  params: TwilioParams;
}

/** What every refused request of Twilio's answers (403), whatever the reason: the log has the reason. */
export const TWILIO_REFUSED = 'X-Twilio-Signature is missing or does not match this request';
const WRONG_ACCOUNT = 'AccountSid does not match the organization\'s twilio account';
/** An auth token nobody has: what a request for something unknown is checked against. */
const NOBODYS_AUTH_TOKEN = crypto.randomBytes(16).toString('hex');

/**
 * Refuses a request of Twilio's for something we do not have (a number no organization has, a
 * task or conversation that does not exist) exactly as one whose signature does not match: the
 * same 403 and body, after checking its signature against a token nobody has (so it costs about
 * what a real check does). Otherwise anyone could list what this deployment serves (its numbers,
 * its tasks) by telling 404 from 403. The reason is logged.
 */
export function refuseTwilioRequest(
  deps: Pick<TwilioVerifyDeps, 'config'>, req: SignedRequest, log: Log, what: string, reason: string, about: Record<string, unknown> = {},
): never {
  signedByTwilio(NOBODYS_AUTH_TOKEN, deps.config.publicUrl, req);
  log.warn({ ...about, hasSignature: Boolean(req.signature) }, `${what} refused: ${reason}`);
  throw new Forbidden(TWILIO_REFUSED);
}

/** The AccountSid Twilio posted, when it posted one, must be the organization's own. */
function checkAccount(req: TwilioRequest, accountSid: string): void {
  const given = first(req.params, 'AccountSid');
  if (given !== undefined && given !== accountSid) throw new Forbidden(WRONG_ACCOUNT);
}

/**
 * Checks a request Twilio made for one of the organization's calls, texts or conversations: its
 * X-Twilio-Signature with the auth token of the organization's twilio provider, then the
 * AccountSid it names. 403 when the signature is missing or does not match (or the organization
 * has no twilio provider), or the AccountSid is another account's.
 */
export async function verifyTwilioRequest(deps: TwilioVerifyDeps, orgId: number, req: TwilioRequest, log: Log, what: string, about: Record<string, unknown>): Promise<void> {
  const settings = (await providerSettings(deps.db, deps.box, orgId, TWILIO)) ?? {};
  if (!signedByTwilio(settings.authToken, deps.config.publicUrl, req)) {
    log.warn({ ...about, hasSignature: Boolean(req.signature) }, `${what} refused: signature missing or invalid`);
    throw new Forbidden(TWILIO_REFUSED);
  }
  checkAccount(req, settings.accountSid ?? '');
}

/** Who a Twilio webhook's number reaches: its organization, and the agent holding it (null: the organization's first agent). */
export interface TwilioNumberHolder { orgId: number; agentId: number | null }

/**
 * Who a Twilio webhook for one of our numbers (To: a call or text coming in) is for, checked. A
 * number in phone_numbers (bought or BYO, docs/numbers.md) is its organization's and its
 * agent's, once `active`: checked with that organization's twilio auth token; `reserved` or
 * `attention` is refused like a bad signature. A number nobody holds there is the twilio
 * provider's whose phoneNumber it is (numbers configured by hand; of several organizations, those
 * whose accountSid is the posted AccountSid, each checked with its own token), answered by the
 * first agent. An unknown number and a signature that does not match are the same 403.
 */
export async function twilioNumberHolder(deps: TwilioVerifyDeps, req: TwilioRequest, log: Log, what: string): Promise<TwilioNumberHolder> {
  const to = first(req.params, 'To');
  const number = to ? normalizePhone(to) : undefined;
  const held = number?.ok ? await phoneNumberRepo.findByNumber(deps.db, number.e164) : undefined;
  if (!held) return { orgId: await providerNumberOwner(deps, req, to, log, what), agentId: null };
  if (held.state !== 'active') refuseTwilioRequest(deps, req, log, what, `the number is ${held.state}`, { to, orgId: held.org_id });
  const s = await providerSettings(deps.db, deps.box, held.org_id, TWILIO);
  if (!s?.authToken) refuseTwilioRequest(deps, req, log, what, 'the organization holding the number has no twilio provider', { to, orgId: held.org_id });
  await verifyTwilioRequest(deps, held.org_id, req, log, what, { to });
  return { orgId: held.org_id, agentId: held.agent_id };
}

/** The organization whose twilio provider's phoneNumber is `to` (see twilioNumberHolder). */
async function providerNumberOwner(deps: TwilioVerifyDeps, req: TwilioRequest, to: string | undefined, log: Log, what: string): Promise<number> {
  const owners: Array<{ orgId: number; accountSid: string; authToken: string }> = [];
  for (const orgId of to ? await orgsOwningNumber(deps.db, to) : []) {
    const s = await providerSettings(deps.db, deps.box, orgId, TWILIO);
    if (s?.phoneNumber && sameNumber(s.phoneNumber, to!)) owners.push({ orgId, accountSid: s.accountSid ?? '', authToken: s.authToken ?? '' });
  }
  if (owners.length === 0) refuseTwilioRequest(deps, req, log, what, 'no organization has this number', { to });
  const accountSid = first(req.params, 'AccountSid');
  const candidates = owners.length > 1 ? owners.filter((o) => o.accountSid === accountSid) : owners;
  const verified = candidates.filter((o) => signedByTwilio(o.authToken, deps.config.publicUrl, req));
  if (verified.length === 0) {
    log.warn({ to, hasSignature: Boolean(req.signature) }, `${what} refused: signature missing or invalid`);
    throw new Forbidden(TWILIO_REFUSED);
  }
  if (verified.length > 1) {
    log.warn({ to, orgs: verified.map((o) => o.orgId) }, `${what} refused: the number belongs to several organizations with the same twilio account`);
    throw new Conflict('This number is configured in more than one organization with the same Twilio account');
  }
  const org = verified[0]!;
  checkAccount(req, org.accountSid);
  return org.orgId;
}

function sameNumber(a: string, b: string): boolean {
  const x = normalizePhone(a);
  const y = normalizePhone(b);
  return x.ok && y.ok && x.e164 === y.e164;
}
