// Time-sortable string ids for records (tasks, events, deliveries): `<prefix>_` + a ULID body,
// i.e. a 48-bit millisecond timestamp and 80 random bits in Crockford base32, so ids sort by
// creation time as plain strings on both engines and reveal nothing guessable.
import crypto from 'node:crypto';

const ALPHABET = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
const TIME_LEN = 10;
const RANDOM_LEN = 16;
const MAX_TIME = 2 ** 48 - 1;

let lastTime = -1;
let lastRandom: number[] = [];

function encodeTime(ms: number): string {
  let out = '';
  for (let i = 0; i < TIME_LEN; i++) {
    out = ALPHABET[ms % 32] + out;
    ms = Math.floor(ms / 32);
  }
  return out;
}

function randomDigits(): number[] {
  const bytes = crypto.randomBytes(RANDOM_LEN);
  return Array.from(bytes, (b) => b & 31);
}

/**
 * Ids made in the same millisecond by this process increment the previous random part, so they
 * still sort in creation order (ULID's monotonic mode); across processes order within one
 * millisecond is arbitrary, which is fine for ordering by time.
 */
function nextRandom(ms: number): number[] {
  if (ms === lastTime) {
    const next = lastRandom.slice();
    let i = RANDOM_LEN - 1;
    while (i >= 0 && next[i] === 31) next[i--] = 0;
    // 2^80 ids in one millisecond cannot happen; a wrap would only lose ordering, not uniqueness
    if (i >= 0) next[i]++;
    lastRandom = next;
  } else {
    lastTime = ms;
    lastRandom = randomDigits();
  }
  return lastRandom;
}

/** A new id such as `tsk_01J9ZQ3K8M7X2D4N6P8R0T2V4W`; `prefix` without the underscore. */
export function newId(prefix: string, now: number = Date.now()): string {
  if (!Number.isInteger(now) || now < 0 || now > MAX_TIME) throw new RangeError(`id time out of range: ${now}`);
  return `${prefix}_${encodeTime(now)}${nextRandom(now).map((d) => ALPHABET[d]).join('')}`;
}

/** The creation time (unix ms) encoded in an id made by newId, or null if it is not one. */
export function idTime(id: string): number | null {
  const body = id.slice(id.lastIndexOf('_') + 1);
  if (body.length !== TIME_LEN + RANDOM_LEN) return null;
  let ms = 0;
  for (const ch of body.slice(0, TIME_LEN)) {
    const d = ALPHABET.indexOf(ch);
    if (d < 0) return null;
    ms = ms * 32 + d;
  }
  return ms <= MAX_TIME ? ms : null;
}
