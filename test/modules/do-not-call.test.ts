// Do-not-call lists (issue 37, docs/campaigns.md): managed through the API (add, remove,
// list with paging, CSV import and export), per organization and per reseller (a reseller's list
// binds its organizations), checked at submission (one task: 422 naming the number; a batch and a
// CSV: a refusal per row, the rest queued) and again when the task is about to dial or send (the
// real task worker, SIMULATED carrier): a number listed after submission is never reached.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { it } from 'node:test';
import type { TaskRow } from '../../src/db/types.ts';
import { forEachEngine } from '../helpers/engines.ts';
import type { Harness } from '../helpers/harness.ts';
import { sleep, waitFor } from '../queue/fixtures.ts';

const FINAL = ['finished', 'failed', 'canceled'];
const phone = (n: number) => `+1500555${String(1000 + n).padStart(4, '0')}`;

function multipart(name: string, content: string) {
  const boundary = `----callplane${crypto.randomBytes(8).toString('hex')}`;
  const payload = Buffer.concat([
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${name}"; filename="list.csv"\r\nContent-Type: text/csv\r\n\r\n`),
    Buffer.from(content), Buffer.from(`\r\n--${boundary}--\r\n`),
  ]);
  return { payload: payload.toString('latin1'), headers: { 'content-type': `multipart/form-data; boundary=${boundary}` } };
}

function kit(h: () => Harness) {
  const row = (id: string): Promise<TaskRow> => h().database.db.selectFrom('tasks').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
  return {
    row,
    async add(token: string, numbers: string[], targetAccountId?: number) {
      const res = await h().call('POST', '/api/v2/do-not-call', { token, query: { targetAccountId }, body: { numbers } });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return res.body;
    },
    async settled(id: string) {
      return waitFor(`task ${id} to end`, async () => { const r = await row(id); return FINAL.includes(r.state) && r; }, 15_000);
    },
  };
}

forEachEngine('do-not-call lists', (h) => {
  const k = kit(h);

  it('adds numbers in any notation as E.164, lists them page by page, finds one, removes one; bad numbers are 400 naming the field', async () => {
    const r = await h().reseller();
    const org = await h().organization(r.id);
    const added = await k.add(org.token, ['+1 (415) 555-2671', '+14155552672', '+44 20 7946 0958']);
    assert.equal(added.added, 3);
    assert.deepEqual(added.numbers, ['+14155552671', '+14155552672', '+442079460958']);
    assert.equal((await k.add(org.token, ['+14155552671'])).added, 0, 'a number already listed is not added twice');
    const page = await h().call('GET', '/api/v2/do-not-call', { token: org.token, query: { limit: 2, offset: 0 } });
    assert.equal(page.status, 200);
    assert.equal(page.body.total, 3);
    assert.equal(page.body.numbers.length, 2);
    const rest = await h().call('GET', '/api/v2/do-not-call', { token: org.token, query: { limit: 2, offset: 2 } });
    assert.equal(rest.body.numbers.length, 1);
    const all = [...page.body.numbers, ...rest.body.numbers].map((e: { number: string }) => e.number).sort();
    assert.deepEqual(all, ['+14155552671', '+14155552672', '+442079460958']);
    const one = await h().call('GET', '/api/v2/do-not-call', { token: org.token, query: { number: '+1 415 555 2672' } });
    assert.equal(one.body.numbers[0].source, 'api');
    assert.equal(one.body.numbers[0].listOf, org.id);
    const bad = await h().call('POST', '/api/v2/do-not-call', { token: org.token, body: { numbers: ['+14155552673', '12'] } });
    assert.equal(bad.status, 400);
    assert.equal(bad.body.success, false);
    assert.match(bad.body.message, /numbers\[1\] '12' is not a valid phone number/);
    const del = await h().call('DELETE', `/api/v2/do-not-call/${encodeURIComponent('+14155552672')}`, { token: org.token });
    assert.equal(del.status, 200, JSON.stringify(del.body));
    const again = await h().call('DELETE', `/api/v2/do-not-call/${encodeURIComponent('+14155552672')}`, { token: org.token });
    assert.equal(again.status, 404);
  });

  it('an organization can neither read nor edit another organization\'s list, nor its reseller\'s', async () => {
    const r = await h().reseller();
    const a = await h().organization(r.id);
    const b = await h().organization(r.id);
    await k.add(a.token, ['+14155550100']);
    for (const [method, url, body] of [['GET', '/api/v2/do-not-call', undefined], ['POST', '/api/v2/do-not-call', { number: '+14155550101' }],
      ['DELETE', `/api/v2/do-not-call/${encodeURIComponent('+14155550100')}`, undefined], ['GET', '/api/v2/do-not-call/csv', undefined]] as const) {
      const res = await h().call(method, url, { token: b.token, query: { targetAccountId: a.id }, body });
      assert.ok(res.status === 403 || res.status === 404, `${method} ${url}: ${res.status}`);
      assert.equal(res.body.success, false);
      const up = await h().call(method, url, { token: b.token, query: { targetAccountId: r.id }, body });
      assert.ok(up.status === 403 || up.status === 404, `${method} ${url} on the reseller's list: ${up.status}`);
    }
    const mine = await h().call('GET', '/api/v2/do-not-call', { token: b.token });
    assert.equal(mine.body.total, 0, 'b sees only its own (empty) list');
    const still = await h().call('GET', '/api/v2/do-not-call', { token: a.token });
    assert.deepEqual(still.body.numbers.map((e: { number: string }) => e.number), ['+14155550100']);
    // The reseller manages its organization's list with targetAccountId.
    const byReseller = await h().call('GET', '/api/v2/do-not-call', { token: r.token, query: { targetAccountId: a.id } });
    assert.equal(byReseller.body.total, 1);
  });

  it('imports a CSV (header, refused rows with their line, the rest added) and exports it back', async () => {
    const r = await h().reseller();
    const org = await h().organization(r.id);
    const csv = 'number,note\n+14155550111,asked by phone\n(not a number),x\n+1 415 555 0112,\n\n+14155550111,dup\n';
    const res = await h().call('POST', '/api/v2/do-not-call/csv', { token: org.token, ...multipart('csv', csv) });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.valid, 3);
    assert.equal(res.body.invalid, 1);
    assert.equal(res.body.added, 2);
    assert.equal(res.body.errors[0].line, 3);
    assert.match(res.body.errors[0].message, /number '\(not a number\)' is not a valid phone number/);
    const out = await h().call('GET', '/api/v2/do-not-call/csv', { token: org.token });
    assert.equal(out.status, 200);
    assert.match(String(out.headers['content-type']), /text\/csv/);
    const lines = String(out.body).trim().split('\r\n');
    assert.equal(lines[0], 'number,source,evidence,note,createdAt,listOf');
    assert.equal(lines.length, 3);
    assert.ok(lines.some((l) => l.startsWith("'+14155550111,csv,,asked by phone,")), lines.join('\n'));
    // The export reads back as an import (the apostrophe kept spreadsheets from reading a formula).
    const other = await h().organization(r.id);
    const back = await h().call('POST', '/api/v2/do-not-call/csv', { token: other.token, ...multipart('csv', String(out.body)) });
    assert.equal(back.status, 200, JSON.stringify(back.body));
    assert.equal(back.body.added, 2);
    assert.equal(back.body.invalid, 0);
  });

  it('refuses at submission: one task 422 naming the number; a batch and a CSV refuse that row and queue the rest', async () => {
    const r = await h().reseller();
    const org = await h().organization(r.id);
    await k.add(org.token, [phone(21)]);
    const one = await h().call('POST', '/api/v2/tasks', { token: org.token, body: { type: 'call', target: phone(21), scheduledFor: Math.floor(Date.now() / 1000) + 3600 } });
    assert.equal(one.status, 422);
    assert.equal(one.body.success, false);
    assert.match(one.body.message, new RegExp(`target \\${phone(21)} is on the do-not-call list \\(the organization's own`));
    const later = Math.floor(Date.now() / 1000) + 3600;
    const batch = await h().call('POST', '/api/v2/agent/outboundSms', { token: org.token, body: { targets: [phone(22), phone(21), phone(23)], content: 'hi', scheduledFor: later } });
    assert.equal(batch.status, 200, JSON.stringify(batch.body));
    assert.equal(batch.body.inserted, 2);
    assert.deepEqual(batch.body.tasks.map((t: { target: string }) => t.target), [phone(22), phone(23)]);
    assert.equal(batch.body.refused.length, 1);
    assert.equal(batch.body.refused[0].index, 1);
    assert.equal(batch.body.refused[0].target, phone(21));
    const csv = `type,target,scheduledFor\ncall,${phone(24)},${later}\ncall,${phone(21)},${later}\ntext,${phone(21)},${later}\ncall,${phone(25)},${later}\n`;
    const up = await h().call('POST', '/api/v2/tasks/csv', { token: org.token, ...multipart('csv', csv) });
    assert.equal(up.status, 200, JSON.stringify(up.body));
    assert.equal(up.body.inserted, 2);
    assert.equal(up.body.valid, 2);
    assert.equal(up.body.invalid, 2);
    assert.deepEqual(up.body.errors.map((e: { line: number }) => e.line).sort(), [3, 4]);
    for (const e of up.body.errors) assert.match(e.message, /is on the do-not-call list/);
  });

  it('a reseller\'s list binds each of its organizations, not another reseller\'s', async () => {
    const r = await h().reseller();
    const org = await h().organization(r.id);
    const r2 = await h().reseller();
    const elsewhere = await h().organization(r2.id);
    const res0 = await h().call('POST', '/api/v2/do-not-call', { token: r.token, body: { number: phone(31) } });
    assert.equal(res0.status, 200, JSON.stringify(res0.body));
    const refused = await h().call('POST', '/api/v2/tasks', { token: org.token, body: { type: 'call', target: phone(31), scheduledFor: Math.floor(Date.now() / 1000) + 3600 } });
    assert.equal(refused.status, 422);
    assert.match(refused.body.message, new RegExp(`of account ${r.id}, above the organization`));
    const fine = await h().call('POST', '/api/v2/tasks', { token: elsewhere.token, body: { type: 'call', target: phone(31), scheduledFor: Math.floor(Date.now() / 1000) + 3600 } });
    assert.equal(fine.status, 201, JSON.stringify(fine.body));
  });

  it('a number listed after submission is never dialled or texted: the task ends canceled saying why', async () => {
    const r = await h().reseller();
    const org = await h().organization(r.id);
    const at = Math.floor(Date.now() / 1000) + 2;
    const call = await h().call('POST', '/api/v2/tasks', { token: org.token, body: { type: 'call', target: phone(41), scheduledFor: at } });
    const text = await h().call('POST', '/api/v2/tasks', { token: org.token, body: { type: 'text', target: phone(42), content: 'hello', scheduledFor: at } });
    const control = await h().call('POST', '/api/v2/tasks', { token: org.token, body: { type: 'text', target: phone(43), content: 'hello', scheduledFor: at } });
    for (const res of [call, text, control]) assert.equal(res.status, 201, JSON.stringify(res.body));
    // The organization's own list for the call, the reseller's for the text.
    await k.add(org.token, [phone(41)]);
    await k.add(r.token, [phone(42)]);
    const [c, t, ok] = [await k.settled(call.body.task.id), await k.settled(text.body.task.id), await k.settled(control.body.task.id)];
    assert.equal(ok.state, 'finished', ok.error ?? '');
    for (const [row, verb] of [[c, 'dialled'], [t, 'sent']] as const) {
      assert.equal(row.state, 'canceled');
      assert.match(row.error ?? '', new RegExp(`^canceled: on the do-not-call list .*nothing was ${verb}$`));
      assert.equal(row.provider, null, 'no carrier was reached');
      assert.equal(row.provider_ref, null);
    }
    // Nothing reached either person: no conversation with them exists; the control's text was recorded.
    const convs = await h().database.db.selectFrom('conversations').select('counterpart').where('org_id', '=', org.id).execute();
    assert.deepEqual(convs.map((x) => x.counterpart), [phone(43)]);
    const view = await h().call('GET', `/api/v2/tasks/${c.id}`, { token: org.token });
    assert.equal(view.body.task.state, 'canceled');
    assert.match(view.body.task.error, /do-not-call/);
    await sleep(10);
  });
}, { CALLPLANE_SIMULATED_CALL_SECONDS: '0.2' }, { worker: true });
