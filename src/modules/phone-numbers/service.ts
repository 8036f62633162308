// Phone numbers of an organization (docs/numbers.md): searching its numbering provider's
// inventory, buying a number and binding it to an agent (assign), binding one the customer owns
// elsewhere (BYO), giving one back (return), and listing them. The provider is chosen in
// numbering-providers/carriers.ts (chooseNumberProvider); with none, the SIMULATED inventory.
import type { Config } from '../../config.ts';
import { isUniqueViolation } from '../../db/errors.ts';
import { bool, flag } from '../../db/flags.ts';
import type { AccountRow, Db, PhoneNumberRow } from '../../db/types.ts';
import type { Scope } from '../../http/auth.ts';
import { Conflict, HttpError, Invalid, NotFound } from '../../http/errors.ts';
import type { SecretBox } from '../../lib/crypto.ts';
import { isPhoneCountry, normalizePhone } from '../../lib/phone.ts';
import { nowMs } from '../../lib/time.ts';
import {
  CarrierError, NumberUnavailable, phraseDigits, SEARCH_LIMIT, TransientCarrierError, UnsupportedSearch,
  type AvailableNumber, type CarrierOptions, type NumberProvider, type NumberSearch, type NumberWebhooks,
} from '../../providers/index.ts';
import { accountRepo } from '../accounts/repository.ts';
import { chooseNumberProvider } from '../numbering-providers/carriers.ts';
import { numberTakenElsewhere } from './holders.ts';
import { presentNumber } from './present.ts';
import { phoneNumberRepo } from './repository.ts';

/** A reservation older than this whose purchase never finished (its process died) may be reconciled. */
export const STALE_RESERVATION_MS = 120_000;

export interface SearchBody { country: string; city?: string; region?: string; prefix?: string; strict?: boolean; phrase?: string }

export interface NumbersServiceDeps {
  db: Db;
  box: SecretBox;
  config: Pick<Config, 'publicUrl' | 'allowPrivateTargets'>;
  carrierOptions?: CarrierOptions;
  /**
   * Where a bought number's calls and texts go: our Twilio webhooks (whose paths the Twilio
   * paths' own module declares), as whole URLs; handed in by src/platform.ts because that module
   * sits above numbers (docs/architecture.md, "The order of modules").
   */
  webhooks: NumberWebhooks;
}

/** A provider's failure as the HTTP answer, naming the provider. */
function providerFailure(err: unknown, provider: string): never {
  if (err instanceof UnsupportedSearch) throw new Invalid(err.message);
  if (err instanceof NumberUnavailable) throw new Conflict(err.message);
  if (err instanceof TransientCarrierError && err.code === 'timeout') throw new HttpError(504, `${provider} did not answer in time: ${err.message}`);
  if (err instanceof CarrierError) throw new HttpError(502, `${provider} failed: ${err.message}`);
  throw err;
}

function checkCountry(raw: string): string {
  const code = raw.trim().toUpperCase();
  if (!isPhoneCountry(code)) throw new Invalid(`country '${raw}' is not an ISO 3166 alpha-2 country code with phone numbers (e.g. US, GB)`);
  return code;
}

function checkNumber(raw: string, country?: string): string {
  const r = normalizePhone(raw, country);
  if (!r.ok) throw new Invalid(`number '${raw}' is not a valid phone number (${r.reason})`);
  if (country && r.country && r.country !== country && !(['US', 'CA'].includes(country) && ['US', 'CA'].includes(r.country))) {
    throw new Invalid(`number ${r.e164} is not a number of country ${country}`);
  }
  return r.e164;
}

/** The digits a general area is named by, for widening a prefix search: NANP's area code, else 2. */
const areaLength = (country: string) => (country === 'US' || country === 'CA' ? 3 : 2);

export function numbersService(deps: NumbersServiceDeps) {
  const { db } = deps;

  /** The organization a request acts on and, for an agent (token or targetAccountId), that agent. */
  async function tenant(scope: Scope, targetAccountId: number | undefined): Promise<{ org: AccountRow; agent?: AccountRow }> {
    const account = await scope.target(targetAccountId, ['organization', 'agent']);
    if (account.kind === 'organization') return { org: account };
    const org = await accountRepo.findById(db, account.org_id!);
    if (!org) throw new NotFound(`organization of account ${account.id} was not found`);
    return { org, agent: account };
  }

  /** The agent a number is bound to: the named one, else the organization's first agent. */
  async function agentOf(t: { org: AccountRow; agent?: AccountRow }): Promise<number> {
    if (t.agent) return t.agent.id;
    const id = await accountRepo.firstAgentId(db, t.org.id);
    if (id === null) throw new Invalid(`organization ${t.org.id} has no agent account to hold the number; create one first or pass an agent's targetAccountId`);
    return id;
  }

  /** The organization's numbering provider; settings it cannot be built from are the provider's failure (400/502), not ours. */
  async function provider(orgId: number, providerId?: string): Promise<NumberProvider> {
    try {
      return await chooseNumberProvider({ db, box: deps.box, config: deps.config, carrierOptions: deps.carrierOptions }, orgId, providerId);
    } catch (err) {
      providerFailure(err, providerId ?? 'the numbering provider');
    }
  }

  /** Where a number's calls and texts go: our Twilio webhooks, which check Twilio's signature. */
  function webhooks(): NumberWebhooks {
    return { ...deps.webhooks };
  }

  /** What the provider offers, less what assign would refuse: numbers held here, or another organization's provider's phoneNumber. */
  async function runSearch(orgId: number, p: NumberProvider, q: NumberSearch): Promise<AvailableNumber[]> {
    let found: AvailableNumber[];
    try {
      found = await p.search(q);
    } catch (err) {
      providerFailure(err, p.name);
    }
    const held = await phoneNumberRepo.heldAmong(db, found.map((n) => n.number));
    const free: AvailableNumber[] = [];
    for (const n of found) {
      if (!held.has(n.number) && !(await numberTakenElsewhere(db, orgId, n.number, { providers: true }))) free.push(n);
    }
    return free;
  }

  async function search(scope: Scope, targetAccountId: number | undefined, kind: 'locality' | 'prefix' | 'phrase', body: SearchBody) {
    const t = await tenant(scope, targetAccountId);
    const country = checkCountry(body.country);
    const q: NumberSearch = { country, limit: SEARCH_LIMIT };
    const text = (v: string | undefined) => (v?.trim() ? v.trim() : undefined);
    if (kind !== 'prefix') {
      q.city = text(body.city);
      q.region = text(body.region);
    }
    let digits: string | undefined;
    if (kind === 'phrase') {
      const d = phraseDigits(body.phrase ?? '');
      if (!d.ok) throw new Invalid(`phrase ${d.reason}`);
      digits = d.digits;
      q.contains = digits;
    }
    if (kind === 'prefix') {
      const raw = (body.prefix ?? '').replace(/[\s().-]/g, '');
      if (!/^\d{1,10}$/.test(raw)) throw new Invalid(`prefix '${body.prefix ?? ''}' must be 1 to 10 digits of the national number (no country code)`);
      // A trunk 0 (020 in the UK) is not part of the number.
      q.prefix = country === 'US' || country === 'CA' ? raw.replace(/^1(?=\d{3})/, '') : raw.replace(/^0+/, '');
      if (!q.prefix) throw new Invalid(`prefix '${body.prefix}' names no digits of the national number`);
    }
    const p = await provider(t.org.id);
    let numbers = await runSearch(t.org.id, p, q);
    let widenedTo: string | undefined;
    if (kind === 'prefix' && numbers.length === 0 && body.strict === false && q.prefix!.length > areaLength(country)) {
      widenedTo = q.prefix!.slice(0, areaLength(country));
      numbers = await runSearch(t.org.id, p, { ...q, prefix: widenedTo });
    }
    if (numbers.length === 0) {
      const areas = p.areas?.(country);
      throw new NotFound(`No phone numbers available for this search at ${p.name}${p.simulated ? ' (simulated inventory)' : ''}. `
        + (areas ? `It has numbers in ${country} in these areas: ${areas}.` : 'Please try a different area.'));
    }
    return {
      success: true,
      message: `${numbers.length} phone number${numbers.length === 1 ? '' : 's'} available`,
      provider: p.name,
      simulated: p.simulated,
      limit: SEARCH_LIMIT,
      ...(digits !== undefined ? { phraseDigits: digits } : {}),
      ...(q.prefix !== undefined ? { prefix: q.prefix, strict: body.strict !== false, ...(widenedTo ? { widenedTo } : {}) } : {}),
      numbers: numbers.map((n) => ({ ...n, simulated: p.simulated })),
    };
  }

  /** Buys `row`'s number (already reserved) and marks it active; on failure, releases the reservation or keeps it for an operator. */
  async function buyReserved(p: NumberProvider, row: PhoneNumberRow): Promise<PhoneNumberRow> {
    const hooks = webhooks();
    let held;
    try {
      // A purchase whose answer was lost may have happened: look before buying again.
      held = (row.state !== 'reserved' ? await p.find(row.number) : null);
      if (held) await p.configure(held.providerRef, hooks);
      else held = await p.buy(row.number, hooks);
    } catch (err) {
      if (err instanceof TransientCarrierError && err.maybeApplied) {
        await phoneNumberRepo.update(db, row.id, { state: 'attention', last_error: err.message.slice(0, 500), updated_at: nowMs() });
        try {
          providerFailure(err, p.name);
        } catch (e) {
          if (e instanceof HttpError) throw new HttpError(e.statusCode, `${e.message}; ${row.number} may have been bought: it is kept for this organization in state 'attention' (assign it again to finish, or return it; docs/numbers.md)`);
          throw e;
        }
      }
      // Nothing was bought: the number is free again.
      if (row.state === 'reserved') await phoneNumberRepo.delete(db, row.id);
      providerFailure(err, p.name);
    }
    const done = {
      state: 'active' as const, provider_ref: held.providerRef, last_error: null, updated_at: nowMs(),
      ...(held.locality !== undefined ? { locality: held.locality } : {}),
      ...(held.region !== undefined ? { region: held.region } : {}),
      ...(held.capabilities ? { capabilities: JSON.stringify(held.capabilities) } : {}),
    };
    await phoneNumberRepo.update(db, row.id, done);
    return { ...row, ...done };
  }

  return {
    search,

    async assign(scope: Scope, targetAccountId: number | undefined, body: { number: string; country: string }) {
      const t = await tenant(scope, targetAccountId);
      const country = checkCountry(body.country);
      const number = checkNumber(body.number, country);
      const agentId = await agentOf(t);
      const p = await provider(t.org.id);
      // Another organization's provider sending from it makes it theirs, as a row would (docs/numbers.md, Whose a number is).
      if (await numberTakenElsewhere(db, t.org.id, number, { providers: true })) throw new Conflict(`number ${number} is not available`);
      const existing = await phoneNumberRepo.findInOrg(db, t.org.id, number);
      let row: PhoneNumberRow;
      if (existing) {
        const stale = existing.state === 'reserved' && nowMs() - existing.updated_at > STALE_RESERVATION_MS;
        if (existing.kind !== 'bought' || existing.provider !== p.name || !(existing.state === 'attention' || stale)) {
          throw new Conflict(`number ${number} is already held by organization ${t.org.id} (agent ${existing.agent_id ?? 'none'}, ${existing.state})`);
        }
        // Reconciling an unfinished purchase (docs/numbers.md): look at the provider, finish it.
        await phoneNumberRepo.update(db, existing.id, { agent_id: agentId, state: 'attention', updated_at: nowMs() });
        row = { ...existing, agent_id: agentId, state: 'attention' };
      } else {
        // The row first: of two concurrent assigns one inserts it, the other gets a 409 and buys nothing.
        const now = nowMs();
        try {
          row = await phoneNumberRepo.insert(db, {
            number, org_id: t.org.id, agent_id: agentId, kind: 'bought', state: 'reserved', provider: p.name, provider_ref: null,
            simulated: flag(p.simulated), country, locality: null, region: null, capabilities: null, last_error: null, created_at: now, updated_at: now,
          });
        } catch (err) {
          if (isUniqueViolation(err)) throw new Conflict(`number ${number} is not available`);
          throw err;
        }
      }
      const bought = await buyReserved(p, row);
      return {
        success: true, message: `Phone number ${number} assigned to agent ${agentId}`, simulated: p.simulated,
        phoneNumber: presentNumber(bought),
      };
    },

    async byoAssign(scope: Scope, targetAccountId: number | undefined, body: { number: string }) {
      scope.requireActor(['partner', 'reseller'], 'assign a BYO phone number');
      const t = await tenant(scope, targetAccountId);
      const number = checkNumber(body.number);
      const agentId = await agentOf(t);
      const parsed = normalizePhone(number);
      if (await numberTakenElsewhere(db, t.org.id, number, { providers: true })) throw new Conflict(`number ${number} is already held`);
      const now = nowMs();
      let row: PhoneNumberRow;
      try {
        row = await phoneNumberRepo.insert(db, {
          number, org_id: t.org.id, agent_id: agentId, kind: 'byo', state: 'active', provider: null, provider_ref: null, simulated: 0,
          country: parsed.ok ? parsed.country ?? null : null, locality: null, region: null, capabilities: null, last_error: null, created_at: now, updated_at: now,
        });
      } catch (err) {
        if (isUniqueViolation(err)) throw new Conflict(`number ${number} is already held`);
        throw err;
      }
      return {
        success: true, message: `Phone number ${number} assigned to agent ${agentId} (bring your own)`,
        phoneNumber: presentNumber(row),
        // What the customer points their provider at (docs/numbers.md, "Bring your own number").
        webhooks: webhooks(),
      };
    },

    async return(scope: Scope, targetAccountId: number | undefined, body: { number: string }) {
      scope.requireActor(['partner', 'reseller', 'organization'], 'return a phone number');
      const t = await tenant(scope, targetAccountId);
      const number = checkNumber(body.number);
      const row = await phoneNumberRepo.findInOrg(db, t.org.id, number);
      if (!row || (t.agent && row.agent_id !== t.agent.id)) throw new NotFound(`number ${number} was not found`);
      if (row.state === 'reserved' && nowMs() - row.updated_at <= STALE_RESERVATION_MS) throw new Conflict(`number ${number} is still being bought; try again shortly`);
      let released = false;
      if (row.kind === 'bought' && row.provider) {
        const p = await provider(t.org.id, row.provider);
        try {
          const ref = row.provider_ref ?? (await p.find(number))?.providerRef;
          if (ref) await p.release(ref);
          released = true;
        } catch (err) {
          providerFailure(err, p.name);
        }
      }
      await phoneNumberRepo.delete(db, row.id);
      return {
        success: true,
        message: released ? `Phone number ${number} released at ${row.provider} and unassigned` : `Phone number ${number} unassigned`,
        number, released,
      };
    },

    /**
     * The organization and agent a text to one of its SIMULATED numbers reaches (the simulated
     * arrival, docs/numbers.md): 404 for a number it (or the agent acting) does not hold, 400 for
     * a real one (its texts arrive from its provider), 409 while it is not active.
     */
    async simulatedHolder(scope: Scope, targetAccountId: number | undefined, raw: string): Promise<{ orgId: number; agentId: number | null; number: string }> {
      const t = await tenant(scope, targetAccountId);
      const number = checkNumber(raw);
      const row = await phoneNumberRepo.findInOrg(db, t.org.id, number);
      if (!row || (t.agent && row.agent_id !== t.agent.id)) throw new NotFound(`number ${number} was not found`);
      if (!bool(row.simulated)) throw new Invalid(`number ${number} is not a simulated number: texts to it arrive from ${row.provider ?? 'its own provider'}`);
      if (row.state !== 'active') throw new Conflict(`number ${number} is ${row.state}`);
      return { orgId: t.org.id, agentId: row.agent_id, number };
    },

    async list(scope: Scope, targetAccountId: number | undefined) {
      const t = await tenant(scope, targetAccountId);
      const rows = await phoneNumberRepo.listForOrg(db, t.org.id, t.agent?.id);
      return { success: true, message: `${rows.length} phone number${rows.length === 1 ? '' : 's'}`, phoneNumbers: rows.map(presentNumber) };
    },
  };
}

export type NumbersService = ReturnType<typeof numbersService>;
