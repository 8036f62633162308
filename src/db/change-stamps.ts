// Change stamps (src/db/index.ts changeStamp): a value that moves whenever some tables may have
// changed, so a cache of their rows (src/db/stamped-cache.ts) stays valid while it holds still.
//
// SQLite (WriteCounter): one process serves a DATA_DIR and every statement it runs goes through its
// one connection, so writes are counted as statements are prepared; PRAGMA data_version (read once
// per turn of the event loop) adds commits by any other connection (a CLI command, an operator's
// sqlite3 shell).
//
// PostgreSQL (PgChangeWatch): other processes write unseen, so the watched tables carry a trigger
// (migration 0016) that NOTIFYs CHANGE_CHANNEL with the table's name at commit, heard here on a
// LISTEN connection of its own. This process's own writes move the stamp as their commit returns.
// A write that commits a watched table then sends a marker on the same channel and waits (a
// little) to hear it back: PostgreSQL delivers notifications in commit order, so by then every
// listening process has been sent the change, before the request that made it is answered. While
// the LISTEN connection is down (not yet up, or lost and reconnecting) the stamp moves on every
// reading, so nothing is cached and every lookup reads the database.
import crypto from 'node:crypto';
import type SQLite from 'better-sqlite3';
import type pg from 'pg';
import { listenOn, type Listener } from './notifications.ts';

export type ChangeStamp = () => string;

/** The channel of the change triggers (migrations 0016-change-notifications and 0019). */
export const CHANGE_CHANNEL = 'callplane_changed';
/** Tables with a change trigger on PostgreSQL: the only ones a stamp can watch there (migrations 0016, 0019, 0028). */
export const WATCHED_TABLES: readonly string[] = ['accounts', 'tokens', 'webhooks', 'subscriptions', 'billing_periods', 'catalog_items', 'org_addons'];

const WRITE_TARGET = /\b(?:insert(?:\s+or\s+\w+)?\s+into|replace\s+into|update(?:\s+or\s+\w+)?|delete\s+from|truncate(?:\s+table)?)\s+(?:"?(?:main|public)"?\.)?"?(\w+)"?/gi;
const SCHEMA_CHANGE = /^\s*(?:alter|drop|create)\b/i;

/** What a statement may change: the tables it writes, or everything for a schema change. */
export function writeTargets(source: string): string[] | 'schema' {
  if (SCHEMA_CHANGE.test(source)) return 'schema';
  return [...source.matchAll(WRITE_TARGET)].map((m) => m[1].toLowerCase());
}

/** SQLite: writes counted per table by the statement cache, plus other connections' commits. */
export class WriteCounter {
  readonly #counts = new Map<string, number>();
  #schema = 0;
  readonly #dataVersion: SQLite.Statement;
  /** data_version as read in this turn of the event loop (cleared at the next turn). */
  #version: string | undefined;
  readonly #forget = () => { this.#version = undefined; };

  constructor(sqlite: SQLite.Database) {
    this.#dataVersion = sqlite.prepare('pragma data_version').pluck();
  }

  /**
   * Another connection's commits, read once per turn of the event loop: every request authenticates
   * (two stamps each), and the pragma was up to 5 % of a busy server's time. A commit by another
   * process is therefore seen from the next turn on (well under a millisecond later on a busy server).
   */
  #otherCommits(): string {
    if (this.#version === undefined) {
      this.#version = String(this.#dataVersion.get());
      setImmediate(this.#forget);
    }
    return this.#version;
  }

  /** Called as a statement is about to run (over-counting a write that then fails is harmless). */
  count(targets: string[] | 'schema'): void {
    if (targets === 'schema') this.#schema++;
    else for (const t of targets) this.#counts.set(t, (this.#counts.get(t) ?? 0) + 1);
  }

  stamp(tables: readonly string[]): string {
    let n = 0;
    for (const t of tables) n += this.#counts.get(t) ?? 0;
    return `${this.#schema}.${n}.${this.#otherCommits()}`;
  }
}

const SYNC = 'sync:';
/** How long a write waits to hear its marker back before answering anyway. */
const SYNC_WAIT_MS = 2000;

type Query = (...args: unknown[]) => Promise<unknown>;

/** PostgreSQL: this process's commits to the watched tables, and every process's, heard by LISTEN. */
export class PgChangeWatch {
  readonly #local = new Map<string, number>();
  readonly #heard = new Map<string, number>();
  readonly #markers = new Map<string, () => void>();
  readonly #targets = new Map<string, string[]>();
  #listener: Listener | undefined;
  #starting: Promise<void> | undefined;
  #live = false;
  #epoch = 0;
  #off = 0;
  #closed = false;

  constructor(readonly databaseUrl: string, readonly log?: { warn(obj: object, msg: string): void }) {}

  /** The stamp of `tables` (all of them watched); starts listening on first use. */
  stampOf(tables: readonly string[]): ChangeStamp {
    const unwatched = tables.filter((t) => !WATCHED_TABLES.includes(t));
    if (unwatched.length > 0) throw new Error(`no change trigger on ${unwatched.join(', ')} (see migration 0016)`);
    this.#start();
    return () => {
      if (!this.#live) return `off.${++this.#off}`;
      let local = 0, heard = 0;
      for (const t of tables) {
        local += this.#local.get(t) ?? 0;
        heard += this.#heard.get(t) ?? 0;
      }
      return `${this.#epoch}.${local}.${heard}`;
    };
  }

  /**
   * Follows a pooled connection's statements: a write to a watched table moves this process's
   * stamp once it has committed (at its COMMIT inside a transaction), then waits for its marker.
   */
  follow(client: pg.PoolClient): void {
    const query = client.query.bind(client) as Query;
    let written: Set<string> | null = null;
    client.query = ((...args: unknown[]) => {
      const text = typeof args[0] === 'string' ? args[0] : undefined;
      if (text === undefined || args.some((a) => typeof a === 'function')) return query(...args);
      const head = text.trimStart().slice(0, 24).toLowerCase();
      if (head.startsWith('begin') || head.startsWith('start transaction')) {
        written = new Set();
        return query(...args);
      }
      // The end of a transaction (a savepoint's rollback is not one).
      const commits = head.startsWith('commit') || head.startsWith('end');
      if (commits || (head.startsWith('rollback') && !/^rollback\s+to\b/.test(head)) || head.startsWith('abort')) {
        const tables = written;
        written = null;
        if (!tables || tables.size === 0 || !commits) return query(...args);
        return query(...args).then((r) => this.#committed(query, [...tables]).then(() => r));
      }
      const targets = this.#watchedTargets(text);
      if (targets.length === 0) return query(...args);
      if (written) {
        for (const t of targets) written.add(t);
        return query(...args);
      }
      return query(...args).then((r) => this.#committed(query, targets).then(() => r));
    }) as typeof client.query;
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#live = false;
    await this.#starting?.catch(() => {});
    await this.#listener?.close();
  }

  #watchedTargets(text: string): string[] {
    let t = this.#targets.get(text);
    if (!t) {
      const all = writeTargets(text);
      t = all === 'schema' ? [] : all.filter((x) => WATCHED_TABLES.includes(x));
      if (this.#targets.size >= 1000) this.#targets.delete(this.#targets.keys().next().value!);
      this.#targets.set(text, t);
    }
    return t;
  }

  async #committed(query: Query, tables: string[]): Promise<void> {
    for (const t of tables) this.#local.set(t, (this.#local.get(t) ?? 0) + 1);
    if (!this.#live) return; // nothing is cached anywhere that could not hear it: no one to wait for
    const id = crypto.randomUUID();
    let timer: NodeJS.Timeout | undefined;
    const heard = new Promise<void>((resolve) => {
      this.#markers.set(id, resolve);
      timer = setTimeout(resolve, SYNC_WAIT_MS);
    });
    try {
      await query('select pg_notify($1, $2)', [CHANGE_CHANNEL, `${SYNC}${id}`]);
      await heard;
    } catch (err) {
      this.log?.warn({ err }, 'change marker not sent; other processes hear the change on their own');
    } finally {
      clearTimeout(timer);
      this.#markers.delete(id);
    }
  }

  #start(): void {
    if (this.#starting || this.#closed) return;
    this.#starting = listenOn({
      databaseUrl: this.databaseUrl,
      channel: CHANGE_CHANNEL,
      onNotify: (payload) => this.#notified(payload),
      onDisconnect: () => { this.#live = false; },
      onReconnect: () => { this.#epoch++; this.#live = true; },
      log: this.log,
    }).then((l) => {
      if (this.#closed) return void l.close();
      this.#listener = l;
      this.#epoch++;
      this.#live = true;
    }, (err: unknown) => {
      // Not reachable now: stay uncached and try again shortly.
      this.log?.warn({ err }, 'change listener not started; nothing is cached until it is');
      setTimeout(() => { this.#starting = undefined; this.#start(); }, 1000).unref();
    });
  }

  #notified(payload: string | undefined): void {
    if (!payload) return;
    if (payload.startsWith(SYNC)) {
      this.#markers.get(payload.slice(SYNC.length))?.();
      return;
    }
    this.#heard.set(payload, (this.#heard.get(payload) ?? 0) + 1);
  }
}
