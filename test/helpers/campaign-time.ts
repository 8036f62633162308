// Times for the campaign-rule tests (calling windows read in the recipient's zone), and claiming and
// running their tasks one by one as the runner does.
import type { Db, TaskRow } from '../../src/db/types.ts';
import type { createTaskEngine } from '../../src/modules/tasks/queue-hooks.ts';
import type { createTaskHandler } from '../../src/modules/tasks/run-task.ts';
import type { Outcome } from '../../src/queue/runner.ts';
import { task } from '../queue/fixtures.ts';

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

type TaskEngine = ReturnType<typeof createTaskEngine>;
type Handler = ReturnType<typeof createTaskHandler>;

/** Claims due tasks of these ids; others' tasks claimed meanwhile are canceled at once, untouched. */
export async function claimOnly(e: TaskEngine, db: Db, ids: string[]): Promise<TaskRow[]> {
  const rows = await e.claim(db, 100);
  for (const r of rows.filter((x) => !ids.includes(x.id))) await e.complete(db, r, { state: 'canceled' });
  return rows.filter((r) => ids.includes(r.id));
}

/** Runs a claimed task with the handler and applies its outcome as the runner does; the task as stored after. */
export async function runClaimed(e: TaskEngine, handler: Handler, db: Db, row: TaskRow): Promise<TaskRow> {
  const out = (await handler(row, { signal: new AbortController().signal })) as Outcome<TaskRow>;
  if (out.kind === 'complete') await e.complete(db, row, { state: out.state, set: out.set });
  else if (out.kind === 'retry') await e.retry(db, row, { runAt: out.runAt, set: out.set });
  else throw new Error(`unexpected outcome ${JSON.stringify(out)}`);
  return task(db, row.id);
}
