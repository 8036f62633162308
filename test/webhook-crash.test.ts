// Nothing accepted is lost when a delivery worker dies: a real `serve --role worker` process is
// SIGKILLed while it sends deliveries to a slow receiver, a new one is started, and every accepted
// delivery arrives (the receiver dedupes on webhook-id, as Standard Webhooks receivers do).
// @lane wall
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { after, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Webhook } from 'standardwebhooks';
import { SecretBox } from '../src/lib/crypto.ts';
import { newId } from '../src/lib/ids.ts';
import { MAX_DELIVERY_ATTEMPTS } from '../src/webhooks/deliver.ts';
import { newSigningSecret } from '../src/webhooks/deliver.ts';
import { forEachEngine } from './helpers/engines.ts';
import { startReceiver, type Receiver } from './helpers/receiver.ts';
import { waitFor } from './queue/fixtures.ts';
import { freePort } from './helpers/wait.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const N = 300;
const children = new Set<ChildProcess>();
const receivers: Receiver[] = [];
after(async () => {
  for (const c of children) c.kill('SIGKILL');
  await Promise.all(receivers.map((r) => r.close()));
});

/** `callplane serve --role worker` on the harness's database, with a clean environment. */
async function startWorker(env: Record<string, string>): Promise<{ child: ChildProcess; output: () => string; exited: Promise<unknown> }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts', 'serve', '--role', 'worker'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: os.tmpdir(), HOST: '127.0.0.1', PORT: String(await freePort()), LOG_LEVEL: 'info', CALLPLANE_METRICS_PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  let out = '';
  child.stdout!.on('data', (b) => { out += b; });
  child.stderr!.on('data', (b) => { out += b; });
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => { children.delete(child); resolve({ code, signal }); }));
  await waitFor('the worker to be ready', async () => {
    if (child.exitCode !== null) throw new Error(`worker exited early:\n${out}`);
    return /"msg":"ready"/.test(out);
  }, 30_000);
  return { child, output: () => out, exited };
}

forEachEngine('delivery worker killed mid-flight', (h) => {
  it(`a worker SIGKILLed while sending ${N} deliveries loses none: a new worker sends the rest, and every webhook-id arrives`, async () => {
    const key = crypto.randomBytes(32);
    const box = new SecretBox(key);
    // Slow enough that many requests are in flight when the worker dies.
    const rcv = await startReceiver(() => ({ delayMs: 150 }));
    receivers.push(rcv);

    const r = await h().reseller();
    const o = await h().organization(r.id, { vidaPremium: true });
    const db = h().database.db;
    const secret = newSigningSecret();
    const now = Date.now();
    // The relay is written with the workers' key (CALLPLANE_SECRET_KEY below), as the API of a
    // deployment sharing that key would write it.
    const relay = await db.insertInto('webhook_relays').values({
      org_id: o.id, type: 'generic', ingress_id: crypto.randomBytes(32).toString('base64url'), url: `${rcv.url}/in`,
      timeout_ms: 5000, headers: box.sealJson([]), success_status_codes: JSON.stringify([200]),
      signing_secret: box.seal(secret), provider_secret: null, enabled: 1, created_at: now, updated_at: now,
    }).returning('id').executeTakeFirstOrThrow();
    const ids: string[] = [];
    await db.transaction().execute(async (tx) => {
      for (let i = 0; i < N; i++) {
        const eventId = newId('rev', now);
        await tx.insertInto('relay_events').values({
          id: eventId, relay_id: relay.id, org_id: o.id, provider_event_id: null, content_type: 'application/json',
          headers: '{}', body: Buffer.from(JSON.stringify({ n: i })).toString('base64'), received_at: now,
        }).execute();
        const id = newId('dlv', now);
        await tx.insertInto('webhook_deliveries').values({
          id, org_id: o.id, kind: 'relay', relay_id: relay.id, relay_event_id: eventId, webhook_id: null,
          event_id: eventId, event_type: 'generic', payload: null, run_at: now, max_attempts: MAX_DELIVERY_ATTEMPTS,
          created_at: now, updated_at: now,
        }).execute();
        ids.push(eventId);
      }
    });

    const env = {
      ...(h().engine === 'postgres' ? { DATABASE_URL: h().config.databaseUrl! } : { DATA_DIR: h().config.dataDir }),
      CALLPLANE_SECRET_KEY: key.toString('hex'),
      CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true',
      CALLPLANE_DELIVERY_LEASE_MS: '2000',
      CALLPLANE_DELIVERY_CONCURRENCY: '20',
      // Not under test, and its fixed port would collide with other tests' processes.
      CALLPLANE_SIP_ENABLED: 'false',
    };
    const first = await startWorker(env);
    await rcv.waitFor(60, 30_000);
    first.child.kill('SIGKILL');
    await first.exited;
    const receivedBeforeKill = rcv.requests.length;
    const held = await db.selectFrom('webhook_deliveries').select('id').where('org_id', '=', o.id).where('state', '=', 'running').execute();
    assert.ok(held.length > 0, 'the kill must catch deliveries in flight, or this test proves nothing');
    assert.ok(receivedBeforeKill < N, 'the kill came before the end');

    const second = await startWorker(env);
    try {
      const unique = await waitFor('every delivery to arrive', async () => {
        const seen = new Set(rcv.requests.map((q) => String(q.headers['webhook-id'])));
        return seen.size >= N ? seen : undefined;
      }, 60_000);
      assert.deepEqual([...unique].sort(), [...ids].sort(), 'exactly the accepted deliveries arrived, each at least once');
      await waitFor('every delivery finished', async () => {
        const rows = await db.selectFrom('webhook_deliveries').select('state').where('org_id', '=', o.id).execute();
        return rows.every((row) => row.state === 'finished');
      }, 15_000);
      const wh = new Webhook(secret);
      for (const q of rcv.requests) {
        wh.verify(q.body, {
          'webhook-id': String(q.headers['webhook-id']),
          'webhook-timestamp': String(q.headers['webhook-timestamp']),
          'webhook-signature': String(q.headers['webhook-signature']),
        });
      }
      // What the dead worker held was sent again, as a second attempt.
      const rescued = await db.selectFrom('webhook_deliveries').select('id').where('org_id', '=', o.id).where('attempt', '>', 1).execute();
      assert.ok(rescued.length >= held.length, `${rescued.length} deliveries took a second attempt; ${held.length} were held by the dead worker`);
    } finally {
      second.child.kill('SIGTERM');
      await second.exited;
    }
  });
});
