// Twilio's phone numbers through its REST API (2010-04-01) with the organization's own account:
// AvailablePhoneNumbers/{country}/Local to search (InLocality, InRegion, AreaCode, Contains), with
// the country's monthly price from the Pricing API (pricing.ts),
// IncomingPhoneNumbers to buy (VoiceUrl, SmsUrl, StatusCallback), find, update and release.
// Requests go out as the carrier's do (rest.ts): a hard timeout, no redirects, a bounded answer,
// and Twilio's answers turned into the carrier error types.
import { callingCodeOf } from '../../lib/phone.ts';
import { PermanentCarrierError, TransientCarrierError } from '../carrier.ts';
import {
  NumberUnavailable, UnsupportedSearch,
  type AvailableNumber, type HeldNumber, type NumberProvider, type NumberSearch, type NumberWebhooks,
} from '../numbers.ts';
import { localNumberPrice, pricingBaseOf } from './pricing.ts';
import { TWILIO, TwilioRest, type TwilioOptions } from './rest.ts';

/** Twilio filters by region (InRegion) only in these countries. */
const REGION_COUNTRIES = new Set(['US', 'CA']);
/** Twilio's AreaCode applies only to NANP numbers. */
const AREA_CODE_COUNTRIES = new Set(['US', 'CA']);
/** Twilio's codes for a number that cannot be bought (not available, or not ours to buy). */
const UNAVAILABLE_CODES = new Set(['21422', '21452', '21421']);

type Json = Record<string, unknown>;

export interface TwilioNumberSettings { accountSid: string; authToken: string; apiBaseUrl?: string }

export class TwilioNumbers implements NumberProvider {
  readonly name = TWILIO;
  readonly simulated = false;
  readonly #rest: TwilioRest;
  /** Whose prices, and where the Pricing API is (pricing.ts). */
  readonly #pricing: { accountSid: string; base: string };

  constructor(settings: TwilioNumberSettings, opts: TwilioOptions = {}) {
    this.#rest = new TwilioRest(settings, opts);
    this.#pricing = { accountSid: settings.accountSid, base: pricingBaseOf(settings.apiBaseUrl) };
  }

  /** The hard limit of one request (connect to last byte). */
  get timeoutMs(): number {
    return this.#rest.timeoutMs;
  }

  #url(rest: string, query?: URLSearchParams): string {
    return this.#rest.accountUrl(rest, query);
  }

  #request(method: 'GET' | 'POST' | 'DELETE', url: string, form: URLSearchParams | undefined, signal: AbortSignal | undefined): Promise<Json | undefined> {
    return this.#rest.send(method, url, { form, signal });
  }

  async search(q: NumberSearch, signal?: AbortSignal): Promise<AvailableNumber[]> {
    const query = new URLSearchParams();
    if (q.city) query.set('InLocality', q.city);
    if (q.region) {
      if (!REGION_COUNTRIES.has(q.country)) throw new UnsupportedSearch(`twilio cannot filter numbers in ${q.country} by region (only in ${[...REGION_COUNTRIES].join(' and ')})`, TWILIO);
      query.set('InRegion', q.region);
    }
    // Contains (Twilio's pattern): digits matched anywhere in the number, `+` anchoring it to the
    // number's start (country code included); a wildcard only at its ends, none between digits.
    let contains: string | undefined;
    if (q.contains) {
      const core = q.contains.replace(/^\*+|\*+$/g, '');
      if (core.includes('*')) throw new UnsupportedSearch(`twilio cannot search with a wildcard between digits (phrase became ${q.contains})`, TWILIO);
      contains = core;
    }
    if (q.prefix) {
      if (AREA_CODE_COUNTRIES.has(q.country)) {
        if (q.prefix.length < 3) throw new UnsupportedSearch(`twilio searches ${q.country} numbers by area code: prefix needs at least 3 digits`, TWILIO);
        query.set('AreaCode', q.prefix.slice(0, 3));
      }
      if (q.prefix.length > 3 || !AREA_CODE_COUNTRIES.has(q.country)) {
        if (contains) throw new UnsupportedSearch('twilio cannot search by a prefix and a phrase at once', TWILIO);
        contains = `+${callingCodeOf(q.country) ?? ''}${q.prefix}`;
      }
    }
    if (contains && contains.length > 16) throw new UnsupportedSearch(`twilio searches for at most 16 characters (${contains} has ${contains.length})`, TWILIO);
    if (contains) query.set('Contains', contains);
    query.set('PageSize', String(q.limit));
    // The country's monthly price (Pricing API), asked beside the search; null when it cannot be had.
    const price = localNumberPrice(this.#rest, this.#pricing, q.country);
    let json: Json | undefined;
    try {
      json = await this.#request('GET', this.#url(`AvailablePhoneNumbers/${encodeURIComponent(q.country)}/Local.json`, query), undefined, signal);
    } catch (err) {
      // Twilio answers 404 for a country whose local numbers it does not offer.
      if (err instanceof PermanentCarrierError && err.httpStatus === 404) throw new UnsupportedSearch(`twilio offers no local numbers in ${q.country}`, TWILIO);
      if (err instanceof PermanentCarrierError && err.httpStatus === 400) throw new UnsupportedSearch(`twilio cannot do this search: ${err.message}`, TWILIO);
      throw err;
    }
    const list = Array.isArray(json?.available_phone_numbers) ? json.available_phone_numbers as Json[] : [];
    const monthlyPrice = await price;
    const out: AvailableNumber[] = [];
    for (const n of list) {
      if (typeof n.phone_number !== 'string') continue;
      // A longer prefix is checked here too: Contains matches anywhere in the number.
      if (q.prefix && !nationalOf(n.phone_number, q.country).startsWith(q.prefix)) continue;
      const caps = (n.capabilities && typeof n.capabilities === 'object' ? n.capabilities : {}) as Json;
      out.push({
        number: n.phone_number,
        locality: typeof n.locality === 'string' && n.locality ? n.locality : null,
        region: typeof n.region === 'string' && n.region ? n.region : null,
        country: typeof n.iso_country === 'string' ? n.iso_country : q.country,
        capabilities: { voice: caps.voice === true, sms: caps.SMS === true || caps.sms === true, mms: caps.MMS === true || caps.mms === true },
        monthlyPrice,
      });
      if (out.length >= q.limit) break;
    }
    return out;
  }

  #hooksForm(hooks: NumberWebhooks): URLSearchParams {
    return new URLSearchParams({
      VoiceUrl: hooks.voiceUrl, VoiceMethod: 'POST',
      StatusCallback: hooks.voiceStatusUrl, StatusCallbackMethod: 'POST',
      SmsUrl: hooks.smsUrl, SmsMethod: 'POST',
    });
  }

  #held(json: Json | undefined): HeldNumber {
    const sid = typeof json?.sid === 'string' ? json.sid : '';
    const number = typeof json?.phone_number === 'string' ? json.phone_number : '';
    if (!sid.startsWith('PN')) throw new TransientCarrierError('twilio: answer without a phone number sid', TWILIO, { maybeApplied: true });
    const caps = json?.capabilities && typeof json.capabilities === 'object' ? json.capabilities as Json : undefined;
    return {
      number, providerRef: sid,
      ...(caps ? { capabilities: { voice: caps.voice === true, sms: caps.SMS === true || caps.sms === true, mms: caps.MMS === true || caps.mms === true } } : {}),
    };
  }

  async buy(number: string, hooks: NumberWebhooks, signal?: AbortSignal): Promise<HeldNumber> {
    const form = this.#hooksForm(hooks);
    form.set('PhoneNumber', number);
    try {
      return this.#held(await this.#request('POST', this.#url('IncomingPhoneNumbers.json'), form, signal));
    } catch (err) {
      if (err instanceof PermanentCarrierError && err.code && UNAVAILABLE_CODES.has(err.code)) throw new NumberUnavailable(`twilio cannot sell ${number}: ${err.message}`, TWILIO);
      throw err;
    }
  }

  async find(number: string, signal?: AbortSignal): Promise<HeldNumber | null> {
    const json = await this.#request('GET', this.#url('IncomingPhoneNumbers.json', new URLSearchParams({ PhoneNumber: number })), undefined, signal);
    const list = Array.isArray(json?.incoming_phone_numbers) ? json.incoming_phone_numbers as Json[] : [];
    const hit = list.find((n) => n.phone_number === number);
    return hit ? this.#held(hit) : null;
  }

  async configure(providerRef: string, hooks: NumberWebhooks, signal?: AbortSignal): Promise<void> {
    await this.#request('POST', this.#url(`IncomingPhoneNumbers/${encodeURIComponent(providerRef)}.json`), this.#hooksForm(hooks), signal);
  }

  async release(providerRef: string, signal?: AbortSignal): Promise<void> {
    try {
      await this.#request('DELETE', this.#url(`IncomingPhoneNumbers/${encodeURIComponent(providerRef)}.json`), undefined, signal);
    } catch (err) {
      // Already gone from the account: released.
      if (err instanceof PermanentCarrierError && err.httpStatus === 404) return;
      throw err;
    }
  }
}

/** An E.164 number's national digits (its country's calling code dropped: NANP's 1, the UK's 44). */
function nationalOf(e164: string, country: string): string {
  const digits = e164.replace(/^\+/, '');
  const code = callingCodeOf(country) ?? '';
  return digits.startsWith(code) ? digits.slice(code.length) : digits;
}
