// Webhook delivery, end to end on both engines: a generic relay configured through the API, events
// posted to its ingress, the delivery worker of the harness sending them to real HTTP receivers on
// 127.0.0.1. Retries, timeouts, success codes, forwarded headers, Standard Webhooks signatures
// (checked with the `standardwebhooks` package), Retry-After, 410, giving up, and task events
// reaching `task` subscriptions through the outbox.
import assert from 'node:assert/strict';
import { after, it } from 'node:test';
import { Webhook, WebhookVerificationError } from 'standardwebhooks';
import type { WebhookDeliveryRow } from '../../src/db/types.ts';
import { ABANDONED } from '../../src/modules/webhooks/send-delivery.ts';
import { forEachEngine } from '../helpers/engines.ts';
import type { Harness } from '../helpers/harness.ts';
import { startReceiver, type Receiver, type Received } from '../helpers/receiver.ts';
import { waitFor } from '../queue/fixtures.ts';

const ENV = { CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true', CALLPLANE_SIMULATED_CALL_SECONDS: '0.1' };
const receivers: Receiver[] = [];
after(async () => { await Promise.all(receivers.map((r) => r.close())); });

async function receiver(answer?: Receiver['answer']): Promise<Receiver> {
  const r = await startReceiver(answer);
  receivers.push(r);
  return r;
}

/** Header map as the standardwebhooks package wants it. */
const sigHeaders = (req: Received) => ({
  'webhook-id': String(req.headers['webhook-id']),
  'webhook-timestamp': String(req.headers['webhook-timestamp']),
  'webhook-signature': String(req.headers['webhook-signature']),
});

/**
 * Checks the signature with the package. verify() also parses the body as JSON once the signature
 * holds, so a form body that verified fails only in that parse (a SyntaxError); a bad signature
 * throws WebhookVerificationError.
 */
function verifyRaw(wh: Webhook, req: Received): void {
  try {
    wh.verify(req.body, sigHeaders(req));
  } catch (err) {
    if (err instanceof WebhookVerificationError || !(err instanceof SyntaxError)) throw err;
  }
}

interface Relay {
  orgId: number;
  token: string;
  secret: string;
  ingressPath: string;
}

/** A premium organization with a generic relay to `url`, configured through the API. */
async function relay(h: Harness, url: string, body: Record<string, unknown> = {}): Promise<Relay> {
  const r = await h.reseller();
  const o = await h.organization(r.id, { vidaPremium: true });
  const res = await h.call('POST', '/api/v2/webhookRelay/generic', { token: o.token, body: { url, ...body } });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return { orgId: o.id, token: o.token, secret: res.body.signingSecret, ingressPath: new URL(res.body.config.ingressUrl).pathname };
}

/** Posts an event to the relay's ingress as the provider would; answers the delivery row it made. */
async function post(h: Harness, rl: Relay, payload: string, contentType = 'application/json'): Promise<WebhookDeliveryRow> {
  const res = await h.app.inject({ method: 'POST', url: rl.ingressPath, payload, headers: { 'content-type': contentType } });
  assert.equal(res.statusCode, 200, res.body);
  const rows = await h.database.db.selectFrom('webhook_deliveries').selectAll().where('org_id', '=', rl.orgId)
    .orderBy('created_at', 'desc').orderBy('id', 'desc').execute();
  return rows[0];
}

const delivery = (h: Harness, id: string) =>
  h.database.db.selectFrom('webhook_deliveries').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
const attempts = (h: Harness, id: string) =>
  h.database.db.selectFrom('delivery_attempts').selectAll().where('delivery_id', '=', id).orderBy('attempt').execute();

/** Waits for the delivery to leave pending/running. */
const settled = (h: Harness, id: string, timeoutMs = 15_000) => waitFor(`delivery ${id} to settle`, async () => {
  const row = await delivery(h, id);
  return row.state !== 'pending' && row.state !== 'running' ? row : undefined;
}, timeoutMs);

// The production schedule: the second attempt comes about 5 s after the first.
forEachEngine('webhook deliveries on the real retry schedule', (h) => {
  it('a failed first attempt is retried about 5 s later, then delivered; both attempts are logged and signed with one webhook-id', async () => {
    const rcv = await receiver((_req, n) => (n === 0 ? { status: 500, body: 'down for a moment' } : { status: 200, body: 'thanks' }));
    const rl = await relay(h(), rcv.url);
    const d = await post(h(), rl, '{"hello":"world"}');
    const done = await settled(h(), d.id, 20_000);
    assert.equal(done.state, 'finished');
    assert.equal(done.attempt, 2);
    assert.equal(done.last_status, 200);
    assert.equal(done.last_error, null);
    assert.equal(rcv.requests.length, 2);
    const [first, second] = rcv.requests;
    const gap = second.at - first.at;
    // 5 s ± 20% jitter, plus room for the runner to wake on a busy machine (the next step would be 5 min).
    assert.ok(gap >= 3900 && gap <= 9000, `second attempt ${gap} ms after the first`);
    assert.equal(first.headers['webhook-id'], d.event_id);
    assert.equal(second.headers['webhook-id'], d.event_id);
    const wh = new Webhook(rl.secret);
    for (const req of [first, second]) wh.verify(req.body, sigHeaders(req));

    const log = await attempts(h(), d.id);
    assert.deepEqual(log.map((a) => [a.attempt, a.status_code, a.response_excerpt]), [[1, 500, 'down for a moment'], [2, 200, 'thanks']]);
    assert.match(log[0].error ?? '', /500/);
    assert.equal(log[1].error, null);
    // The first attempt says when the next one was due; it came then (not before).
    assert.ok(log[0].next_attempt_at !== null && second.at >= log[0].next_attempt_at - 5, 'next attempt logged and kept');
    assert.ok(Math.abs(log[0].started_at - first.at) < 1000 && log[0].duration_ms >= 0);
    assert.equal(log[1].next_attempt_at, null);
  });

  it('a Retry-After longer than the scheduled delay is honoured', async () => {
    const rcv = await receiver((_req, n) => (n === 0 ? { status: 503, headers: { 'retry-after': '8' } } : {}));
    const rl = await relay(h(), rcv.url);
    const d = await post(h(), rl, '{"n":1}');
    const done = await settled(h(), d.id, 20_000);
    assert.equal(done.state, 'finished');
    const gap = rcv.requests[1].at - rcv.requests[0].at;
    // The schedule alone would have retried within 6 s.
    assert.ok(gap >= 7900, `retried ${gap} ms after a Retry-After of 8 s`);
  });
}, ENV, { deliveries: true });

// A fast schedule (3 attempts, 100 ms apart) so failures and giving up take milliseconds.
const FAST = (attemptJustFailed: number) => (attemptJustFailed >= 3 ? null : 100);

forEachEngine('webhook deliveries', (h) => {
  it('fails twice, then is delivered on the third attempt; every attempt is logged', async () => {
    const rcv = await receiver((_req, n) => (n === 0 ? { status: 500 } : n === 1 ? { status: 502, body: 'bad gateway' } : { status: 204, body: '' }));
    const rl = await relay(h(), rcv.url);
    const d = await post(h(), rl, '{"try":"again"}');
    const done = await settled(h(), d.id);
    assert.equal(done.state, 'finished');
    assert.equal(done.attempt, 3);
    assert.equal(done.last_status, 204);
    const log = await attempts(h(), d.id);
    assert.deepEqual(log.map((a) => [a.attempt, a.status_code]), [[1, 500], [2, 502], [3, 204]]);
    assert.ok(log[0].next_attempt_at !== null && log[1].next_attempt_at !== null && log[2].next_attempt_at === null);
    assert.equal(log[1].response_excerpt, 'bad gateway');
    assert.equal(new Set(rcv.requests.map((r) => r.headers['webhook-id'])).size, 1, 'one webhook-id across retries');
  });

  it('a receiver slower than the relay timeout fails that attempt with the timeout named; a later attempt succeeds', async () => {
    const rcv = await receiver((_req, n) => (n === 0 ? { delayMs: 2000 } : {}));
    const rl = await relay(h(), rcv.url, { timeout: 300 });
    const d = await post(h(), rl, '{}');
    const done = await settled(h(), d.id);
    assert.equal(done.state, 'finished');
    const [slow, fast] = await attempts(h(), d.id);
    assert.equal(slow.status_code, null);
    assert.match(slow.error ?? '', /no response within 300 ms/);
    assert.ok(slow.duration_ms >= 250 && slow.duration_ms < 1900, `timed out after ${slow.duration_ms} ms`);
    assert.equal(fast.status_code, 200);
  });

  it('only the configured successStatusCodes count: a 200 fails when only 202 is listed', async () => {
    const rcv = await receiver((_req, n) => (n === 0 ? { status: 200 } : { status: 202 }));
    const rl = await relay(h(), rcv.url, { successStatusCodes: [202] });
    const d = await post(h(), rl, '{}');
    const done = await settled(h(), d.id);
    assert.equal(done.state, 'finished');
    const log = await attempts(h(), d.id);
    assert.deepEqual(log.map((a) => a.status_code), [200, 202]);
    assert.match(log[0].error ?? '', /200/);
  });

  it('forwards the raw body and content type with the configured headers, our user agent and a verifiable signature', async () => {
    const rcv = await receiver();
    const rl = await relay(h(), rcv.url, { headers: [{ Authorization: 'Bearer xyz' }, { 'X-Customer-ID': 'abc123' }] });
    const body = 'MessageSid=SM1&Body=caf%C3%A9+%E2%9C%93&From=%2B15005550006';
    const d = await post(h(), rl, body, 'application/x-www-form-urlencoded; charset=utf-8');
    assert.equal((await settled(h(), d.id)).state, 'finished');
    const [req] = rcv.requests;
    assert.equal(req.method, 'POST');
    assert.equal(req.body.toString('utf8'), body);
    assert.equal(req.headers['content-type'], 'application/x-www-form-urlencoded; charset=utf-8');
    assert.equal(req.headers.authorization, 'Bearer xyz');
    assert.equal(req.headers['x-customer-id'], 'abc123');
    assert.equal(req.headers['user-agent'], 'callplane-webhooks');
    assert.equal(req.headers['webhook-id'], d.event_id);
    assert.ok(Math.abs(Number(req.headers['webhook-timestamp']) - req.at / 1000) < 5);
    const wh = new Webhook(rl.secret);
    verifyRaw(wh, req);
    // The signature covers these bytes and this secret only.
    assert.throws(() => verifyRaw(wh, { ...req, body: Buffer.concat([req.body, Buffer.from('x')]) }), WebhookVerificationError);
    const other = await relay(h(), rcv.url);
    assert.throws(() => verifyRaw(new Webhook(other.secret), req), WebhookVerificationError);
  });

  it('410 Gone fails the delivery and disables the relay; a replay then is canceled without being sent', async () => {
    const rcv = await receiver(() => ({ status: 410, body: 'gone' }));
    const rl = await relay(h(), rcv.url);
    const d = await post(h(), rl, '{}');
    const done = await settled(h(), d.id);
    assert.equal(done.state, 'failed');
    assert.equal(done.attempt, 1, 'no retry after 410');
    assert.equal(done.last_status, 410);
    assert.match(done.last_error ?? '', /410/);
    const cfg = await h().call('GET', '/api/v2/webhookRelay/generic', { token: rl.token });
    assert.equal(cfg.body.config.enabled, false);
    assert.equal((await attempts(h(), d.id)).length, 1);

    const replay = await h().call('POST', `/api/v2/webhookRelay/generic/deliveries/${d.id}/replay`, { token: rl.token });
    assert.equal(replay.status, 200, JSON.stringify(replay.body));
    const again = await settled(h(), replay.body.delivery.id);
    assert.equal(again.state, 'canceled');
    assert.match(again.last_error ?? '', /disabled/);
    assert.equal(rcv.requests.length, 1, 'nothing sent to a disabled relay');
  });

  it('gives up visibly when the schedule is spent: failed, "gave up after 3 attempts" with the last error', async () => {
    const rcv = await receiver(() => ({ status: 500, body: 'still broken' }));
    const rl = await relay(h(), rcv.url);
    const d = await post(h(), rl, '{}');
    const done = await settled(h(), d.id);
    assert.equal(done.state, 'failed');
    assert.equal(done.attempt, 3);
    assert.match(done.last_error ?? '', /^gave up after 3 attempts: .*500/);
    assert.ok(done.finished_at !== null);
    assert.equal(rcv.requests.length, 3);
    const log = await attempts(h(), d.id);
    assert.deepEqual(log.map((a) => a.next_attempt_at === null), [false, false, true]);
    const listed = await h().call('GET', '/api/v2/webhookRelay/generic/deliveries', { token: rl.token });
    assert.equal(listed.body.deliveries[0].lastError, done.last_error);
    assert.equal(listed.body.deliveries[0].attempts.length, 3);
  });

  it('a connection refused is an attempt like any other: logged with its error, then retried', async () => {
    const rcv = await receiver();
    const url = rcv.url;
    await rcv.close();
    receivers.splice(receivers.indexOf(rcv), 1);
    const rl = await relay(h(), url);
    const d = await post(h(), rl, '{}');
    const done = await settled(h(), d.id);
    assert.equal(done.state, 'failed');
    const log = await attempts(h(), d.id);
    assert.equal(log.length, 3);
    for (const a of log) assert.match(a.error ?? '', /connection refused/);
  });

  it("task lifecycle events reach the organization's task subscriptions, signed, each with one stable webhook-id across retries", async () => {
    const firstTry = new Set<string>();
    // Every event's first attempt fails, so each is delivered twice.
    const rcv = await receiver((req) => {
      const id = String(req.headers['webhook-id']);
      if (firstTry.has(id)) return { status: 200 };
      firstTry.add(id);
      return { status: 503 };
    });
    const other = await receiver();
    const r = await h().reseller();
    const o = await h().organization(r.id);
    const sub = await h().call('POST', '/api/v2/webhooks', { token: o.token, body: { url: `${rcv.url}/tasks`, label: 'tasks', type: 'task' } });
    assert.equal(sub.status, 201, JSON.stringify(sub.body));
    const conv = await h().call('POST', '/api/v2/webhooks', { token: o.token, body: { url: other.url, label: 'conv', type: 'conversation' } });
    assert.equal(conv.status, 201);
    // An organization without subscriptions: its tasks write no events at all.
    const quiet = await h().organization(r.id);

    const task = await h().call('POST', '/api/v2/tasks', { token: o.token, body: { type: 'ping' } });
    assert.equal(task.status, 201, JSON.stringify(task.body));
    const quietTask = await h().call('POST', '/api/v2/tasks', { token: quiet.token, body: { type: 'ping' } });
    assert.equal(quietTask.status, 201);
    const taskId = task.body.task.id;

    const wanted = ['task.pending', 'task.running', 'task.finished'];
    const delivered = await waitFor('every event delivered', async () => {
      const ok = rcv.requests.filter((q) => firstTry.has(String(q.headers['webhook-id'])));
      const rows = await h().database.db.selectFrom('webhook_deliveries').selectAll().where('org_id', '=', o.id).execute();
      return rows.length === wanted.length && rows.every((d) => d.state === 'finished') ? { ok, rows } : undefined;
    }, 15_000);
    assert.equal(rcv.requests.length, wanted.length * 2, 'each event sent twice (one failure, one success)');
    const wh = new Webhook(sub.body.signingSecret);
    const byId = new Map<string, Received[]>();
    for (const req of rcv.requests) {
      assert.equal(req.path, '/tasks');
      assert.equal(req.headers['content-type'], 'application/json');
      const payload = wh.verify(req.body, sigHeaders(req)) as { type: string; timestamp: string; data: { id: string; state: string } };
      assert.equal(payload.data.id, taskId);
      assert.equal(payload.type, `task.${payload.data.state}`);
      assert.ok(!Number.isNaN(Date.parse(payload.timestamp)));
      const id = String(req.headers['webhook-id']);
      byId.set(id, [...(byId.get(id) ?? []), req]);
    }
    assert.equal(byId.size, wanted.length);
    for (const [id, reqs] of byId) {
      assert.equal(reqs.length, 2, `event ${id} sent twice`);
      assert.equal(reqs[0].body.toString(), reqs[1].body.toString(), 'a retry sends the same body');
    }
    const events = await h().database.db.selectFrom('task_events').select(['id', 'type', 'dispatched']).where('task_id', '=', taskId).orderBy('id').execute();
    assert.deepEqual(events.map((e) => e.type), wanted);
    assert.deepEqual(new Set(byId.keys()), new Set(events.map((e) => e.id)), 'webhook-id is the task event id');
    assert.deepEqual(delivered.rows.map((d) => d.event_type).sort(), [...wanted].sort());
    assert.equal(other.requests.length, 0, 'a conversation subscription gets no task events');

    // The quiet organization's ping ran to its end without writing a single event.
    await waitFor('the quiet organization\'s ping finished', async () => {
      const row = await h().database.db.selectFrom('tasks').select('state').where('id', '=', quietTask.body.task.id).executeTakeFirst();
      return row?.state === 'finished';
    }, 10_000);
    const quietEvents = await h().database.db.selectFrom('task_events').select('id').where('org_id', '=', quiet.id).execute();
    assert.equal(quietEvents.length, 0, 'no events are written for an organization without a task subscription');
    const none = await h().database.db.selectFrom('webhook_deliveries').select('id').where('org_id', '=', quiet.id).execute();
    assert.equal(none.length, 0);
  });

  it('a subscription whose receiver answers 410 Gone is removed', async () => {
    const rcv = await receiver(() => ({ status: 410 }));
    const r = await h().reseller();
    const o = await h().organization(r.id);
    const sub = await h().call('POST', '/api/v2/webhooks', { token: o.token, body: { url: rcv.url, label: 'gone', type: 'task' } });
    assert.equal(sub.status, 201);
    await h().call('POST', '/api/v2/tasks', { token: o.token, body: { type: 'ping' } });
    await rcv.waitFor(1);
    const listed = await waitFor('the subscription removed', async () => {
      const res = await h().call('GET', '/api/v2/webhooks', { token: o.token });
      return res.body.webhooks.length === 0 ? res : undefined;
    }, 15_000);
    assert.equal(listed.status, 200);
    // Deliveries already in flight may still arrive; nothing is made for later events.
    await waitFor('no delivery left', async () => (await h().database.db.selectFrom('webhook_deliveries').select('id')
      .where('org_id', '=', o.id).execute()).length === 0, 15_000);
    // Rows deleted with the subscription may still have had their request on the way.
    await waitFor('no delivery in flight', async () => h().deliveries.running === 0, 15_000);
    const sent = rcv.requests.length;
    await h().call('POST', '/api/v2/tasks', { token: o.token, body: { type: 'ping' } });
    await new Promise((res) => setTimeout(res, 800));
    assert.equal(rcv.requests.length, sent);
  });

  it('GET /api/v2/webhooks/deliveries shows each event sent to a subscription with its attempts; a replay sends it again with the same webhook-id', async () => {
    let healthy = false;
    const rcv = await receiver(() => (healthy ? { status: 200 } : { status: 500, body: 'down for maintenance' }));
    const r = await h().reseller();
    const o = await h().organization(r.id);
    const url = `${rcv.url}/events`;
    const sub = await h().call('POST', '/api/v2/webhooks', { token: o.token, body: { url, label: 'tasks', type: 'task' } });
    assert.equal(sub.status, 201, JSON.stringify(sub.body));
    const webhookId = sub.body.webhooks[0].id;
    const task = await h().call('POST', '/api/v2/tasks', { token: o.token, body: { type: 'ping' } });
    assert.equal(task.status, 201, JSON.stringify(task.body));

    const listed = await waitFor('three events given up on', async () => {
      const res = await h().call('GET', '/api/v2/webhooks/deliveries', { token: o.token, query: { state: 'failed' } });
      return res.body.total === 3 ? res : undefined;
    }, 15_000);
    assert.equal(listed.status, 200);
    assert.equal(rcv.requests.length, 9, 'three attempts of each event');
    for (const d of listed.body.deliveries) {
      assert.equal(d.webhookId, webhookId);
      assert.equal(d.url, url);
      assert.equal(d.type, 'task');
      assert.equal(d.state, 'failed');
      assert.equal(d.nextAttemptAt, null);
      assert.match(d.lastError, /^gave up after 3 attempts/);
      assert.deepEqual(d.attempts.map((a: { attempt: number }) => a.attempt), [1, 2, 3]);
      for (const a of d.attempts) {
        assert.equal(a.statusCode, 500);
        assert.equal(a.responseExcerpt, 'down for maintenance');
      }
      // The payload as sent (extension): the body the receiver got on each attempt.
      assert.equal(d.payload.type, d.eventType);
      const sent = rcv.requests.find((r: { headers: Record<string, unknown> }) => r.headers['webhook-id'] === d.eventId);
      assert.ok(sent, 'the receiver got it');
      assert.deepEqual(d.payload, JSON.parse(String(sent.body)));
    }
    assert.deepEqual(listed.body.deliveries.map((d: { eventType: string }) => d.eventType).sort(), ['task.finished', 'task.pending', 'task.running']);

    // Filters, paging, bad input, and who may look.
    const q = (query: Record<string, unknown>, token = o.token) => h().call('GET', '/api/v2/webhooks/deliveries', { token, query });
    assert.equal((await q({ state: 'finished' })).body.total, 0);
    assert.equal((await q({ type: 'conversation' })).body.total, 0);
    assert.equal((await q({ url: `${rcv.url}/elsewhere` })).body.total, 0);
    assert.equal((await q({ url })).body.total, 3);
    const page = await q({ limit: 1, offset: 2 });
    assert.equal(page.body.total, 3);
    assert.equal(page.body.deliveries.length, 1);
    assert.equal(page.body.deliveries[0].id, listed.body.deliveries[2].id, 'newest first, the same order on every page');
    const bad = await q({ state: 'lost' });
    assert.equal(bad.status, 400);
    assert.match(bad.body.message, /state/);
    assert.equal((await q({ targetAccountId: o.id }, r.token)).body.total, 3, 'a reseller names its organization');
    const stranger = await h().organization((await h().reseller()).id);
    assert.equal((await q({}, stranger.token)).body.total, 0, 'another organization sees none of them');

    const original = listed.body.deliveries.find((d: { eventType: string }) => d.eventType === 'task.finished');
    const foreign = await h().call('POST', `/api/v2/webhooks/deliveries/${original.id}/replay`, { token: stranger.token });
    assert.equal(foreign.status, 404);
    assert.equal((await h().call('POST', '/api/v2/webhooks/deliveries/dlv_nope/replay', { token: o.token })).status, 404);

    healthy = true;
    const before = rcv.requests.length;
    const replay = await h().call('POST', `/api/v2/webhooks/deliveries/${original.id}/replay`, { token: o.token });
    assert.equal(replay.status, 200, JSON.stringify(replay.body));
    assert.notEqual(replay.body.delivery.id, original.id);
    assert.equal(replay.body.delivery.eventId, original.eventId);
    assert.equal(replay.body.delivery.maxAttempts, 8, 'the whole production schedule');
    const done = await settled(h(), replay.body.delivery.id);
    assert.equal(done.state, 'finished');
    const [resent] = await rcv.waitFor(before + 1).then((all) => all.slice(before));
    assert.equal(resent.headers['webhook-id'], original.eventId);
    const wh = new Webhook(sub.body.signingSecret);
    const body = wh.verify(resent.body, sigHeaders(resent)) as { type: string; data: { id: string } };
    assert.equal(body.type, 'task.finished');
    assert.equal(body.data.id, task.body.task.id);
    assert.equal((await delivery(h(), original.id)).state, 'failed', 'the original is left as it was');
  });

  it('POST /api/v2/webhooks/{id}/test sends one signed webhook.test event to that subscription only; another organization\'s id is a 404', async () => {
    const rcv = await receiver(() => ({ status: 200 }));
    const r = await h().reseller();
    const o = await h().organization(r.id);
    const sub = await h().call('POST', '/api/v2/webhooks', { token: o.token, body: { url: `${rcv.url}/tasks`, label: 'tasks', type: 'task' } });
    const other = await h().call('POST', '/api/v2/webhooks', { token: o.token, body: { url: `${rcv.url}/agents`, label: 'agents', type: 'agent' } });
    assert.equal(sub.status, 201);
    assert.equal(other.status, 201);
    const id = sub.body.webhooks[0].id as number;
    const stranger = await h().organization((await h().reseller()).id);
    assert.equal((await h().call('POST', `/api/v2/webhooks/${id}/test`, { token: stranger.token })).status, 404, 'another organization\'s webhook');
    assert.equal(rcv.requests.length, 0);
    const sent = await h().call('POST', `/api/v2/webhooks/${id}/test`, { token: r.token, query: { targetAccountId: o.id } });
    assert.equal(sent.status, 200, JSON.stringify(sent.body));
    assert.equal(sent.body.delivery.webhookId, id);
    assert.equal(sent.body.delivery.eventType, 'webhook.test');
    const done = await settled(h(), sent.body.delivery.id);
    assert.equal(done.state, 'finished');
    const [got] = await rcv.waitFor(1);
    assert.equal(rcv.requests.length, 1, 'only the subscription tested');
    assert.equal(got.path, '/tasks');
    const body = new Webhook(sub.body.signingSecret).verify(got.body.toString(), sigHeaders(got)) as { type: string; data: { webhookId: number; subscriptionType: string } };
    assert.deepEqual([body.type, body.data.webhookId, body.data.subscriptionType], ['webhook.test', id, 'task']);
    const listed = await h().call('GET', '/api/v2/webhooks/deliveries', { token: o.token, query: { type: 'task' } });
    assert.ok(listed.body.deliveries.some((d: { id: string; payload: { type: string } }) => d.id === sent.body.delivery.id && d.payload.type === 'webhook.test'), 'listed with its payload');
  });
}, ENV, { deliveries: true, worker: true, deliveryRuntime: { retryDelay: FAST, dispatchEveryMs: 50 } });

forEachEngine('webhook delivery worker stopping', (h) => {
  it('an attempt in flight when the worker stops is abandoned, not counted as a failure, and sent again with the same webhook-id', async () => {
    let release: (() => void) | undefined;
    const hung = new Promise<void>((resolve) => { release = resolve; });
    const rcv = await receiver(async (_req, n) => {
      if (n === 0) await hung; // holds the first request until the test ends
      return {};
    });
    try {
      const rl = await relay(h(), rcv.url, { timeout: 30_000 });
      const d = await post(h(), rl, '{"n":1}');
      // As if this were the schedule's last attempt: a stop must still not be what fails it.
      await h().database.db.updateTable('webhook_deliveries').set({ max_attempts: 1 }).where('id', '=', d.id).execute();
      h().deliveries.startWorker();
      await rcv.waitFor(1);
      const started = Date.now();
      await h().deliveries.stop({ timeoutMs: 100 });
      assert.ok(Date.now() - started < 5000, `stop took ${Date.now() - started} ms with a 30 s relay timeout`);
      const back = await delivery(h(), d.id);
      assert.equal(back.state, 'pending', 'returned to the queue');
      assert.ok(back.run_at <= Date.now(), 'due at once');
      assert.equal(back.lease_owner, null);
      assert.equal(back.attempt, 0, 'the abandoned attempt is given back');
      assert.equal(back.last_error, ABANDONED);
      assert.equal((await attempts(h(), d.id)).length, 0, 'no attempt of the schedule was logged');

      h().deliveries.startWorker();
      const done = await settled(h(), d.id);
      assert.equal(done.state, 'finished');
      assert.equal(done.attempt, 1);
      const [first, second] = await rcv.waitFor(2);
      assert.equal(second.headers['webhook-id'], first.headers['webhook-id']);
      assert.equal(second.body.toString(), '{"n":1}');
    } finally {
      release?.();
      await h().deliveries.stop();
    }
  });
}, ENV);
