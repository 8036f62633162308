// The SIMULATED number inventory: numbers from ranges set aside for drama and documentation, which
// never reach a real subscriber (NANP 555-0100…0199 in each area code; Ofcom's drama ranges in the
// UK; ACMA's in Australia), so search → assign → return works on a laptop. Deterministic: the same
// search answers the same numbers (less those held, which the phone-numbers module filters out).
import {
  containsPattern, NumberUnavailable, UnsupportedSearch,
  type AvailableNumber, type HeldNumber, type NumberProvider, type NumberSearch,
} from './numbers.ts';

export const SIMULATED_NUMBERS = 'simulated';

interface Block {
  country: string;
  callingCode: string;
  /** National digits before the last `size` digits. */
  start: string;
  /** How many numbers: start + 0…size-1, zero-padded to `width` digits. */
  first: number;
  size: number;
  width: number;
  locality: string | null;
  region: string | null;
  mobile?: boolean;
}

const nanp = (area: string, locality: string, region: string, country = 'US'): Block =>
  ({ country, callingCode: '1', start: `${area}5550`, first: 100, size: 100, width: 3, locality, region });

/** The inventory: 100 numbers in each NANP area code below, 1,000 in each UK and AU range. */
export const SIMULATED_BLOCKS: readonly Block[] = [
  nanp('212', 'New York', 'NY'), nanp('216', 'Cleveland', 'OH'), nanp('312', 'Chicago', 'IL'),
  nanp('415', 'San Francisco', 'CA'), nanp('512', 'Austin', 'TX'), nanp('737', 'Austin', 'TX'),
  nanp('206', 'Seattle', 'WA'), nanp('305', 'Miami', 'FL'), nanp('617', 'Boston', 'MA'),
  nanp('416', 'Toronto', 'ON', 'CA'), nanp('604', 'Vancouver', 'BC', 'CA'),
  // Ofcom: 020 7946 0000–0999, 0161 496 0000–0999, 0113 496 0000–0999, 07700 900000–900999.
  { country: 'GB', callingCode: '44', start: '207946', first: 0, size: 1000, width: 4, locality: 'London', region: 'England' },
  { country: 'GB', callingCode: '44', start: '161496', first: 0, size: 1000, width: 4, locality: 'Manchester', region: 'England' },
  { country: 'GB', callingCode: '44', start: '113496', first: 0, size: 1000, width: 4, locality: 'Leeds', region: 'England' },
  { country: 'GB', callingCode: '44', start: '7700900', first: 0, size: 1000, width: 3, locality: null, region: null, mobile: true },
  // ACMA: 02 5550 xxxx (NSW), 03 7010 xxxx (VIC).
  { country: 'AU', callingCode: '61', start: '25550', first: 0, size: 1000, width: 4, locality: 'Sydney', region: 'NSW' },
  { country: 'AU', callingCode: '61', start: '37010', first: 0, size: 1000, width: 4, locality: 'Melbourne', region: 'VIC' },
];

export const SIMULATED_COUNTRIES = [...new Set(SIMULATED_BLOCKS.map((b) => b.country))];

function* numbersOf(b: Block): Generator<{ national: string; e164: string }> {
  for (let i = 0; i < b.size; i++) {
    const national = b.start + String(b.first + i).padStart(b.width, '0');
    yield { national, e164: `+${b.callingCode}${national}` };
  }
}

const same = (a: string | null, b: string) => a !== null && a.toLowerCase() === b.trim().toLowerCase();

function present(b: Block, e164: string): AvailableNumber {
  return {
    number: e164, locality: b.locality, region: b.region, country: b.country,
    capabilities: { voice: true, sms: true, mms: b.country !== 'GB' }, monthlyPrice: null,
  };
}

export class SimulatedNumbers implements NumberProvider {
  readonly name = SIMULATED_NUMBERS;
  readonly simulated = true;

  search(q: NumberSearch): Promise<AvailableNumber[]> {
    const blocks = SIMULATED_BLOCKS.filter((b) => b.country === q.country);
    if (blocks.length === 0) {
      throw new UnsupportedSearch(`the simulated inventory has no numbers in ${q.country} (it has ${SIMULATED_COUNTRIES.join(', ')})`, this.name);
    }
    const out: AvailableNumber[] = [];
    for (const b of blocks) {
      if (q.city && !same(b.locality, q.city)) continue;
      if (q.region && !same(b.region, q.region)) continue;
      for (const n of numbersOf(b)) {
        if (out.length >= q.limit) return Promise.resolve(out);
        if (q.prefix && !n.national.startsWith(q.prefix)) continue;
        if (q.contains && !containsPattern(n.national, q.contains)) continue;
        out.push(present(b, n.e164));
      }
    }
    return Promise.resolve(out);
  }

  /** Its areas in `country`: "212 (New York, NY), 216 (Cleveland, OH), …"; the prefix a search can take. */
  areas(country: string): string | undefined {
    const blocks = SIMULATED_BLOCKS.filter((b) => b.country === country);
    if (blocks.length === 0) return undefined;
    return blocks.map((b) => {
      const code = b.callingCode === '1' ? b.start.slice(0, 3) : b.start.slice(0, b.start.length - 3);
      const place = [b.locality, b.region].filter(Boolean).join(', ') || (b.mobile ? 'mobile' : '');
      return place ? `${code} (${place})` : code;
    }).join(', ');
  }

  /** The block a number of the inventory is in, or undefined. */
  static blockOf(number: string): Block | undefined {
    return SIMULATED_BLOCKS.find((b) => {
      const national = number.startsWith(`+${b.callingCode}`) ? number.slice(b.callingCode.length + 1) : '';
      const tail = national.slice(b.start.length);
      return national.startsWith(b.start) && tail.length === b.width && Number(tail) >= b.first && Number(tail) < b.first + b.size;
    });
  }

  buy(number: string): Promise<HeldNumber> {
    const block = SimulatedNumbers.blockOf(number);
    if (!block) {
      return Promise.reject(new NumberUnavailable(`${number} is not in the simulated inventory (fictional ranges only: docs/numbers.md)`, this.name));
    }
    const { locality, region, capabilities } = present(block, number);
    return Promise.resolve({ number, providerRef: `SIM-${number.slice(1)}`, locality, region, capabilities });
  }

  find(): Promise<HeldNumber | null> {
    return Promise.resolve(null);
  }

  configure(): Promise<void> {
    return Promise.resolve();
  }

  release(): Promise<void> {
    return Promise.resolve();
  }
}
