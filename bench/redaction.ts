// Precision and recall of the redaction of personal data (src/modules/compliance/redact.ts) on a
// generated set of transcript lines, seeded (BENCH_SEED, default 37) so every run sees the same
// set: BENCH_LINES lines (default 20,000), a third with one planted item (a card number that
// passes Luhn, a US SSN, an email address, a phone number, a street address; each written in
// several ways people and recognisers write them), a third with a decoy that must stay (order and
// invoice numbers, prices, times, dates, a 16-digit number that fails Luhn, a zip code alone,
// "3 dogs on the way"), a third plain filler. Per type:
//   recall    = planted items replaced by their own placeholder, with nothing of them left;
//   precision = placeholders of that type that replaced a planted item of that type / all of that type.
// Plus the redaction's speed (MB/s of text). Numbers spoken as words are outside what it claims
// (docs/campaigns-part-b.md) and are not planted.
//   npm run bench:redaction
import { performance } from 'node:perf_hooks';
import { luhn, redactPersonalData } from '../src/modules/compliance/redact.ts';

const LINES = Number(process.env.BENCH_LINES ?? 20_000);
let seed = Number(process.env.BENCH_SEED ?? 37) >>> 0;
/** mulberry32: a small seeded generator. */
function rand(): number {
  seed = (seed + 0x6d2b79f5) >>> 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
const digits = (n: number) => Array.from({ length: n }, () => Math.floor(rand() * 10)).join('');
const int = (lo: number, hi: number) => lo + Math.floor(rand() * (hi - lo + 1));

type Kind = 'card' | 'ssn' | 'email' | 'phone' | 'address';
const KINDS: Kind[] = ['card', 'ssn', 'email', 'phone', 'address'];

function card(): string {
  const prefix = pick(['4', '51', '52', '37', '6011']);
  const length = prefix === '37' ? 15 : 16;
  let body = prefix + digits(length - prefix.length - 1);
  for (let d = 0; d < 10; d++) if (luhn(body + d)) { body += d; break; }
  const style = pick(['plain', 'spaces', 'dashes']);
  if (style === 'plain') return body;
  const groups = length === 15 ? [4, 6, 5] : [4, 4, 4, 4];
  const parts: string[] = [];
  let i = 0;
  for (const g of groups) { parts.push(body.slice(i, i + g)); i += g; }
  return parts.join(style === 'spaces' ? ' ' : '-');
}
function ssn(): string {
  const a = String(int(1, 665)).padStart(3, '0');
  const b = String(int(1, 99)).padStart(2, '0');
  const c = String(int(1, 9999)).padStart(4, '0');
  return pick([`${a}-${b}-${c}`, `${a} ${b} ${c}`]);
}
const NAMES = ['john', 'mary.smith', 'j.doe', 'alex_k', 'sam+news', 'li.wei', 'o.brien'];
const DOMAINS = ['gmail.com', 'example.org', 'mail.co.uk', 'acme-dental.com', 'yahoo.fr'];
function email(): string {
  return `${pick(NAMES)}${int(0, 99)}@${pick(DOMAINS)}`;
}
function phone(): string {
  const area = `${int(2, 9)}${digits(2)}`;
  const ex = `${int(2, 9)}${digits(2)}`;
  const line = digits(4);
  return pick([`(${area}) ${ex}-${line}`, `${area}-${ex}-${line}`, `${area}.${ex}.${line}`, `+1${area}${ex}${line}`, `+1 ${area} ${ex} ${line}`,
    `1-${area}-${ex}-${line}`, `+44 20 ${digits(4)} ${digits(4)}`, `+49 30 ${digits(8)}`]);
}
const STREETS = ['Oak', 'Maple', 'Main', 'Sunset', 'Martin Luther King', 'Elm', 'Lake Shore', 'Pine Hill', 'Cedar'];
const SUFFIXES = ['Street', 'St', 'Avenue', 'Ave.', 'Road', 'Rd', 'Boulevard', 'Blvd', 'Lane', 'Drive', 'Court', 'Way', 'Place', 'Terrace'];
const CITIES = [['Springfield', 'IL', '62704'], ['Austin', 'TX', '78701'], ['Portland', 'OR', '97205'], ['Boston', 'MA', '02108']];
function address(): string {
  const base = `${int(1, 9999)} ${rand() < 0.2 ? `${pick(['North', 'S.', 'East', 'W'])} ` : ''}${pick(STREETS)} ${pick(SUFFIXES)}`;
  const unit = rand() < 0.3 ? `, ${pick(['Apt', 'Suite', 'Unit'])} ${int(1, 40)}${pick(['', 'B'])}` : '';
  const [city, st, zip] = pick(CITIES);
  const tail = rand() < 0.5 ? `, ${city}, ${st} ${zip}` : '';
  return `${base}${unit}${tail}`;
}
const MAKE: Record<Kind, () => string> = { card, ssn, email, phone, address };
/**
 * Forms outside what the patterns claim, planted in one line of ten so the figures say what they
 * miss: an SSN as nine bare digits with no "SSN" before it, an email spelled out ("at", "dot"), a
 * phone number with its digits in pairs, an address without a street suffix.
 */
const HARD: Record<Kind, () => string> = {
  card: () => card().replace(/ /g, '  '),
  ssn: () => `${String(int(1, 665)).padStart(3, '0')}${digits(2).replace(/^00/, '01')}${String(int(1, 9999)).padStart(4, '0')}`,
  email: () => `${pick(NAMES).replace(/[._+]/g, '')} at ${pick(['gmail', 'yahoo', 'outlook'])} dot com`,
  phone: () => `${int(2, 9)}${digits(1)} ${digits(2)} ${digits(2)} ${digits(2)} ${digits(2)}`,
  address: () => `${int(1, 9999)} ${pick(STREETS)}, ${pick(CITIES)[0]}`,
};
const LEAD: Record<Kind, string[]> = {
  card: ['my card number is', 'the card is', 'charge it to', 'use'],
  ssn: ['my social is', 'SSN', 'the social security number is', 'it is'],
  email: ['my email is', 'send it to', 'you can write to', 'mail me at'],
  phone: ['call me at', 'my number is', 'reach me on', 'the cell is'],
  address: ['I live at', 'ship it to', 'the address is', 'we are at'],
};
const FILLER = ['Hi, thanks for calling back.', 'Could we move the appointment to Thursday?', 'Yes, that works for me.',
  'I need to check with my wife first.', 'How much would that cost per month?', 'Okay, sounds good, bye.',
  'The last visit was fine, thank you.', 'Can you repeat that please?'];
function decoy(): string {
  return pick([
    `my order number is ${digits(8)}`, `invoice ${int(1000, 99999)} was paid`, `it costs $${int(10, 5000)}.${digits(2)}`,
    `see you at ${int(1, 12)}:${pick(['00', '15', '30', '45'])} pm`, `on ${int(1, 12)}/${int(1, 28)}/20${int(20, 30)}`,
    `the code was ${(() => { let b = `4${digits(15)}`; while (luhn(b)) b = `4${digits(15)}`; return b; })()}`,
    `the zip is ${digits(5)}`, `room ${int(100, 999)}`, `I have 3 dogs on the way home`, `we need 25 units by Friday`,
    `version 2.4.1 crashed`, `about 45 minutes ago`, `account ending in ${digits(4)}`, `reference ${digits(6)}-${digits(3)}`,
    // Decoys the patterns cannot tell apart: a tracking number that happens to pass Luhn, a ten-digit reference.
    `tracking number ${(() => { let b = `9${digits(15)}`; while (!luhn(b)) b = `9${digits(15)}`; return b; })()}`, `confirmation ${int(2, 9)}${digits(9)}`,
  ]);
}

interface Line { text: string; planted?: { kind: Kind; value: string; hard: boolean }; decoy?: string }
const lines: Line[] = [];
for (let i = 0; i < LINES; i++) {
  const r = rand();
  if (r < 1 / 3) {
    const kind = pick(KINDS);
    const hard = rand() < 0.1;
    const value = (hard ? HARD : MAKE)[kind]();
    lines.push({ text: `${pick(FILLER)} ${pick(LEAD[kind])} ${value}. ${pick(FILLER)}`, planted: { kind, value, hard } });
  } else if (r < 2 / 3) {
    const d = decoy();
    lines.push({ text: `${pick(FILLER)} ${d}. ${pick(FILLER)}`, decoy: d.replace(/[\d$.:/-]+/g, '#').replace(/(# ?)+/g, '# ').trim() });
  } else {
    lines.push({ text: `${pick(FILLER)} ${pick(FILLER)}` });
  }
}

const stats = Object.fromEntries(KINDS.map((k) => [k, { planted: 0, found: 0, placeholders: 0, correct: 0, hard: 0, hardFound: 0 }])) as Record<Kind, { planted: number; found: number; placeholders: number; correct: number; hard: number; hardFound: number }>;
let decoyHits = 0;
/** Which decoys were given a placeholder (their first words). */
const decoyKinds = new Map<string, number>();
let bytes = 0;
const t0 = performance.now();
const out = lines.map((l) => { bytes += Buffer.byteLength(l.text); return redactPersonalData(l.text); });
const ms = performance.now() - t0;
lines.forEach((l, i) => {
  const text = out[i]!;
  const tags = KINDS.flatMap((k) => Array.from(text.matchAll(new RegExp(`\\[${k}\\]`, 'g')), () => k));
  for (const k of tags) stats[k].placeholders++;
  if (!l.planted) {
    decoyHits += tags.length;
    if (tags.length > 0) decoyKinds.set(l.decoy ?? 'filler', (decoyKinds.get(l.decoy ?? 'filler') ?? 0) + 1);
    return;
  }
  const s = stats[l.planted.kind];
  s.planted++;
  if (l.planted.hard) s.hard++;
  // Found: its own placeholder is there, and nothing of it is left: no run of 3+ of its digits
  // (a street name alone is not the address), no @ of an email.
  const leftovers = l.planted.value.match(/\d{3,}/g) ?? [];
  const own = tags.includes(l.planted.kind);
  const left = leftovers.some((w) => text.includes(w)) || (l.planted.kind === 'email' && text.includes('@'));
  if (own && !left) { s.found++; if (l.planted.hard) s.hardFound++; }
  if (own) s.correct++;
});
const pct = (a: number, b: number) => (b === 0 ? 'n/a' : `${((100 * a) / b).toFixed(1)} %`);
console.log(`redaction: ${LINES} lines (seed ${process.env.BENCH_SEED ?? 37}), ${(bytes / 1e6).toFixed(2)} MB in ${ms.toFixed(0)} ms = ${((bytes / 1e6) / (ms / 1000)).toFixed(1)} MB/s`);
console.log('| type | planted | recall | precision | recall in the forms the patterns claim | recall in the forms outside them (of them) |');
console.log('|---|---|---|---|---|---|');
let P = 0; let F = 0; let C = 0; let H = 0;
for (const k of KINDS) {
  const s = stats[k];
  P += s.planted; F += s.found; C += s.correct; H += s.placeholders;
  console.log(`| \`[${k}]\` | ${s.planted} | ${pct(s.found, s.planted)} | ${pct(s.correct, s.placeholders)} | ${pct(s.found - s.hardFound, s.planted - s.hard)} | ${pct(s.hardFound, s.hard)} (${s.hard}) |`);
}
console.log(`| all | ${P} | ${pct(F, P)} | ${pct(C, H)} | | |`);
console.log(`placeholders in decoy and filler lines: ${decoyHits} (${LINES - P} lines); by decoy: ${[...decoyKinds].map(([k, n]) => `"${k}" ${n}`).join(', ')}`);
