// POST /api/v2/tasks/csv end to end on a real database: physical line numbers (a quoted field
// spanning lines, CRLF files), good rows inserted and bad ones reported, dry runs, the form and
// header refusals, tenancy of the accountId column, a file cut short by an unclosed quote, the
// error list cap, and a 100,000-row upload over a real HTTP connection whose rows are seen in the
// database while the file is still being sent (the server streams; it does not buffer the file).
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { Readable } from 'node:stream';
import { before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { request } from 'undici';
import { forEachEngine } from '../helpers/engines.ts';
import type { Reply } from '../helpers/harness.ts';
import { MAX_LISTED, MAX_ROW_CHARS } from '../../src/modules/tasks/csv.ts';
import { BULK_ROWS } from '../../src/modules/tasks/service.ts';
import { waitFor } from '../helpers/wait.ts';

const SMALL_LIMIT = 4096;
const FUTURE = Math.floor(Date.now() / 1000) + 3600;

interface Part { name: string; content: string | Buffer; filename?: string; type?: string }

/** A multipart/form-data body built by hand: the parts in the order given. */
function form(parts: Part[]): { payload: Buffer; headers: Record<string, string> } {
  const boundary = `----callplane${crypto.randomBytes(8).toString('hex')}`;
  const chunks: Buffer[] = [];
  for (const p of parts) {
    const disposition = `form-data; name="${p.name}"${p.filename !== undefined ? `; filename="${p.filename}"` : ''}`;
    const type = p.filename !== undefined ? `\r\nContent-Type: ${p.type ?? 'text/csv'}` : '';
    chunks.push(Buffer.from(`--${boundary}\r\nContent-Disposition: ${disposition}${type}\r\n\r\n`), Buffer.from(p.content), Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return { payload: Buffer.concat(chunks), headers: { 'content-type': `multipart/form-data; boundary=${boundary}` } };
}

const file = (content: string | Buffer): Part => ({ name: 'csv', filename: 'tasks.csv', content });

forEachEngine('tasks csv upload', (h) => {
  const upload = async (token: string, parts: Part[], query: Record<string, unknown> = {}): Promise<Reply> => {
    const { payload, headers } = form(parts);
    return h().call('POST', '/api/v2/tasks/csv', { token, query, payload: payload as unknown as string, headers });
  };
  const countTasks = async (orgId: number) => Number((await h().database.db.selectFrom('tasks')
    .select((eb) => eb.fn.countAll().as('n')).where('org_id', '=', orgId).executeTakeFirstOrThrow()).n);
  const ok = (res: Reply, label = '') => assert.equal(res.status, 200, `${label} ${res.status} ${JSON.stringify(res.body).slice(0, 600)}`);
  const bad = (res: Reply, status: number, pattern: RegExp) => {
    assert.equal(res.status, status, `expected ${status}, got ${res.status} ${JSON.stringify(res.body).slice(0, 400)}`);
    assert.equal(res.body.success, false);
    assert.match(res.body.message, pattern);
    assert.ok(res.body.requestId, 'our error shape carries the request id');
  };

  let org: { id: number; agentId: number; token: string };
  let other: { id: number; agentId: number; token: string };
  let reseller: { id: number; token: string };
  const org2Agent = async () => (await h().agent(org.id)).id;
  before(async () => {
    reseller = await h().reseller();
    org = await h().organization(reseller.id);
    other = await h().organization(reseller.id);
  });

  // Line by line:       1 header; 2 good; 3 bad target; 4–5 a text whose greeting spans two lines
  // (no content: the greeting is sent, with a warning); 6 bad meta; 7 blank (skipped);
  // 8 a scheduled ping; 9 one field too many; 10 another organization's agent; 11 "Call" in a spreadsheet's case;
  // 12 a quoted meta object; 13 an all-empty row (skipped); 14 a NUL character in context.
  const mixed = (otherAgent: number) => [
    'type,target,greeting,accountId,scheduledFor,meta,context',
    'call,+14155552671,Hi,,,,',
    'call,+1555,Hi,,,,',
    'text,+14155552672,"Hello',
    'there",,,,',
    'call,+14155552673,,,,{bad,',
    '',
    `ping,,,,${FUTURE},,`,
    'call,+14155552674,,,,,,extra',
    `call,+14155552675,,${otherAgent},,,`,
    'Call,+14155552676,x,,,,',
    'call,+14155552677,,,,"{""crm"":""A-1"",""n"":2}",',
    ',,,,,,',
    'call,+14155552678,,,,,a\0b',
  ];

  describe('rows', () => {
    it('inserts the good rows and reports each bad one with its physical line number and reason', async () => {
      const res = await upload(org.token, [file(mixed(other.agentId).join('\n') + '\n')]);
      ok(res);
      const b = res.body;
      assert.equal(b.success, true);
      assert.equal(b.dryRun, false);
      assert.equal(b.complete, true);
      assert.deepEqual({ rows: b.rows, valid: b.valid, invalid: b.invalid, inserted: b.inserted }, { rows: 10, valid: 5, invalid: 5, inserted: 5 });
      assert.deepEqual(b.errors.map((e: { line: number }) => e.line), [3, 6, 9, 10, 14]);
      const msg = (line: number) => b.errors.find((e: { line: number }) => e.line === line).message as string;
      assert.match(msg(3), /^target '\+1555' is not a valid phone number/);
      assert.equal(msg(6), 'meta must be a JSON object');
      assert.equal(msg(9), 'the row has 8 fields; the header has 7');
      assert.equal(msg(10), `accountId ${other.agentId} is not an agent of this organization`);
      assert.equal(msg(14), 'context must not contain NUL characters');
      assert.equal(b.errorsTruncated, false);
      assert.deepEqual(b.warnings, [{ line: 4, message: 'content was empty: the greeting is sent as the message' }]);
      assert.match(b.message, /^5 tasks queued; 10 rows: 5 valid, 5 refused\.$/);

      const list = await h().call('GET', '/api/v2/tasks', { token: org.token, query: { sort: 'createdAt', order: 'asc' } });
      ok(list);
      const tasks = list.body.tasks;
      // A ping without a target has none (the contract types target as a string).
      assert.deepEqual(tasks.map((t: { target?: string }) => ('target' in t ? t.target : 'absent')), ['+14155552671', '+14155552672', 'absent', '+14155552676', '+14155552677']);
      assert.deepEqual(tasks.map((t: { type: string }) => t.type), ['call', 'text', 'ping', 'call', 'call']);
      assert.equal(tasks[1].content, 'Hello\nthere');
      assert.deepEqual(tasks[4].meta, { crm: 'A-1', n: 2 });
      assert.equal(tasks[2].scheduledFor, FUTURE);
      assert.ok(tasks.every((t: { accountId: number; state: string }) => t.accountId === org.agentId && t.state === 'pending'));
      const stats = await h().call('GET', '/api/v2/tasks/stats', { token: org.token });
      assert.equal(stats.body.byState.pending, 5);
    });

    it('a CRLF file (quoted field with CRLF inside, no final newline) has the same line numbers', async () => {
      const o = await h().organization(reseller.id);
      const x = await h().organization(reseller.id);
      const res = await upload(o.token, [file(mixed(x.agentId).join('\r\n'))]);
      ok(res);
      assert.deepEqual(res.body.errors.map((e: { line: number }) => e.line), [3, 6, 9, 10, 14]);
      assert.deepEqual(res.body.warnings.map((e: { line: number }) => e.line), [4]);
      assert.equal(res.body.inserted, 5);
      const text = await h().call('GET', '/api/v2/tasks', { token: o.token, query: { type: 'text' } });
      assert.equal(text.body.tasks[0].content, 'Hello\nthere', 'a CRLF inside a quoted field is read as one line break');
    });

    it('without a type column every row is a call; header names match in any case; cells are trimmed', async () => {
      const o = await h().organization(reseller.id);
      const res = await upload(o.token, [file('\uFEFFTarget , GREETING,WaitToGreet\n +14155552671 ,  Hello ,TRUE\n')]);
      ok(res);
      assert.equal(res.body.inserted, 1);
      const t = (await h().call('GET', '/api/v2/tasks', { token: o.token })).body.tasks[0];
      assert.deepEqual([t.type, t.target, t.greeting, t.waitToGreet], ['call', '+14155552671', 'Hello', true]);
    });

    it('a voicemail column sets a call\'s voicemail (an action, "leave-message: <message>" or the JSON object); a text row without content or greeting is the agent\'s to write', async () => {
      const o = await h().organization(reseller.id);
      const res = await upload(o.token, [file([
        'type,target,context,voicemail',
        'call,+14155552671,,hangup',
        'call,+14155552672,,"leave-message: Hi, it is Riverside Dental, please call back."',
        'call,+14155552673,,"{""action"":""continue""}"',
        'call,+14155552674,,',
        'call,+14155552675,,shout',
        'text,+14155552676,Remind them of Tuesday,',
        'text,+14155552677,,hangup',
      ].join('\n') + '\n')]);
      ok(res);
      assert.deepEqual({ valid: res.body.valid, invalid: res.body.invalid }, { valid: 5, invalid: 2 }, JSON.stringify(res.body));
      assert.deepEqual(res.body.errors.map((e: { line: number }) => e.line), [6, 8]);
      assert.match(res.body.errors[0].message, /^voicemail\.action must be one of/);
      assert.match(res.body.errors[1].message, /voicemail applies to call tasks only/);
      const tasks = (await h().call('GET', '/api/v2/tasks', { token: o.token, query: { sort: 'createdAt', order: 'asc' } })).body.tasks;
      assert.deepEqual(tasks.map((t: { voicemail: unknown }) => t.voicemail), [
        { action: 'hangup' }, { action: 'leave-message', message: 'Hi, it is Riverside Dental, please call back.' }, { action: 'continue' }, null, null,
      ]);
      assert.deepEqual([tasks[4].type, tasks[4].content, tasks[4].context], ['text', null, 'Remind them of Tuesday']);
    });

    it('an agent token may name only itself in accountId; a reseller acts with targetAccountId', async () => {
      const second = await h().agent(org.id);
      const third = await org2Agent();
      const before = await countTasks(org.id);
      const res = await upload(second.token, [file(`target,accountId\n+14155550100,${second.id}\n+14155550101,${third}\n+14155550102,\n`)]);
      ok(res);
      assert.deepEqual(res.body.errors, [{ line: 3, message: `accountId ${third} is not an agent of this organization` }]);
      assert.equal(res.body.inserted, 2);
      const mine = await h().call('GET', '/api/v2/tasks', { token: second.token });
      assert.equal(mine.body.total, 2, 'both rows run as the agent itself');
      const viaReseller = await upload(reseller.token, [file(`target,accountId\n+14155550103,${third}\n`)], { targetAccountId: org.id });
      ok(viaReseller);
      assert.equal(viaReseller.body.inserted, 1);
      assert.equal(await countTasks(org.id), before + 3);
      const outsider = await upload(other.token, [file('target\n+14155550104\n')], { targetAccountId: org.id });
      assert.equal(outsider.status, 404, 'an organization cannot upload into another one');
    });

    it('an unclosed quote stops reading: the rows before it are inserted, the answer says where it stopped', async () => {
      const o = await h().organization(reseller.id);
      const res = await upload(o.token, [file('target,greeting\n+14155552671,ok\n+14155552672,"never closed\n+14155552673,x\n+14155552674,y\n')]);
      ok(res);
      assert.equal(res.body.complete, false);
      assert.equal(res.body.inserted, 1);
      assert.equal(res.body.errors.length, 1);
      assert.equal(res.body.errors[0].line, 3);
      assert.match(res.body.errors[0].message, /quoted field runs to the end of the file.*lines from 3 on were not read/);
      assert.equal(await countTasks(o.id), 1);
    });

    it('a row longer than the row limit (an unclosed quote mid-file) stops reading there', async () => {
      const o = await h().organization(reseller.id);
      const tail = Array.from({ length: 5000 }, (_, i) => `+14155552672,row ${i} ${'x'.repeat(40)}`).join('\n');
      const res = await upload(o.token, [file(`target,greeting\n+14155552671,ok\n\n+14155552672,"open\n${tail}\n`)]);
      ok(res);
      assert.equal(res.body.complete, false);
      assert.equal(res.body.inserted, 1);
      assert.deepEqual(res.body.errors.map((e: { line: number }) => e.line), [3]);
      assert.match(res.body.errors[0].message, new RegExp(`runs past ${MAX_ROW_CHARS} characters`));
      assert.equal(await countTasks(o.id), 1);
    });

    it(`lists at most ${MAX_LISTED} errors and counts them all`, async () => {
      const o = await h().organization(reseller.id);
      const rows = ['target'];
      for (let i = 0; i < MAX_LISTED + 500; i++) rows.push('+1555');
      rows.push('+14155552671');
      const res = await upload(o.token, [file(rows.join('\n'))]);
      ok(res);
      assert.equal(res.body.invalid, MAX_LISTED + 500);
      assert.equal(res.body.errors.length, MAX_LISTED);
      assert.equal(res.body.errorsTruncated, true);
      assert.equal(res.body.errors[MAX_LISTED - 1].line, MAX_LISTED + 1, 'the first errors are the ones listed');
      assert.equal(res.body.inserted, 1);
    });
  });

  describe('dry run', () => {
    it('reports the same counts and errors and inserts nothing (form field or query)', async () => {
      const o = await h().organization(reseller.id);
      const x = await h().organization(reseller.id);
      const csv = mixed(x.agentId).join('\n');
      for (const [parts, query] of [
        [[{ name: 'dryRun', content: 'true' }, file(csv)], {}],
        [[file(csv)], { dryRun: true }],
      ] as [Part[], Record<string, unknown>][]) {
        const res = await upload(o.token, parts, query);
        ok(res);
        assert.equal(res.body.dryRun, true);
        assert.deepEqual({ rows: res.body.rows, valid: res.body.valid, invalid: res.body.invalid, inserted: res.body.inserted }, { rows: 10, valid: 5, invalid: 5, inserted: 0 });
        assert.deepEqual(res.body.errors.map((e: { line: number }) => e.line), [3, 6, 9, 10, 14]);
        assert.match(res.body.message, /^Dry run: nothing was inserted/);
      }
      assert.equal(await countTasks(o.id), 0);
      const stats = await h().call('GET', '/api/v2/tasks/stats', { token: o.token });
      assert.equal(stats.body.total, 0);
      // dryRun=false is a real run.
      const real = await upload(o.token, [{ name: 'dryRun', content: 'false' }, file(csv)]);
      assert.equal(real.body.inserted, 5);
      assert.equal(await countTasks(o.id), 5);
    });

    it('a dryRun field sent after the file comes too late: the rows are inserted and the answer says so', async () => {
      const o = await h().organization(reseller.id);
      const res = await upload(o.token, [file('target\n+14155552671\n'), { name: 'dryRun', content: 'true' }]);
      ok(res);
      assert.equal(res.body.inserted, 1);
      assert.match(res.body.warnings[0].message, /dryRun arrived after the csv file/);
    });

    it('a dryRun that is not a boolean is refused naming it', async () => {
      bad(await upload(org.token, [{ name: 'dryRun', content: 'maybe' }, file('target\n+14155552671\n')]), 400, /dryRun must be true or false/);
      bad(await upload(org.token, [file('target\n+14155552671\n')], { dryRun: 'maybe' }), 400, /dryRun/);
    });
  });

  describe('refused uploads (nothing inserted)', () => {
    it('missing csv field, a file under another name, an empty file, no rows, unknown or repeated columns', async () => {
      const o = await h().organization(reseller.id);
      bad(await upload(o.token, [{ name: 'dryRun', content: 'true' }]), 400, /csv is required/);
      bad(await upload(o.token, [{ name: 'file', filename: 'tasks.csv', content: 'target\n+14155552671\n' }]), 400, /csv is required.*field 'file'/);
      bad(await upload(o.token, [file('')]), 400, /csv is empty: the first line must be a header/);
      bad(await upload(o.token, [file('\n\n')]), 400, /csv is empty/);
      bad(await upload(o.token, [file('type,target\n\n')]), 400, /csv has a header but no rows/);
      bad(await upload(o.token, [file('call,+14155552671\n')]), 400, /unknown columns 'call', '\+14155552671' in the header/);
      bad(await upload(o.token, [file('target,phone,greetng\n+14155552671,1,2\n')]), 400, /unknown columns 'phone', 'greetng'.*recognised columns: type, target/);
      bad(await upload(o.token, [file('target,Target\n1,2\n')]), 400, /column target appears twice/);
      bad(await upload(o.token, [file('target,message,content\n1,2,3\n')]), 400, /message and content are the same field/);
      bad(await upload(o.token, [file('target,,greeting\n1,2,3\n')]), 400, /column 2 of the header has no name/);
      assert.equal(await countTasks(o.id), 0);
    });

    it('a second file is ignored, with a warning', async () => {
      const o = await h().organization(reseller.id);
      const res = await upload(o.token, [file('target\n+14155552671\n'), { name: 'csv', filename: 'more.csv', content: 'target\n+14155552672\n' }]);
      ok(res);
      assert.equal(res.body.inserted, 1);
      assert.deepEqual(res.body.warnings, [{ line: 0, message: 'only one file is read per upload: the other files were ignored' }]);
      assert.equal(await countTasks(o.id), 1);
    });

    it('a CSV sent as a text field (no filename) is read too', async () => {
      const o = await h().organization(reseller.id);
      const res = await upload(o.token, [{ name: 'csv', content: 'target\n+14155552671\n' }]);
      ok(res);
      assert.equal(res.body.inserted, 1);
    });

    it('a request that is not multipart is 415 in our error shape, saying what to send', async () => {
      bad(await h().call('POST', '/api/v2/tasks/csv', { token: org.token, body: { csv: 'target\n+14155552671' } }), 415, /multipart\/form-data with the CSV file in field csv/);
      bad(await h().call('POST', '/api/v2/tasks/csv', { token: org.token, payload: 'target\n+14155552671\n', headers: { 'content-type': 'text/csv' } }), 415, /multipart\/form-data/);
      bad(await h().call('POST', '/api/v2/tasks/csv', { token: org.token }), 415, /multipart\/form-data/);
    });

    it('no token is 401', async () => {
      bad(await upload(null as unknown as string, [file('target\n+14155552671\n')]), 401, /.+/);
    });

    it('an organization without an agent is refused before any row is read', async () => {
      const o = await h().organization(reseller.id);
      await h().database.db.deleteFrom('accounts').where('org_id', '=', o.id).where('kind', '=', 'agent').execute();
      bad(await upload(o.token, [file('target\n+14155552671\n')]), 400, /has no agent account/);
    });
  });

  describe('a large file', () => {
    it('a bulk insert refreshes the planner statistics of tasks (PostgreSQL), so claims do not plan for an empty table', async (t) => {
      if (h().engine === 'sqlite') return t.skip('SQLite plans the claim without statistics');
      const o = await h().organization(reseller.id);
      const stats = () => sql<{ analyzed: number; estimate: number }>`select
          (select coalesce(analyze_count, 0) from pg_stat_user_tables where relname = 'tasks')::int as analyzed,
          (select reltuples from pg_class where relname = 'tasks')::int as estimate`.execute(h().database.db).then((r) => r.rows[0]);
      const before = await stats();
      const rows = Array.from({ length: BULK_ROWS }, (_, i) => `ping,${FUTURE},row-${i}`).join('\n');
      ok(await upload(o.token, [file(`type,scheduledFor,externalTaskId\n${rows}\n`)]));
      const after = await waitFor('an ANALYZE of tasks', async () => { const s = await stats(); return s.analyzed > before.analyzed ? s : undefined; }, 10_000, 50);
      assert.ok(after.estimate >= await countTasks(o.id), `the planner now counts ${after.estimate} rows`);
    });

    it('100,000 rows streamed over HTTP are inserted in batches while the file is still arriving', { timeout: 600_000 }, async () => {
      const o = await h().organization(reseller.id);
      const address = await h().app.listen({ port: 0, host: '127.0.0.1' });
      const ROWS = 100_000;
      const boundary = '----callplanebig';
      let sent = 0;
      let seenMidway = -1;
      const heapBefore = process.memoryUsage().heapUsed;
      let heapPeak = heapBefore;
      async function* body() {
        yield Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="csv"; filename="big.csv"\r\nContent-Type: text/csv\r\n\r\ntype,target,externalTaskId\r\n`);
        for (let i = 0; i < ROWS; i += 500) {
          let chunk = '';
          for (let j = i; j < i + 500; j++) chunk += `call,+1415555${String(j % 10000).padStart(4, '0')},row-${j}\r\n`;
          yield Buffer.from(chunk);
          sent += 500;
          heapPeak = Math.max(heapPeak, process.memoryUsage().heapUsed);
          if (sent === ROWS / 2) {
            // Half the file sent: the server must already have inserted rows. A server that
            // read the whole file before inserting would have none, and this wait would fail.
            const deadline = Date.now() + 120_000;
            while ((seenMidway = await countTasks(o.id)) === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
          }
        }
        yield Buffer.from(`\r\n--${boundary}--\r\n`);
      }
      const res = await request(`${address}/api/v2/tasks/csv?token=${o.token}`, {
        method: 'POST', headers: { 'content-type': `multipart/form-data; boundary=${boundary}` }, body: Readable.from(body()),
        headersTimeout: 600_000, bodyTimeout: 600_000,
      });
      const answer = await res.body.json() as Record<string, unknown>;
      assert.equal(res.statusCode, 200, JSON.stringify(answer).slice(0, 500));
      assert.ok(seenMidway > 0 && seenMidway < ROWS, `rows were inserted while the upload was under way (saw ${seenMidway} at the midpoint)`);
      assert.deepEqual({ rows: answer.rows, valid: answer.valid, invalid: answer.invalid, inserted: answer.inserted, complete: answer.complete },
        { rows: ROWS, valid: ROWS, invalid: 0, inserted: ROWS, complete: true });
      assert.equal(await countTasks(o.id), ROWS);
      const stats = await h().call('GET', '/api/v2/tasks/stats', { token: o.token });
      assert.equal(stats.body.byState.pending, ROWS);
      const last = await h().database.db.selectFrom('tasks').select('external_task_id').where('org_id', '=', o.id)
        .where('external_task_id', '=', `row-${ROWS - 1}`).executeTakeFirst();
      assert.ok(last, 'the last row is there');
      // Loose: the rows as task objects alone would take well over 100 MB.
      const grew = (heapPeak - heapBefore) / 1024 / 1024;
      assert.ok(grew < 100, `heap grew by ${grew.toFixed(1)} MB during the upload`);
    });
  });
});

forEachEngine('tasks csv upload, size limit', (h) => {
  it('a Content-Length above CALLPLANE_CSV_MAX_BYTES (+ form framing) is 413 before anything is read', async () => {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    const { headers } = form([file('x')]);
    const res = await h().app.inject({
      method: 'POST', url: '/api/v2/tasks/csv', query: { token: o.token },
      headers: { ...headers, 'content-length': String(SMALL_LIMIT + 70 * 1024) }, payload: Readable.from([Buffer.from('x')]),
    });
    assert.equal(res.statusCode, 413, res.body);
    assert.equal(res.json().success, false);
    assert.match(res.json().message, /csv must be at most 4 KB/);
  });

  it('a streamed file cut at the limit: the whole rows before the cut are inserted, none after, and the answer says where reading stopped', async () => {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    const boundary = '----callplanecut';
    let rows = 'target,externalTaskId\n';
    for (let j = 0; rows.length < SMALL_LIMIT * 2; j++) rows += `+14155552671,row-${j}-end\n`;
    const parts = [`--${boundary}\r\nContent-Disposition: form-data; name="csv"; filename="t.csv"\r\n\r\n`, rows, `\r\n--${boundary}--\r\n`];
    // No Content-Length: the body arrives in chunks, so only the limit while reading can stop it.
    const res = await h().app.inject({
      method: 'POST', url: '/api/v2/tasks/csv', query: { token: o.token },
      headers: { 'content-type': `multipart/form-data; boundary=${boundary}` }, payload: Readable.from(parts.map((p) => Buffer.from(p))),
    });
    assert.equal(res.statusCode, 200, res.body);
    const b = res.json();
    assert.equal(b.complete, false);
    assert.ok(b.inserted > 0, 'rows before the cut are inserted');
    const ids = (await h().database.db.selectFrom('tasks').select('external_task_id').where('org_id', '=', o.id).execute())
      .map((t) => t.external_task_id!).sort((a, z) => Number(a.split('-')[1]) - Number(z.split('-')[1]));
    assert.equal(ids.length, b.inserted);
    assert.deepEqual(ids, Array.from({ length: ids.length }, (_, j) => `row-${j}-end`), 'whole rows only, in order: no row cut in half');
    assert.ok(ids.join('\n').length < SMALL_LIMIT);
    assert.deepEqual(b.errors, [{ line: b.inserted + 2, message: `the file is larger than 4 KB; reading stopped here, lines from ${b.inserted + 2} on were not read` }]);
  });
}, { CALLPLANE_CSV_MAX_BYTES: String(SMALL_LIMIT) });
