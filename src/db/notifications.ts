// Notifications between processes sharing the database: PostgreSQL NOTIFY and LISTEN. On SQLite
// (one process per DATA_DIR) pg_notify is a function that does nothing (src/db/index.ts).
import { sql } from 'kysely';
import type pg from 'pg';
import { pgDriver } from './pg-driver.ts';
import type { Executor } from './types.ts';

/**
 * Sends `payload` on `channel` when the transaction commits (PostgreSQL delivers NOTIFY only on
 * commit, so listeners never hear of rows before they are visible).
 */
export async function notify(ex: Executor, channel: string, payload: string): Promise<void> {
  await sql`select pg_notify(${channel}, ${payload})`.execute(ex);
}

export interface Listener {
  close(): Promise<void>;
}

/**
 * LISTEN on a dedicated connection: a pooled one would drop the subscription when it is returned
 * to the pool. Reconnects after a failure and then calls onReconnect, since notifications sent
 * while disconnected are gone.
 */
export async function listenOn(opts: {
  databaseUrl: string;
  channel: string;
  onNotify(payload: string | undefined): void;
  onReconnect(): void;
  /** The connection was lost: notifications are missed until onReconnect. */
  onDisconnect?(): void;
  reconnectMs?: number;
  /**
   * How often the connection is asked a `select 1`; one not answered within this long is taken
   * for dead (a host or network gone without a word, which TCP itself may take minutes to notice)
   * and replaced. Default 5 s.
   */
  checkMs?: number;
  log?: { warn(obj: object, msg: string): void };
}): Promise<Listener> {
  let client: pg.Client | undefined;
  let closed = false;
  let timer: NodeJS.Timeout | undefined;
  const checkMs = opts.checkMs ?? 5000;

  /** Drops a connection that stopped answering: it counts as lost from now, and a new one is made. */
  const abandon = (c: pg.Client) => {
    if (client !== c) return;
    client = undefined;
    opts.onDisconnect?.();
    (c as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
    schedule();
  };
  const checkNow = () => {
    const c = client;
    if (!c) return;
    const late = setTimeout(() => {
      opts.log?.warn({ checkMs }, 'listener connection did not answer; replacing it');
      abandon(c);
    }, checkMs);
    late.unref();
    c.query('select 1').then(() => clearTimeout(late), () => clearTimeout(late));
  };

  const connect = async (): Promise<void> => {
    const c = new (pgDriver().Client)({ connectionString: opts.databaseUrl, keepAlive: true, keepAliveInitialDelayMillis: 10_000 });
    c.on('notification', (msg) => opts.onNotify(msg.payload || undefined));
    c.on('error', (err) => {
      opts.log?.warn({ err }, 'listener connection failed; reconnecting');
      void c.end().catch(() => {});
      if (client === c) { client = undefined; opts.onDisconnect?.(); }
      schedule();
    });
    c.on('end', () => {
      if (client === c) { client = undefined; opts.onDisconnect?.(); }
      schedule();
    });
    await c.connect();
    await c.query(`LISTEN ${pgDriver().escapeIdentifier(opts.channel)}`);
    if (closed) {
      await c.end().catch(() => {});
      return;
    }
    client = c;
  };
  const schedule = () => {
    if (closed || timer) return;
    timer = setTimeout(() => {
      timer = undefined;
      connect().then(() => opts.onReconnect(), (err: unknown) => {
        opts.log?.warn({ err }, 'listener reconnect failed');
        schedule();
      });
    }, opts.reconnectMs ?? 1000);
    timer.unref();
  };

  await connect();
  const check = setInterval(checkNow, checkMs);
  check.unref();
  return {
    async close() {
      closed = true;
      clearInterval(check);
      if (timer) clearTimeout(timer);
      const c = client;
      client = undefined;
      await c?.end().catch(() => {});
    },
  };
}
