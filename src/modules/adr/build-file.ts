// Builds one window's activity-record file on local disk (the worker's spool, then uploaded): every
// task and conversation of the account's organizations that ended in the window, read page by page
// (PAGE rows a query, by end time and id), written through a stream with its backpressure, so
// neither memory nor the event loop depends on how many records a window holds.
import crypto from 'node:crypto';
import fs from 'node:fs';
import { once } from 'node:events';
import type { AccountRow, AdrWindowRow, Db } from '../../db/types.ts';
import { accountRepo } from '../accounts/repository.ts';
import type { Plan } from '../billing/catalog.ts';
import { catalogOwners, findPlan } from '../billing/plans.ts';
import { subscriptionRepo } from '../billing/repository.ts';
import { conversationRecordRepo } from '../conversations/repository.ts';
import { taskRecordRepo, type EndedAfter } from '../tasks/repository.ts';
import { ADR_HEADER, conversationRecord, taskRecord } from './csv.ts';

/** Rows read per query. */
export const PAGE = 500;

export interface BuiltFile { file: string; bytes: number; checksum: string; records: number }

/** The organizations whose records an export holds: the organization itself, or every one below a reseller or partner. */
export async function organizationsOf(db: Db, account: AccountRow): Promise<AccountRow[]> {
  if (account.kind === 'organization') return [account];
  return (await accountRepo.list(db, { kind: 'organization', within: account })).rows;
}

/** The organization's plan for costs: its subscription's copy while one is in force, else the plan its productPlanId names. */
async function planOf(db: Db, org: AccountRow): Promise<Plan | null> {
  const sub = await subscriptionRepo.current(db, org.id);
  if (sub) return JSON.parse(sub.plan) as Plan;
  if (!org.product_plan_id) return null;
  return (await findPlan(db, catalogOwners(org), org.product_plan_id))?.item ?? null;
}

export async function buildWindowFile(db: Db, account: AccountRow, window: AdrWindowRow, file: string, signal?: AbortSignal): Promise<BuiltFile> {
  const out = fs.createWriteStream(file, { mode: 0o600 });
  const hash = crypto.createHash('sha256');
  let bytes = 0;
  let records = 0;
  const write = async (text: string) => {
    const chunk = Buffer.from(text, 'utf8');
    hash.update(chunk);
    bytes += chunk.length;
    if (!out.write(chunk)) await once(out, 'drain');
  };
  const from = Number(window.window_start);
  const to = Number(window.window_end);
  try {
    await write(ADR_HEADER);
    for (const org of await organizationsOf(db, account)) {
      const plan = await planOf(db, org);
      for (const read of [
        async (after: EndedAfter | null) => (await taskRecordRepo.endedBetween(db, org.id, from, to, after, PAGE))
          .map((t) => ({ line: taskRecord(t, plan), at: Number(t.finished_at), id: t.id })),
        async (after: EndedAfter | null) => (await conversationRecordRepo.endedBetween(db, org.id, from, to, after, PAGE))
          .map((c) => ({ line: conversationRecord(c, plan), at: Number(c.ended_at), id: c.id })),
      ]) {
        let after: EndedAfter | null = null;
        for (;;) {
          signal?.throwIfAborted();
          const page = await read(after);
          for (const r of page) await write(r.line);
          records += page.length;
          if (page.length < PAGE) break;
          const last = page[page.length - 1]!;
          after = { at: last.at, id: last.id };
        }
      }
    }
    out.end();
    await once(out, 'finish');
  } catch (err) {
    out.destroy();
    await fs.promises.rm(file, { force: true });
    throw err;
  }
  return { file, bytes, checksum: `sha256:${hash.digest('hex')}`, records };
}
