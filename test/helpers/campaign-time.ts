// Times for the campaign-rule tests (calling windows read in the recipient's zone).

const DAY = 24 * 3_600_000;

/** The first Monday 15:00 UTC after now: 07:00 or 08:00 in Los Angeles, 10:00 or 11:00 in New York. */
export function nextMonday15(): number {
  const d = new Date(Date.now() + DAY);
  d.setUTCHours(15, 0, 0, 0);
  while (d.getUTCDay() !== 1) d.setUTCDate(d.getUTCDate() + 1);
  return d.getTime();
}

/** Wall time in `tz` as "Mon 09:00". */
export function wall(ms: number, tz: string): string {
  return new Intl.DateTimeFormat('en-US', { timeZone: tz, weekday: 'short', hour: '2-digit', minute: '2-digit', hourCycle: 'h23' }).format(ms).replace(',', '');
}
