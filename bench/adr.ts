// Building one activity-record file (src/modules/adr/build-file.ts) for a window holding
// BENCH_RECORDS ended calls (default 100,000) of one organization: the time, the file's size, the
// longest the event loop was held (monitorEventLoopDelay: what another request waited at worst)
// and how much the process's memory grew. The records are read 500 a query and streamed to disk,
// so neither the longest stall nor the memory should grow with the window.
//   npx tsx bench/adr.ts          (PostgreSQL too with TEST_DATABASE_URL; BENCH_ENGINES=sqlite,postgres)
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import type { AdrWindowRow, NewTask } from '../src/db/types.ts';
import { newId } from '../src/lib/ids.ts';
import { accountRepo } from '../src/modules/accounts/repository.ts';
import { buildWindowFile } from '../src/modules/adr/build-file.ts';
import { ENGINES, startHarness } from '../test/helpers/harness.ts';

const RECORDS = Number(process.env.BENCH_RECORDS ?? 100_000);
const only = process.env.BENCH_ENGINES?.split(',');
const HOUR = 3_600_000;

for (const engine of ENGINES.filter((e) => !only || only.includes(e))) {
  const h = await startHarness(engine);
  try {
    const r = await h.reseller();
    const o = await h.organization(r.id);
    const start = Math.floor(Date.now() / HOUR) * HOUR - HOUR;
    const rows: NewTask[] = Array.from({ length: RECORDS }, (_, i) => {
      const at = start + Math.floor((i / RECORDS) * HOUR);
      return {
        id: newId('tsk', at), org_id: o.id, account_id: o.agentId, type: 'call', target: `+1415555${String(i % 10_000).padStart(4, '0')}`,
        state: 'finished', run_at: at, created_at: at, updated_at: at, started_at: at - 95_000, finished_at: at, attempt: 1,
        provider: 'simulated', result: JSON.stringify({ status: 'completed', durationSeconds: 95 }), external_task_id: null, context: null, greeting: null,
        content: null, task_context: null, meta: null, scheduled_for: null, lease_owner: null, lease_expires_at: null, cancel_requested_at: null,
        idempotency_key: null, request_hash: null, provider_ref: null, error: null,
      };
    });
    await h.database.db.transaction().execute(async (tx) => {
      for (let i = 0; i < rows.length; i += 500) await tx.insertInto('tasks').values(rows.slice(i, i + 500)).execute();
    });
    await h.database.refreshStatistics(['tasks']);
    const account = (await accountRepo.findById(h.database.db, o.id))!;
    const window = { window_start: start, window_end: start + HOUR } as AdrWindowRow;
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'callplane-bench-adr-')), 'w.csv');
    const delay = monitorEventLoopDelay({ resolution: 1 });
    const rss = process.memoryUsage().rss;
    let peak = rss;
    const sampler = setInterval(() => { peak = Math.max(peak, process.memoryUsage().rss); }, 5);
    delay.enable();
    const t0 = performance.now();
    const built = await buildWindowFile(h.database.db, account, window, file);
    const ms = performance.now() - t0;
    delay.disable();
    clearInterval(sampler);
    console.log(`${engine}: ${built.records} records, ${(built.bytes / 1e6).toFixed(1)} MB in ${(ms / 1000).toFixed(2)} s `
      + `(${Math.round(built.records / (ms / 1000))} records/s); event loop held at most ${(delay.max / 1e6).toFixed(1)} ms `
      + `(p99 ${(delay.percentile(99) / 1e6).toFixed(1)} ms); RSS grew at most ${((peak - rss) / 1e6).toFixed(0)} MB`);
    fs.rmSync(path.dirname(file), { recursive: true, force: true });
  } finally {
    await h.close();
  }
}
