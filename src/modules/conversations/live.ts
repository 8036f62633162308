// The live feed (GET /api/v2/conversations/live, Server-Sent Events): the conversations in progress
// below an account, and each line as soon as it is stored, pushed. One feed per process: one
// listener on the database's live channel (LIVE_CHANNEL: every process's writes on PostgreSQL,
// this process's own on SQLite), one load of the rows each batch of notifications names, whatever
// the number of open streams, and each event then handed to the streams whose account it lies
// below (an index by account id, so a batch costs no more per stream). docs/conversations.md,
// "Live feed".
import crypto from 'node:crypto';
import { changeStamp, type Database, type Listener } from '../../db/index.ts';
import type { AccountRow, Db } from '../../db/types.ts';
import { AuthCache, reauthenticate, type Scope, type TokenLookup } from '../../http/auth.ts';
import { hashToken } from '../../lib/crypto.ts';
import { within } from '../../lib/time.ts';
import { HttpError, TooManyRequests } from '../../http/errors.ts';
import { presentLiveConversation, presentTranscriptLine } from './present.ts';
import { LIVE_CHANNEL, liveRepo, type LiveLadder, type LiveMessageRow } from './repository.ts';

/** The snapshot: at most this many conversations in progress, each with at most this many of its last lines. */
export const LIVE_SNAPSHOT_CONVERSATIONS = 100;
export const LIVE_SNAPSHOT_LINES = 50;
/** ...and at most this many lines in all (shared among its conversations) and this many bytes of JSON. */
export const LIVE_SNAPSHOT_TOTAL_LINES = 1000;
export const LIVE_SNAPSHOT_BYTES = 512 * 1024;
/** The events a reconnecting stream can be replayed (Last-Event-ID): at most this many, of at most this many bytes, this recent. */
export const LIVE_REPLAY_EVENTS = 2000;
const LIVE_REPLAY_BYTES = 4 * 1024 * 1024;
export const LIVE_REPLAY_MS = 5 * 60_000;
/** After the last stream closes, changes are still followed this long, so that a reconnect can resume. */
const LINGER_MS = 60_000;
/** A stream whose client does not take its snapshot within this long is dropped. */
const SNAPSHOT_DRAIN_MS = 30_000;
/** Events held for a stream while its snapshot is written: past this many its client is too slow and is dropped. */
const MAX_HELD = 5000;
/** Rows a load reads by id in one statement. */
const LOAD_BATCH = 500;

/** Where a stream's events go: the HTTP response (live-routes.ts). */
export interface LiveSink {
  /** Writes text to the client; false when it is buffered past the socket's high-water mark (wait for `drained`). */
  write(text: string): boolean;
  /** Bytes written that the client has not taken yet. */
  buffered(): number;
  /** Resolves once what was written has been taken (or the connection is gone). */
  drained(): Promise<void>;
  /** Ends the response (what was written is still sent). */
  end(): void;
  /** Drops the connection at once (a client that does not read). */
  destroy(): void;
}

export interface LiveFeedDeps {
  db: Db;
  /** The database's LISTEN (src/db/index.ts). */
  listen: Database['listen'];
  /** What authentication reads: a stream's token is checked again whenever tokens or accounts change, and every recheckMs. */
  lookup: TokenLookup;
  /** Streams open at once in this process (CALLPLANE_LIVE_STREAMS_MAX). */
  maxStreams: number;
  /** Streams one token may have open at once in this process (CALLPLANE_LIVE_STREAMS_PER_TOKEN). */
  perToken: number;
  /** Streams the tokens of one account may have open at once in this process (CALLPLANE_LIVE_STREAMS_PER_ACCOUNT; default 20). */
  perAccount?: number;
  /** Streams of the tokens of one organization and the agents below it (CALLPLANE_LIVE_STREAMS_PER_ORGANIZATION; default 50). */
  perOrganization?: number;
  /** Streams of the tokens of one reseller and every account below it (CALLPLANE_LIVE_STREAMS_PER_RESELLER; default 200). */
  perReseller?: number;
  /** Streams the tokens of one account may start per minute (CALLPLANE_LIVE_STARTS_PER_MINUTE; default 30). */
  startsPerMinute?: number;
  /** The snapshot's limits (default LIVE_SNAPSHOT_TOTAL_LINES and LIVE_SNAPSHOT_BYTES). */
  snapshotLines?: number;
  snapshotBytes?: number;
  /** A comment line this often keeps proxies from closing a quiet stream (default 15 s). */
  heartbeatMs?: number;
  /** How often each stream's token (and target account) is checked again whatever changed (default 15 s). */
  recheckMs?: number;
  /** How often the tokens' and accounts' change stamp is looked at (default 100 ms): a change checks every stream's token at once. */
  watchMs?: number;
  /** A stream whose client leaves more than this unread is dropped (default 1 MiB). */
  maxBufferedBytes?: number;
  log?: { warn(obj: object, msg: string): void };
  now?: () => number;
}

/** One event as loaded: `json` is its data, serialized once for every stream and the replay buffer. */
interface LiveEvent { seq: number; name: 'conversation' | 'message'; ladder: LiveLadder; json: string; at: number }

interface Stream {
  readonly tokenId: number;
  readonly token: string;
  readonly scope: Scope;
  readonly target: AccountRow;
  readonly targetAccountId: number | undefined;
  /** The caps it counts against (token, account, organization, reseller). */
  readonly caps: string[];
  /** When its token expires (ms), if it does. */
  expiresAt: number | null;
  sink: LiveSink | undefined;
  /** Until its snapshot is written: the events that came meanwhile, sent after it. */
  held: LiveEvent[] | null;
  closed: boolean;
}

/** What a cap is, for its 429's message. */
interface Cap { key: string; max: number; message: string }

export function liveFeed(deps: LiveFeedDeps) {
  const { db, lookup } = deps;
  const clock = deps.now ?? Date.now;
  const heartbeatMs = deps.heartbeatMs ?? 15_000;
  const recheckMs = deps.recheckMs ?? 15_000;
  const watchMs = deps.watchMs ?? 100;
  const maxBuffered = deps.maxBufferedBytes ?? 1024 * 1024;
  const perAccount = deps.perAccount ?? 20;
  const perOrganization = deps.perOrganization ?? 50;
  const perReseller = deps.perReseller ?? 200;
  const startsPerMinute = deps.startsPerMinute ?? 30;
  const snapshotLines = deps.snapshotLines ?? LIVE_SNAPSHOT_TOTAL_LINES;
  const snapshotBytes = deps.snapshotBytes ?? LIVE_SNAPSHOT_BYTES;
  // Rechecks read tokens through the cache authentication uses, valid while no token or account changed.
  const authCache = AuthCache.for(db);
  // Moves when a token or account may have changed, in any process (PostgreSQL's change triggers).
  const tokensChanged = changeStamp(db, ['accounts', 'tokens']);

  const streams = new Set<Stream>();
  /** Streams by the account they follow: an event goes to those of its agent, organization, reseller and partner. */
  const byAccount = new Map<number, Set<Stream>>();
  /** Open streams per cap key (`t:` token, `a:` account, `o:` organization, `r:` reseller). */
  const counts = new Map<string, number>();
  /** Stream starts per account: a bucket of `startsPerMinute`, refilled over a minute. */
  const starts = new Map<number, { tokens: number; at: number }>();
  let listening: Promise<Listener> | undefined;
  let closing = false;
  /** Notification payloads not yet loaded, in the order they came. */
  const pending: string[] = [];
  let flushScheduled = false;
  let flushing = false;
  let heartbeat: NodeJS.Timeout | undefined;
  let recheck: NodeJS.Timeout | undefined;
  let watch: NodeJS.Timeout | undefined;
  let lastStamp = tokensChanged?.();
  let rechecking: Promise<void> | undefined;
  let recheckAgain = false;
  let nextRecheckAt = 0;

  // Event ids: this feed's own id and a sequence number, `<feed>-<seq>`. The recent events are kept
  // (replay) so that a stream that reconnects with Last-Event-ID resumes where it was.
  const feedId = crypto.randomBytes(4).toString('hex');
  let seq = 0;
  const replay: LiveEvent[] = [];
  let replayBytes = 0;
  /** The replay holds every event after this sequence number (older ones were dropped or missed). */
  let resumableAfter = 0;
  /** Until when changes are still followed with no stream open (a reconnect may resume). */
  let lingerUntil = 0;
  const eventId = (n: number) => `${feedId}-${n}`;

  function listen(): Promise<Listener> {
    listening ??= deps.listen(LIVE_CHANNEL, {
      onNotify: (payload) => {
        if (!payload) return;
        if (!following()) return void gap();
        pending.push(payload);
        scheduleFlush();
      },
      // Notifications sent while the connection was away are gone: every stream starts over.
      onReconnect: () => {
        gap();
        for (const s of streams) void resnapshot(s);
      },
      log: deps.log,
    }).catch((err: unknown) => {
      listening = undefined;
      throw err;
    });
    return listening;
  }

  function following(): boolean {
    return streams.size > 0 || clock() < lingerUntil;
  }

  /** Changes were missed: no stream can resume from before now. */
  function gap(): void {
    if (replay.length === 0 && resumableAfter === seq) return;
    replay.length = 0;
    replayBytes = 0;
    resumableAfter = ++seq;
  }

  function remember(e: LiveEvent): void {
    replay.push(e);
    replayBytes += e.json.length;
    const oldest = clock() - LIVE_REPLAY_MS;
    while (replay.length > 0 && (replay.length > LIVE_REPLAY_EVENTS || replayBytes > LIVE_REPLAY_BYTES || replay[0]!.at < oldest)) {
      const gone = replay.shift()!;
      replayBytes -= gone.json.length;
      resumableAfter = gone.seq;
    }
  }

  function send(s: Stream, e: LiveEvent): void {
    if (s.closed || !s.sink) return;
    s.sink.write(`id: ${eventId(e.seq)}\nevent: ${e.name}\ndata: ${e.json}\n\n`);
    overflowed(s);
  }

  /** A client that leaves too much unread is dropped rather than buffered for. */
  function overflowed(s: Stream): boolean {
    if (!s.sink || s.sink.buffered() <= maxBuffered) return false;
    drop(s);
    return true;
  }

  function drop(s: Stream): void {
    deps.log?.warn({ buffered: s.sink?.buffered(), tokenId: s.tokenId }, 'live stream dropped: its client does not read');
    const sink = s.sink;
    remove(s);
    sink?.destroy();
  }

  function remove(s: Stream): void {
    if (s.closed) return;
    s.closed = true;
    s.held = null;
    streams.delete(s);
    const set = byAccount.get(s.target.id);
    set?.delete(s);
    if (set?.size === 0) byAccount.delete(s.target.id);
    for (const key of s.caps) {
      const n = (counts.get(key) ?? 1) - 1;
      if (n > 0) counts.set(key, n);
      else counts.delete(key);
    }
    if (streams.size === 0) {
      clearInterval(heartbeat);
      clearInterval(recheck);
      clearInterval(watch);
      heartbeat = recheck = watch = undefined;
      lingerUntil = closing ? 0 : clock() + LINGER_MS;
    }
  }

  /** Ends a stream, telling its client why with a `closed` event (no id: a reconnect resumes from the last event). */
  function finish(s: Stream, message: string): void {
    if (s.closed) return;
    s.sink?.write(`event: closed\ndata: ${JSON.stringify({ message })}\n\n`);
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
        if (!following()) {
          gap();
          continue;
        }
        await deliver(batch);
      }
    } catch (err) {
      // What was lost is unknown: every stream starts over from a snapshot.
      deps.log?.warn({ err }, 'live feed could not load what changed; streams start over');
      gap();
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
    const at = clock();
    for (const p of order) {
      const id = p.slice(2);
      const conversation = p.startsWith('c:') ? c.get(id) : undefined;
      const message = p.startsWith('m:') ? m.get(id) : undefined;
      const event: LiveEvent | undefined = conversation
        ? { seq: ++seq, name: 'conversation', ladder: conversation, json: JSON.stringify(presentLiveConversation(conversation)), at }
        : message ? { seq: ++seq, name: 'message', ladder: message, json: JSON.stringify(messageEvent(message)), at } : undefined;
      if (!event) continue;
      remember(event);
      for (const s of audience(event.ladder)) {
        if (s.held) {
          s.held.push(event);
          if (s.held.length > MAX_HELD) drop(s);
        } else send(s, event);
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

  /** Writes `text`, then waits while the client has not taken it; false when the stream is gone meanwhile. */
  async function put(s: Stream, text: string): Promise<boolean> {
    if (s.closed || !s.sink) return false;
    if (!s.sink.write(text)) {
      const outcome = await within(s.sink.drained(), SNAPSHOT_DRAIN_MS, () => 'late' as const);
      if (outcome === 'late' && !s.closed) drop(s);
    }
    return !s.closed;
  }

  /**
   * The snapshot of what is in progress, then what was held back while it was read. Bounded: at
   * most LIVE_SNAPSHOT_CONVERSATIONS conversations, LIVE_SNAPSHOT_LINES lines of each and
   * `snapshotLines` in all, `snapshotBytes` of JSON; `truncated` says what was cut. Each
   * conversation's lines are read (one indexed statement each) and written in turn, waiting for
   * the client to take them: a snapshot never builds one large string, nor holds the whole of it.
   */
  async function snapshot(s: Stream, resumeFailed?: string): Promise<void> {
    // Events from here on are held for this stream: the snapshot stands at this point.
    const mark = seq;
    s.held ??= [];
    const rows = await liveRepo.open(db, s.target, LIVE_SNAPSHOT_CONVERSATIONS + 1);
    const cut: string[] = [];
    if (rows.length > LIVE_SNAPSHOT_CONVERSATIONS) {
      rows.length = LIVE_SNAPSHOT_CONVERSATIONS;
      cut.push(`only the newest ${LIVE_SNAPSHOT_CONVERSATIONS} conversations in progress`);
    }
    const each = Math.max(1, Math.min(LIVE_SNAPSHOT_LINES, Math.floor(snapshotLines / Math.max(1, rows.length))));
    if (!await put(s, `id: ${eventId(mark)}\nevent: snapshot\ndata: {"calls":[`)) return;
    let bytes = 0;
    let linesCut = false;
    let written = 0;
    for (const r of rows) {
      const lines = await liveRepo.lastLines(db, [r.id], each + 1);
      if (lines.length > each) {
        lines.splice(0, lines.length - each);
        linesCut = true;
      }
      const json = JSON.stringify({ ...presentLiveConversation(r), messages: lines.map(presentTranscriptLine) });
      if (bytes + json.length > snapshotBytes) {
        cut.push(`${rows.length - written} conversations left out past ${snapshotBytes} bytes`);
        break;
      }
      bytes += json.length;
      if (!await put(s, (written++ > 0 ? ',' : '') + json)) return;
    }
    if (linesCut) cut.push(`at most the last ${each} lines of each conversation`);
    let tail = ']';
    if (cut.length > 0) tail += `,"truncated":${JSON.stringify(`The snapshot was cut: ${cut.join('; ')}. Read a conversation whole with GET /api/v2/conversation/{roomId}/{uuid}.`)}`;
    if (resumeFailed) tail += `,"resumeFailed":${JSON.stringify(resumeFailed)}`;
    if (!await put(s, `${tail}}\n\n`)) return;
    flushHeld(s, mark);
  }

  /** Sends what was held back (events after `mark`), and from now on each event as it comes. */
  function flushHeld(s: Stream, mark: number): void {
    const held = s.held ?? [];
    s.held = null;
    for (const e of held) if (e.seq > mark) send(s, e);
  }

  async function resnapshot(s: Stream, resumeFailed?: string): Promise<void> {
    if (s.closed) return;
    try {
      await snapshot(s, resumeFailed);
    } catch (err) {
      deps.log?.warn({ err }, 'live stream snapshot failed; closing it');
      finish(s, 'The live feed lost track of changes; connect again');
    }
  }

  /** Whether a stream following `target` sees an event of this ladder. */
  function sees(target: AccountRow, l: LiveLadder): boolean {
    return [l.account_id, l.org_id, l.reseller_id, l.partner_id].includes(target.id);
  }

  /**
   * A reconnect with Last-Event-ID: the events since then replayed, when this feed still holds
   * all of them; else why not (and a snapshot is sent instead).
   */
  function resume(s: Stream, lastEventId: string): string | undefined {
    const m = /^([0-9a-f]{8})-(\d+)$/.exec(lastEventId);
    if (!m || m[1] !== feedId) {
      return 'Last-Event-ID names no event of this server (it restarted, or this is another process): this snapshot replaces what you held';
    }
    const after = Number(m[2]);
    if (after > seq || after < resumableAfter) {
      return 'The events since Last-Event-ID are no longer held (too far behind): this snapshot replaces what you held';
    }
    const missed = replay.filter((e) => e.seq > after && sees(s.target, e.ladder));
    s.sink!.write(`event: resumed\ndata: ${JSON.stringify({ lastEventId, replayed: missed.length })}\n\n`);
    for (const e of missed) send(s, e);
    flushHeld(s, seq);
    return undefined;
  }

  function tick(): void {
    for (const s of streams) {
      if (s.held || !s.sink) continue;
      s.sink.write(': ping\n\n');
      overflowed(s);
    }
  }

  /** Every few hundred ms: a token or account changed (here or in another process) checks every stream's token now; an expired token ends its streams. */
  function watchTokens(): void {
    const now = clock();
    for (const s of streams) if (s.expiresAt !== null && s.expiresAt <= now) finish(s, 'Unauthorized: token has expired');
    const stamp = tokensChanged?.();
    if (stamp === lastStamp || performance.now() < nextRecheckAt) return;
    lastStamp = stamp;
    void recheckAll();
  }

  /** Each token (and the account a stream names) checked again: a deleted or expired token, a suspended account, ends its streams. */
  async function recheckAll(): Promise<void> {
    if (rechecking) {
      recheckAgain = true;
      return rechecking;
    }
    const t0 = performance.now();
    rechecking = recheckOnce().finally(() => {
      rechecking = undefined;
      // A check that takes long (many tokens) is not run back to back: at most a quarter of the time goes to it.
      nextRecheckAt = performance.now() + 3 * (performance.now() - t0);
      if (recheckAgain) {
        recheckAgain = false;
        void recheckAll();
      }
    });
    return rechecking;
  }

  async function recheckOnce(): Promise<void> {
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

  /** The caps a stream of `scope` counts against, the first one full (if any) named in its 429. */
  function capsOf(scope: Scope): Cap[] {
    const actor = scope.actor;
    const caps: Cap[] = [
      { key: `t:${scope.token.id}`, max: deps.perToken, message: `A token may have at most ${deps.perToken} live feeds open at once (CALLPLANE_LIVE_STREAMS_PER_TOKEN); close one first` },
      { key: `a:${actor.id}`, max: perAccount, message: `The tokens of account ${actor.id} may have at most ${perAccount} live feeds open at once on this server (CALLPLANE_LIVE_STREAMS_PER_ACCOUNT); close one first` },
    ];
    const org = actor.kind === 'organization' ? actor.id : actor.org_id;
    if (org !== null) caps.push({ key: `o:${org}`, max: perOrganization, message: `Organization ${org} and the accounts below it may have at most ${perOrganization} live feeds open at once on this server (CALLPLANE_LIVE_STREAMS_PER_ORGANIZATION); close one first` });
    const reseller = actor.kind === 'reseller' ? actor.id : actor.reseller_id;
    if (reseller !== null) caps.push({ key: `r:${reseller}`, max: perReseller, message: `Reseller ${reseller} and the accounts below it may have at most ${perReseller} live feeds open at once on this server (CALLPLANE_LIVE_STREAMS_PER_RESELLER); close one first` });
    return caps;
  }

  /** Takes one stream start from the account's bucket, or throws 429 with when the next is allowed. */
  function takeStart(accountId: number): void {
    const now = clock();
    const perMs = startsPerMinute / 60_000;
    const b = starts.get(accountId) ?? { tokens: startsPerMinute, at: now };
    b.tokens = Math.min(startsPerMinute, b.tokens + Math.max(0, now - b.at) * perMs);
    b.at = now;
    if (b.tokens < 1) {
      throw new TooManyRequests(`The tokens of account ${accountId} may start at most ${startsPerMinute} live feeds a minute (CALLPLANE_LIVE_STARTS_PER_MINUTE); reconnect with Last-Event-ID after Retry-After`, (1 - b.tokens) / perMs);
    }
    b.tokens -= 1;
    starts.set(accountId, b);
    if (starts.size > 10_000) for (const [id, x] of starts) if (x.tokens + (now - x.at) * perMs >= startsPerMinute) starts.delete(id);
  }

  return {
    /** Streams open in this process. */
    get open(): number { return streams.size; },

    /**
     * Opens a stream for `scope` (the request's, with the token it was admitted with) on the
     * conversations below `targetAccountId` (default: the token's account). Refusals are thrown
     * before `connect` is called, so they are ordinary HTTP answers: 404/403 for the target, 429
     * past the caps or the account's rate of starts. Then `connect` starts the response (and
     * calls `gone` when the client goes away), and either the events since `lastEventId` are
     * replayed (a reconnect) or the snapshot is sent.
     */
    async start(scope: Scope, token: string, targetAccountId: number | undefined, connect: (gone: () => void) => LiveSink, lastEventId?: string): Promise<void> {
      const target = targetAccountId === undefined ? scope.actor : await scope.account(targetAccountId);
      if (closing) throw new HttpError(503, 'The server is shutting down; connect again shortly');
      const caps = capsOf(scope);
      for (const cap of caps) {
        if ((counts.get(cap.key) ?? 0) >= cap.max) throw new TooManyRequests(cap.message, 5000);
      }
      if (streams.size >= deps.maxStreams) {
        throw new TooManyRequests(`This server streams at most ${deps.maxStreams} live feeds at once (CALLPLANE_LIVE_STREAMS_MAX); try again later`, 5000);
      }
      takeStart(scope.actor.id);
      const found = await lookup.token(hashToken(token));
      await listen();
      const s: Stream = {
        tokenId: scope.token.id, token, scope, target, targetAccountId, caps: caps.map((c) => c.key),
        expiresAt: found?.token.expires_at ?? null, sink: undefined, held: [], closed: false,
      };
      streams.add(s);
      let set = byAccount.get(target.id);
      if (!set) byAccount.set(target.id, (set = new Set()));
      set.add(s);
      for (const key of s.caps) counts.set(key, (counts.get(key) ?? 0) + 1);
      heartbeat ??= setInterval(tick, heartbeatMs).unref();
      recheck ??= setInterval(() => void recheckAll(), recheckMs).unref();
      watch ??= setInterval(watchTokens, watchMs).unref();
      try {
        s.sink = connect(() => remove(s));
      } catch (err) {
        remove(s);
        throw err;
      }
      const failed = lastEventId ? resume(s, lastEventId) : undefined;
      if (lastEventId && failed === undefined) return;
      await resnapshot(s, failed);
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
