// The live feed (GET /api/v2/conversations/live, Server-Sent Events): the conversations in progress
// below an account, and each line as soon as it is stored, pushed. One feed per process: one
// listener on the database's live channel (LIVE_CHANNEL: every process's writes on PostgreSQL,
// this process's own on SQLite), one load of the rows each batch of notifications names, whatever
// the number of open streams, and each event then handed to the streams whose account it lies
// below (an index by account id, so a batch costs no more per stream). docs/conversations.md,
// "Live feed".
import type { Database, Listener } from '../../db/index.ts';
import type { AccountRow, Db, MessageRow } from '../../db/types.ts';
import { AuthCache, reauthenticate, type Scope, type TokenLookup } from '../../http/auth.ts';
import { HttpError, TooManyRequests } from '../../http/errors.ts';
import { presentLiveConversation, presentTranscriptLine } from './present.ts';
import { LIVE_CHANNEL, liveRepo, type LiveLadder, type LiveMessageRow } from './repository.ts';

/** The snapshot: at most this many conversations in progress, each with at most this many of its last lines. */
export const LIVE_SNAPSHOT_CONVERSATIONS = 100;
export const LIVE_SNAPSHOT_LINES = 50;
/** Rows a load reads by id in one statement. */
const LOAD_BATCH = 500;

/** Where a stream's events go: the HTTP response (live-routes.ts). */
export interface LiveSink {
  /** Writes text to the client. */
  write(text: string): void;
  /** Bytes written that the client has not taken yet. */
  buffered(): number;
  /** Ends the response (what was written is still sent). */
  end(): void;
  /** Drops the connection at once (a client that does not read). */
  destroy(): void;
}

export interface LiveFeedDeps {
  db: Db;
  /** The database's LISTEN (src/db/index.ts). */
  listen: Database['listen'];
  /** What authentication reads: a stream's token is checked again every recheckMs. */
  lookup: TokenLookup;
  /** Streams open at once in this process (CALLPLANE_LIVE_STREAMS_MAX). */
  maxStreams: number;
  /** Streams one token may have open at once in this process (CALLPLANE_LIVE_STREAMS_PER_TOKEN). */
  perToken: number;
  /** A comment line this often keeps proxies from closing a quiet stream (default 15 s). */
  heartbeatMs?: number;
  /** How often each stream's token (and target account) is checked again (default 15 s). */
  recheckMs?: number;
  /** A stream whose client leaves more than this unread is dropped (default 1 MiB). */
  maxBufferedBytes?: number;
  log?: { warn(obj: object, msg: string): void };
  now?: () => number;
}

type LiveEvent = { name: 'conversation' | 'message'; ladder: LiveLadder; data: unknown };

interface Stream {
  readonly tokenId: number;
  readonly token: string;
  readonly scope: Scope;
  readonly target: AccountRow;
  readonly targetAccountId: number | undefined;
  sink: LiveSink | undefined;
  /** The last event id sent. */
  seq: number;
  /** Until its snapshot is written: the events that came meanwhile, sent after it. */
  held: LiveEvent[] | null;
  closed: boolean;
}

/** One event in the text/event-stream format. */
function frame(id: number, event: string, data: unknown): string {
  return `id: ${id}\nevent: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
}

export function liveFeed(deps: LiveFeedDeps) {
  const { db, lookup } = deps;
  const clock = deps.now ?? Date.now;
  const heartbeatMs = deps.heartbeatMs ?? 15_000;
  const recheckMs = deps.recheckMs ?? 15_000;
  const maxBuffered = deps.maxBufferedBytes ?? 1024 * 1024;
  // Rechecks read tokens through the cache authentication uses, valid while no token or account changed.
  const authCache = AuthCache.for(db);

  const streams = new Set<Stream>();
  /** Streams by the account they follow: an event goes to those of its agent, organization, reseller and partner. */
  const byAccount = new Map<number, Set<Stream>>();
  const perToken = new Map<number, number>();
  let listening: Promise<Listener> | undefined;
  let closing = false;
  /** Notification payloads not yet loaded, in the order they came. */
  let pending: string[] = [];
  let flushScheduled = false;
  let flushing = false;
  let heartbeat: NodeJS.Timeout | undefined;
  let recheck: NodeJS.Timeout | undefined;

  function listen(): Promise<Listener> {
    listening ??= deps.listen(LIVE_CHANNEL, {
      onNotify: (payload) => {
        if (!payload || streams.size === 0) return;
        pending.push(payload);
        scheduleFlush();
      },
      // Notifications sent while the connection was away are gone: every stream starts over.
      onReconnect: () => { for (const s of streams) void resnapshot(s); },
      log: deps.log,
    }).catch((err: unknown) => {
      listening = undefined;
      throw err;
    });
    return listening;
  }

  function send(s: Stream, event: string, data: unknown): void {
    if (s.closed || !s.sink) return;
    s.sink.write(frame(++s.seq, event, data));
    overflowed(s);
  }

  /** A client that leaves too much unread is dropped rather than buffered for. */
  function overflowed(s: Stream): boolean {
    if (!s.sink || s.sink.buffered() <= maxBuffered) return false;
    deps.log?.warn({ buffered: s.sink.buffered(), tokenId: s.tokenId }, 'live stream dropped: its client does not read');
    remove(s);
    s.sink.destroy();
    return true;
  }

  function remove(s: Stream): void {
    if (s.closed) return;
    s.closed = true;
    streams.delete(s);
    const set = byAccount.get(s.target.id);
    set?.delete(s);
    if (set?.size === 0) byAccount.delete(s.target.id);
    const n = (perToken.get(s.tokenId) ?? 1) - 1;
    if (n > 0) perToken.set(s.tokenId, n);
    else perToken.delete(s.tokenId);
    if (streams.size === 0) {
      clearInterval(heartbeat);
      clearInterval(recheck);
      heartbeat = recheck = undefined;
      pending = [];
    }
  }

  /** Ends a stream, telling its client why with a `closed` event. */
  function finish(s: Stream, message: string): void {
    if (s.closed) return;
    send(s, 'closed', { message });
    const sink = s.sink;
    remove(s);
    sink?.end();
  }

  function scheduleFlush(): void {
    if (flushScheduled || flushing) return;
    flushScheduled = true;
    // A few milliseconds gather the notifications of one burst (a message and its conversation) into one load.
    setTimeout(() => void flush(), 5).unref();
  }

  async function flush(): Promise<void> {
    flushScheduled = false;
    flushing = true;
    try {
      while (pending.length > 0) {
        const batch = pending.splice(0, LOAD_BATCH);
        if (streams.size === 0) continue;
        await deliver(batch);
      }
    } catch (err) {
      // What was lost is unknown: every stream starts over from a snapshot.
      deps.log?.warn({ err }, 'live feed could not load what changed; streams start over');
      for (const s of streams) void resnapshot(s);
    } finally {
      flushing = false;
      if (pending.length > 0) scheduleFlush();
    }
  }

  /** Loads what a batch of notifications names (two statements) and hands each event to its streams, in order. */
  async function deliver(batch: string[]): Promise<void> {
    const order = [...new Set(batch)];
    const ids = (kind: string) => order.filter((p) => p.startsWith(`${kind}:`)).map((p) => p.slice(2));
    const [conversations, messages] = await Promise.all([liveRepo.conversations(db, ids('c')), liveRepo.messages(db, ids('m'))]);
    const c = new Map(conversations.map((r) => [r.id, r]));
    const m = new Map(messages.map((r) => [r.id, r]));
    for (const p of order) {
      const id = p.slice(2);
      const event: LiveEvent | undefined = p.startsWith('c:')
        ? (c.has(id) ? { name: 'conversation', ladder: c.get(id)!, data: presentLiveConversation(c.get(id)!) } : undefined)
        : (m.has(id) ? { name: 'message', ladder: m.get(id)!, data: messageEvent(m.get(id)!) } : undefined);
      if (!event) continue;
      for (const s of audience(event.ladder)) {
        if (s.held) s.held.push(event);
        else send(s, event.name, event.data);
      }
    }
  }

  function audience(l: LiveLadder): Stream[] {
    const out: Stream[] = [];
    for (const id of [l.account_id, l.org_id, l.reseller_id, l.partner_id]) {
      if (id !== null) for (const s of byAccount.get(id) ?? []) out.push(s);
    }
    return out;
  }

  /** The snapshot of what is in progress, then what was held back while it was read. */
  async function snapshot(s: Stream): Promise<void> {
    const rows = await liveRepo.open(db, s.target, LIVE_SNAPSHOT_CONVERSATIONS);
    const lines = new Map<string, MessageRow[]>();
    for (const l of await liveRepo.lastLines(db, rows.map((r) => r.id), LIVE_SNAPSHOT_LINES)) {
      let list = lines.get(l.conversation_id);
      if (!list) lines.set(l.conversation_id, (list = []));
      list.push(l);
    }
    const calls = rows.map((r) => ({ ...presentLiveConversation(r), messages: (lines.get(r.id) ?? []).map(presentTranscriptLine) }));
    send(s, 'snapshot', { calls });
    const held = s.held ?? [];
    s.held = null;
    for (const e of held) send(s, e.name, e.data);
  }

  async function resnapshot(s: Stream): Promise<void> {
    if (s.closed) return;
    s.held ??= [];
    try {
      await snapshot(s);
    } catch (err) {
      deps.log?.warn({ err }, 'live stream snapshot failed; closing it');
      finish(s, 'The live feed lost track of changes; connect again');
    }
  }

  function tick(): void {
    for (const s of streams) {
      if (s.held || !s.sink) continue;
      s.sink.write(': ping\n\n');
      overflowed(s);
    }
  }

  /** Each token (and the account a stream names) checked again: a deleted or expired token, a suspended account, ends its streams. */
  async function recheckAll(): Promise<void> {
    const groups = new Map<string, Stream[]>();
    for (const s of streams) {
      const key = `${s.targetAccountId ?? ''}:${s.token}`;
      const list = groups.get(key);
      if (list) list.push(s);
      else groups.set(key, [s]);
    }
    for (const list of groups.values()) {
      const s = list[0]!;
      try {
        await reauthenticate(lookup, s.token, clock(), authCache);
        if (s.targetAccountId !== undefined) await s.scope.account(s.targetAccountId);
      } catch (err) {
        if (err instanceof HttpError) for (const t of list) finish(t, err.message);
        else deps.log?.warn({ err }, 'live stream token check failed; trying again later');
      }
    }
  }

  return {
    /** Streams open in this process. */
    get open(): number { return streams.size; },

    /**
     * Opens a stream for `scope` (the request's, with the token it was admitted with) on the
     * conversations below `targetAccountId` (default: the token's account). Refusals are thrown
     * before `connect` is called, so they are ordinary HTTP answers: 404/403 for the target, 429
     * past the caps. Then `connect` starts the response (and calls `gone` when the client goes
     * away) and the snapshot is sent.
     */
    async start(scope: Scope, token: string, targetAccountId: number | undefined, connect: (gone: () => void) => LiveSink): Promise<void> {
      const target = targetAccountId === undefined ? scope.actor : await scope.account(targetAccountId);
      if (closing) throw new HttpError(503, 'The server is shutting down; connect again shortly');
      await listen();
      if (streams.size >= deps.maxStreams) {
        throw new TooManyRequests(`This server streams at most ${deps.maxStreams} live feeds at once; try again later`, 5000);
      }
      const mine = perToken.get(scope.token.id) ?? 0;
      if (mine >= deps.perToken) {
        throw new TooManyRequests(`A token may have at most ${deps.perToken} live feeds open at once; close one first`, 5000);
      }
      const s: Stream = { tokenId: scope.token.id, token, scope, target, targetAccountId, sink: undefined, seq: 0, held: [], closed: false };
      streams.add(s);
      let set = byAccount.get(target.id);
      if (!set) byAccount.set(target.id, (set = new Set()));
      set.add(s);
      perToken.set(s.tokenId, mine + 1);
      heartbeat ??= setInterval(tick, heartbeatMs).unref();
      recheck ??= setInterval(() => void recheckAll(), recheckMs).unref();
      try {
        s.sink = connect(() => remove(s));
      } catch (err) {
        remove(s);
        throw err;
      }
      await resnapshot(s);
    },

    /** Ends every stream (the server is stopping); new ones are refused from now on. */
    closeStreams(): void {
      closing = true;
      for (const s of [...streams]) finish(s, 'The server is shutting down; connect again shortly');
    },

    async close(): Promise<void> {
      closing = true;
      for (const s of [...streams]) finish(s, 'The server is shutting down; connect again shortly');
      const l = listening;
      listening = undefined;
      await (await l?.catch(() => undefined))?.close();
    },
  };
}

/** A `message` event: one line, shaped as the conversation read's lines, with where it belongs. */
function messageEvent(m: LiveMessageRow) {
  return { conversationId: m.conversation_id, roomId: `${m.account_id}:${m.room_id}`, accountId: m.account_id, message: presentTranscriptLine(m) };
}

export type LiveFeed = ReturnType<typeof liveFeed>;
