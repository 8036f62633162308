// The do-not-call lists as the task queue asks them (src/modules/compliance/): at submission, a
// call or text to a listed number is refused (one task: 422 naming the number; a batch or a CSV:
// that row, the rest accepted), and again at the moment of dialling or sending (run-task.ts), so
// a number listed after submission is never reached: the task ends canceled, saying why.
import type { AccountRow, Executor, TaskRow } from '../../db/types.ts';
import { doNotCallRepo } from '../compliance/repository.ts';
import { blockedReason, doNotCallBlocks, listsOf } from '../compliance/service.ts';

type OrgLadder = Pick<AccountRow, 'id' | 'reseller_id' | 'partner_id'>;

const reached = (row: Pick<TaskRow, 'type' | 'target'>) => (row.type === 'call' || row.type === 'text') && typeof row.target === 'string';

/** For each of `rows` (one organization's) whose number is listed, why it may not go out, by index. */
export async function doNotCallRefusals(db: Executor, org: number | OrgLadder, rows: readonly Pick<TaskRow, 'type' | 'target'>[]): Promise<Map<number, string>> {
  const refused = new Map<number, string>();
  const numbers = rows.filter(reached).map((r) => r.target!);
  if (numbers.length === 0) return refused;
  // With the organization's row at hand (a submission has it), its lists are known without reading it again.
  const orgId = typeof org === 'number' ? org : org.id;
  const blocks = typeof org === 'number' ? await doNotCallBlocks(db, org, numbers) : await doNotCallRepo.blocked(db, listsOf(org), numbers);
  if (blocks.size === 0) return refused;
  rows.forEach((r, i) => {
    const entry = reached(r) ? blocks.get(r.target!) : undefined;
    if (entry) refused.set(i, `target ${r.target} is ${blockedReason(entry, orgId)}`);
  });
  return refused;
}

/** Why a task about to be dialled or sent must not be (its number is listed now), or null. */
export async function doNotCallAtSending(db: Executor, row: Pick<TaskRow, 'org_id' | 'type' | 'target'>): Promise<string | null> {
  const refused = await doNotCallRefusals(db, row.org_id, [row]);
  const reason = refused.get(0);
  return reason ? `canceled: ${reason.replace(/^target \S+ is /, '')}; nothing was ${row.type === 'call' ? 'dialled' : 'sent'}` : null;
}
