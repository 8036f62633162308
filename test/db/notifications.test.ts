// LISTEN connections (src/db/notifications.ts) against a real PostgreSQL, through a TCP relay on
// loopback that can go silent: a connection that stops answering without closing (a host or a
// network gone) is taken for lost within the check interval, and replaced by a new one that hears
// again. TCP alone may take minutes to notice; until then a process would cache and wait unawares.
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, describe, it } from 'node:test';
import pg from 'pg';
import { listenOn } from '../../src/db/notifications.ts';
import { PG_URL } from '../helpers/harness.ts';
import { waitFor } from '../helpers/wait.ts';

/** Forwards to PostgreSQL; freeze() stops passing bytes on the connections open now, without closing them. */
async function relay(target: URL) {
  const open: { client: net.Socket; server: net.Socket }[] = [];
  const frozen: typeof open = [];
  const srv = net.createServer((client) => {
    const server = net.connect(Number(target.port || 5432), target.hostname);
    client.pipe(server);
    server.pipe(client);
    const pair = { client, server };
    open.push(pair);
    const drop = () => { client.destroy(); server.destroy(); };
    client.on('error', drop);
    server.on('error', drop);
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const port = (srv.address() as net.AddressInfo).port;
  return {
    url: (() => { const u = new URL(target.href); u.hostname = '127.0.0.1'; u.port = String(port); return u.href; })(),
    connections: () => open.length,
    freeze() {
      for (const pair of open.splice(0)) {
        frozen.push(pair);
        const { client, server } = pair;
        client.unpipe(server);
        server.unpipe(client);
        client.pause();
        server.pause();
      }
    },
    close: () => new Promise<void>((r) => { srv.close(() => r()); for (const p of [...open, ...frozen]) { p.client.destroy(); p.server.destroy(); } }),
  };
}

describe('LISTEN connections', { skip: PG_URL ? false : 'set TEST_DATABASE_URL=postgres://… to run' }, () => {
  const closers: (() => Promise<void>)[] = [];
  after(async () => { for (const c of closers.reverse()) await c(); });

  it('a connection that goes silent is taken for lost within the check interval and replaced; the new one hears', async () => {
    const r = await relay(new URL(PG_URL!));
    closers.push(r.close);
    const heard: string[] = [];
    let lost = 0, back = 0;
    const channel = `test_listen_${process.pid}`;
    const listener = await listenOn({
      databaseUrl: r.url, channel, checkMs: 300, reconnectMs: 50,
      onNotify: (p) => heard.push(p ?? ''), onDisconnect: () => { lost++; }, onReconnect: () => { back++; },
    });
    closers.push(() => listener.close());
    const say = async (payload: string) => {
      const c = new pg.Client({ connectionString: PG_URL });
      await c.connect();
      try { await c.query('select pg_notify($1, $2)', [channel, payload]); } finally { await c.end(); }
    };
    await say('one');
    await waitFor('the first notification', async () => (heard.includes('one') ? true : undefined), 5000, 10);

    r.freeze();
    await say('while silent');
    const started = Date.now();
    await waitFor('the silent connection taken for lost', async () => (lost > 0 ? true : undefined), 5000, 10);
    assert.ok(Date.now() - started < 2000, `noticed in ${Date.now() - started} ms`);
    assert.ok(!heard.includes('while silent'), 'nothing came through the silent connection');
    await waitFor('a new connection', async () => (back > 0 ? true : undefined), 5000, 10);
    await say('two');
    await waitFor('a notification on the new connection', async () => (heard.includes('two') ? true : undefined), 5000, 10);
    assert.equal(lost, 1);
  });
});
