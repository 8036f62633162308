// What speech providers are used for, counted per organization and vendor in the vendor's own unit
// (issue 35): seconds of audio recognised, characters synthesized. Kept in the usage rollups like
// every other metric (usageRepo.add), shown by GET /api/v2/stats/usage with allItems
// (docs/billing.md, "Speech providers' units"). The voice side calls recordSpeechUsage.
import type { Executor } from '../../db/types.ts';
import { isSpeechVendor, SPEECH_VENDOR_UNITS, SPEECH_VENDORS, type SpeechUnit, type SpeechVendor } from '../../speech/vendors.ts';
import { usageRepo, type SpeechMetric } from './repository.ts';

/** The most one record may add: a day of audio, or ten million characters (a mistake, not a call). */
const MAX_AMOUNT: Record<SpeechUnit, number> = { audioSeconds: 86_400, characters: 10_000_000 };

/** The rollup metric of a vendor's unit: audio is kept in milliseconds, so short turns add up exactly. */
export function speechMetric(vendor: SpeechVendor, unit: SpeechUnit): SpeechMetric {
  return `speech:${vendor}:${unit === 'audioSeconds' ? 'audioMs' : 'characters'}`;
}

/**
 * The usage answer's speech keys (`speech:<vendor>:audioSeconds`, `speech:<vendor>:characters`),
 * each with the metric it is read from and what that metric is divided by (1000 ms to a second).
 */
export const SPEECH_ITEMS: readonly { key: string; metric: SpeechMetric; divisor: number }[] = SPEECH_VENDORS.flatMap((vendor) =>
  SPEECH_VENDOR_UNITS[vendor].map((unit) => ({ key: `speech:${vendor}:${unit}`, metric: speechMetric(vendor, unit), divisor: unit === 'audioSeconds' ? 1000 : 1 })));

/**
 * Counts `amount` of `unit` (seconds of audio, fractions kept to the millisecond; characters) used
 * with `vendor` for the organization, on the local day of `at` (epoch ms) in its time zone. In the
 * caller's transaction when `db` is one (counted when it commits), else in one of its own. Nothing
 * for 0; a vendor that does not count in `unit`, or an amount that is negative, not finite or past
 * a day of audio (ten million characters), is a programming error (RangeError).
 */
export async function recordSpeechUsage(db: Executor, orgId: number, vendor: SpeechVendor, unit: SpeechUnit, amount: number, at: number): Promise<void> {
  if (!isSpeechVendor(vendor) || !SPEECH_VENDOR_UNITS[vendor].includes(unit)) throw new RangeError(`speech usage: ${String(vendor)} is not counted in ${String(unit)}`);
  if (!Number.isFinite(amount) || amount < 0 || amount > MAX_AMOUNT[unit]) throw new RangeError(`speech usage: ${unit} must be 0 to ${MAX_AMOUNT[unit]} (got ${amount})`);
  const n = Math.round(unit === 'audioSeconds' ? amount * 1000 : amount);
  if (n === 0) return;
  const amounts = { [speechMetric(vendor, unit)]: n };
  if (db.isTransaction) await usageRepo.add(db, orgId, at, amounts);
  else await db.transaction().execute((tx) => usageRepo.add(tx, orgId, at, amounts));
}
