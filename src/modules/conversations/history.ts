// The history of conversations (the contract's Messaging and Logs reads): the inbox and the junk
// inbox (rooms), messages (recent, and one room's, which marks it read), transcripts (one
// conversation, or a batch), conversation logs (JSON pages, or a streamed CSV), and the
// organization's junk decision on a room. Who sees what: an organization's token (or a reseller's
// or partner's naming it with targetAccountId) its organization's rooms; an agent's token (or
// targetAccountId naming an agent) that agent's rooms only. Anything else is 404.
// docs/conversations.md, "History: rooms, messages, logs".
import { Readable } from 'node:stream';
import type { AccountRow, ConversationRow, Db, MessageRow, RoomRow } from '../../db/types.ts';
import type { Scope } from '../../http/auth.ts';
import { Invalid, NotFound } from '../../http/errors.ts';
import { accountRepo } from '../accounts/repository.ts';
import type { AgentService } from '../agents/service.ts';
import { DEFAULT_SETTINGS } from '../agents/settings.ts';
import { decideJunk } from './junk.ts';
import { CSV_BATCH, csvFilename, csvLine } from './logs-csv.ts';
import { LOG_FIELDS, type LogField, type LogValue, analysisView, counterpartName, dialogLine, presentConversationSummary, presentLatency, presentLog, presentRecentMessage, presentRoom, presentRoomMessage, presentTranscriptLine, roomKey, transcriptText } from './present.ts';
import { parseLogsQuery, parseRoomKey, type LogsQuery, type ParsedLogs } from './logs-query.ts';
import { analysisRepo, historyRepo, inboxRepo, latencyRepo, logRepo, messageRepo, type LogFilter, type LogRow, type RoomScope } from './repository.ts';

/** Rooms per page: default and most (pageSize); `pagination=false` answers all of them only up to the most. */
export const INBOX_DEFAULT_PAGE_SIZE = 20;
export const INBOX_MAX_PAGE_SIZE = 1000;
/** GET /messages/recent: how many messages by default and at most. */
export const RECENT_DEFAULT = 100;
export const RECENT_MAX = 500;
/** A recent message's callDialog/chatDialog: its conversation's first lines, each cut to this many characters. */
export const RECENT_DIALOG_LINES = 20;
export const RECENT_DIALOG_LINE_CHARS = 500;
/** GET /messages/{roomId}: the room's latest messages, at most this many. */
export const ROOM_MESSAGES_MAX = 1000;
/** Transcript lines of one conversation (GET /conversation/…) and of each item of a batch, at most. */
export const TRANSCRIPT_MAX = 5000;
export const BATCH_TRANSCRIPT_MAX = 1000;
export const BATCH_MAX_ITEMS = 200;
/** A log entry's `transcript`: its first messages, at most this many characters. */
export const LOG_TRANSCRIPT_MESSAGES = 200;
export const LOG_TRANSCRIPT_CHARS = 10_000;
/** With transcripts a JSON page holds at most this many entries, and a CSV batch this many. */
export const LOG_TRANSCRIPT_MAX_PAGE_SIZE = 1000;
export const CSV_TRANSCRIPT_BATCH = 200;
const TRANSCRIPTS_PER_STATEMENT = 200;

/**
 * Where a conversation's call recording is read from: the voice module's recording store, which
 * is above this one (src/modules/voice/recordings.ts), handed in by platform.ts.
 */
export interface RecordingFiles {
  open(orgId: number, conversationId: string): Promise<{ stream: NodeJS.ReadableStream; size: number } | null>;
}

export interface HistoryServiceDeps {
  db: Db;
  /** The agent's live configuration: the junk rules read its cnamAutoRejectRegex. */
  agents: Pick<AgentService, 'liveConfig'>;
  /** Call recordings (GET /api/v2/conversation/{roomId}/{uuid}/recording). */
  recordings: RecordingFiles;
  now?: () => number;
}

/** The organization a request reads and, for an agent, the agent it is limited to. */
interface Tenant {
  org: AccountRow;
  agent?: AccountRow;
  rooms: RoomScope;
}

export interface InboxQuery {
  targetAccountId?: number;
  pagination?: boolean;
  page?: number;
  pageSize?: number;
  unread?: boolean;
  /** Also the staging test chat's rooms (left out by default). */
  includeTest?: boolean;
}

export interface BatchItem { roomId: string; uuid: string }

/** A conversation uuid as the contract passes it: `{uuid}`, `{uuid}:{timestamp}` or `{uuid}:{open}:{close}`. */
export function conversationIdOf(raw: string): string {
  return raw.trim().split(':')[0];
}

export function historyService(deps: HistoryServiceDeps) {
  const { db, agents } = deps;
  const clock = deps.now ?? Date.now;

  async function tenant(scope: Scope, targetAccountId: number | undefined): Promise<Tenant> {
    const account = await scope.target(targetAccountId, ['organization', 'agent']);
    if (account.kind === 'organization') return { org: account, rooms: { orgId: account.id } };
    const org = await accountRepo.findById(db, account.org_id!);
    if (!org) throw new NotFound(`organization of account ${account.id} was not found`);
    return { org, agent: account, rooms: { orgId: org.id, accountId: account.id } };
  }

  /** The room a roomId names, within the tenant; 404 otherwise (another organization's or agent's, or none). */
  async function room(t: Tenant, raw: string): Promise<RoomRow> {
    const key = parseRoomKey(raw);
    const found = key ? await inboxRepo.find(db, t.rooms, key.accountId, key.id) : undefined;
    if (!found) throw new NotFound(`roomId ${raw} was not found`);
    return found;
  }

  /** The conversation a roomId and uuid name, within the tenant; 404 otherwise. */
  async function conversationIn(scope: Scope, targetAccountId: number | undefined, roomId: string, uuid: string) {
    const t = await tenant(scope, targetAccountId);
    const r = await room(t, roomId);
    const id = conversationIdOf(uuid);
    const [c] = id === '' ? [] : await historyRepo.conversations(db, t.org.id, [id]);
    if (!c || c.room_id !== r.id) throw new NotFound(`uuid ${uuid} was not found in room ${roomId}`);
    return c;
  }

  /** Agents' names by account id (the messages' fromUser/toUser). */
  async function agentNames(ids: Iterable<number>): Promise<Map<number, string>> {
    const names = new Map<number, string>();
    for (const id of new Set(ids)) names.set(id, (await accountRepo.findById(db, id))?.name ?? `account-${id}`);
    return names;
  }

  /** Transcript lines per conversation, at most `max` each; `truncated` holds those that had more. */
  async function transcripts(ids: readonly string[], max: number, tools: boolean) {
    const lines = new Map<string, MessageRow[]>();
    const truncated = new Set<string>();
    // A statement's rows are held at once: a few hundred conversations per statement.
    for (let i = 0; i < ids.length; i += TRANSCRIPTS_PER_STATEMENT) {
      for (const m of await historyRepo.transcripts(db, ids.slice(i, i + TRANSCRIPTS_PER_STATEMENT), max + 1, tools)) {
        if (m.n > max) {
          truncated.add(m.conversation_id);
          continue;
        }
        const list = lines.get(m.conversation_id) ?? [];
        list.push(m);
        lines.set(m.conversation_id, list);
      }
    }
    return { lines, truncated };
  }

  async function inbox(scope: Scope, q: InboxQuery, junk: boolean) {
    const t = await tenant(scope, q.targetAccountId);
    const filter = { junk: junk ? 1 as const : 0 as const, unread: q.unread, includeTest: q.includeTest };
    const total = await inboxRepo.count(db, t.rooms, filter);
    let pageSize = q.pageSize ?? INBOX_DEFAULT_PAGE_SIZE;
    let page = q.page ?? 0;
    if (q.pagination === false) {
      if (total > INBOX_MAX_PAGE_SIZE) {
        throw new Invalid(`pagination=false answers at most ${INBOX_MAX_PAGE_SIZE} rooms and this inbox has ${total}: pass pagination=true with page and pageSize`);
      }
      pageSize = Math.max(total, 1);
      page = 0;
    }
    const rows = total === 0 || page * pageSize >= total ? [] : await inboxRepo.page(db, t.rooms, filter, pageSize, page * pageSize);
    return { success: true as const, pageSize, pageNumber: page, totalRooms: total, rooms: rows.map(presentRoom) };
  }

  /**
   * Transcript lines with, on each spoken reply of the agent, its turn's `latency` (an extension:
   * docs/voice.md "Every turn's latency").
   */
  async function withLatency(conversationIds: readonly string[]) {
    const rows = new Map((await latencyRepo.ofConversations(db, conversationIds)).map((r) => [r.message_id, r]));
    return (m: MessageRow) => {
      const l = rows.get(m.id);
      return l ? { ...presentTranscriptLine(m), latency: presentLatency(l) } : presentTranscriptLine(m);
    };
  }

  /** The log entries of rows, with the fields asked for (and their transcripts when `transcript` is one). */
  async function logEntries(rows: readonly LogRow[], fields: readonly LogField[]): Promise<Record<string, LogValue>[]> {
    const withTranscript = fields.includes('transcript');
    const t = withTranscript ? await transcripts(rows.map((r) => r.id), LOG_TRANSCRIPT_MESSAGES, false) : undefined;
    return rows.map((r) => {
      const all: Record<string, LogValue> = presentLog(r);
      if (t) all.transcript = transcriptText(t.lines.get(r.id) ?? [], LOG_TRANSCRIPT_CHARS, t.truncated.has(r.id));
      return Object.fromEntries(fields.map((f) => [f, all[f] ?? null]));
    });
  }

  /**
   * The filter of a logs request: the tenant's organization, its agent (or the agentId filter's),
   * the window, the other filters; undefined when they cannot match anything.
   */
  async function logFilter(scope: Scope, t: Tenant, p: ParsedLogs): Promise<LogFilter | undefined> {
    let accountId = t.agent?.id;
    if (p.agentId !== undefined && p.agentId !== accountId) {
      const notFound = () => new NotFound(`agentId ${p.agentId} was not found`);
      // An agent's token sees only its own conversations; another agent of the same organization is not there for it.
      if (accountId !== undefined) throw notFound();
      let agent: AccountRow;
      try {
        agent = await scope.account(p.agentId, ['agent'], 'agentId');
      } catch (err) {
        if (err instanceof NotFound) throw notFound();
        throw err;
      }
      if (agent.org_id !== t.org.id) throw notFound();
      accountId = agent.id;
    }
    let roomId: number | undefined;
    if (p.room) {
      const r = await inboxRepo.find(db, t.rooms, p.room.accountId, p.room.id);
      if (!r) throw new NotFound(`roomId ${p.room.accountId}:${p.room.id} was not found`);
      // A room of another agent than the one agentId names: nothing matches.
      if (accountId !== undefined && r.account_id !== accountId) return undefined;
      roomId = r.id;
    }
    return { ...p.filter, orgId: t.org.id, accountId, roomId, from: p.from, to: p.to };
  }

  /** The CSV export as a stream: the first batch is already read (so an empty export is a 404 before anything is sent). */
  function csvStream(filter: LogFilter, p: ParsedLogs, first: LogRow[], firstSize: number, batchSize: number): Readable {
    const limit = p.paged ? p.pageSize : Infinity;
    async function* lines(): AsyncGenerator<string> {
      yield csvLine(p.fields);
      let batch = first;
      let requested = firstSize;
      let sent = 0;
      for (;;) {
        const entries = await logEntries(batch, p.fields);
        yield entries.map((e) => csvLine(p.fields.map((f) => e[f]))).join('');
        sent += batch.length;
        if (batch.length < requested) return;
        requested = Math.min(batchSize, limit - sent);
        if (requested <= 0) return;
        const last = batch[batch.length - 1];
        batch = await logRepo.page(db, filter, requested, { cursor: { startedAt: last.started_at, id: last.id } });
        if (batch.length === 0) return;
      }
    }
    return Readable.from(lines(), { objectMode: false });
  }

  return {
    /** GET /api/v2/conversations: the priority inbox, newest activity first. */
    inbox: (scope: Scope, q: InboxQuery) => inbox(scope, q, false),
    /** GET /api/v2/junkConversations: the junk inbox, newest activity first, with each room's junkReason. */
    junkInbox: (scope: Scope, q: InboxQuery) => inbox(scope, q, true),

    /**
     * POST /api/v2/conversations/{roomId}/junk: the organization's decision (true junk, false not
     * junk), or null to return the room to the rules (decided again now, with the agent's live
     * configuration and the channel of the room's latest conversation).
     */
    async setJunk(scope: Scope, targetAccountId: number | undefined, roomId: string, junk: unknown) {
      if (junk !== true && junk !== false && junk !== null) throw new Invalid('junk must be true, false or null');
      const t = await tenant(scope, targetAccountId);
      const r = await room(t, roomId);
      const override = junk === null ? null : junk ? 1 : 0;
      let config = DEFAULT_SETTINGS;
      let channel: ConversationRow['channel'] = 'api';
      if (override === null) {
        const agent = await accountRepo.findById(db, r.account_id);
        if (agent) config = await agents.liveConfig(agent);
        channel = (await inboxRepo.lastChannel(db, r.id)) ?? 'api';
      }
      const decision = decideJunk({ counterpart: r.counterpart, displayName: r.display_name, channel, override }, config);
      await inboxRepo.setJunkDecision(db, r.id, { junk: decision.junk, junk_reason: decision.reason, junk_override: override }, clock());
      const updated = { ...r, junk: decision.junk, junk_reason: decision.reason, junk_override: override };
      const message = junk === null ? `Room ${roomKey(r)} is decided by the junk rules: ${decision.junk ? `junk (${decision.reason})` : 'not junk'}`
        : `Room ${roomKey(r)} marked as ${junk ? 'junk' : 'not junk'}`;
      return { success: true as const, message, room: presentRoom(updated) };
    },

    /** GET /api/v2/messages/recent: the latest messages across the tenant's rooms (junk included), newest first. */
    async recentMessages(scope: Scope, q: { targetAccountId?: number; limit?: number }) {
      const t = await tenant(scope, q.targetAccountId);
      const rows = await historyRepo.recent(db, t.rooms, q.limit ?? RECENT_DEFAULT);
      const names = await agentNames(rows.map((m) => m.account_id));
      // The dialogs: one statement for every conversation of the list, each its first lines.
      const { lines } = await transcripts([...new Set(rows.map((m) => m.conversation_id))], RECENT_DIALOG_LINES, false);
      const dialogs = new Map([...lines].map(([id, ls]) => [id, ls.map((l) => dialogLine(l, RECENT_DIALOG_LINE_CHARS))]));
      return rows.map((m) => presentRecentMessage(m, { ...m, id: m.room_id }, names.get(m.account_id)!, m, dialogs.get(m.conversation_id) ?? []));
    },

    /** GET /api/v2/messages/{roomId}: the room's latest messages, oldest first; marks the room read up to the last one shown. */
    async roomMessages(scope: Scope, q: { targetAccountId?: number; limit?: number }, roomId: string) {
      const t = await tenant(scope, q.targetAccountId);
      const r = await room(t, roomId);
      const rows = await messageRepo.spokenInRoom(db, r.id, q.limit ?? ROOM_MESSAGES_MAX);
      const agentName = (await agentNames([r.account_id])).get(r.account_id)!;
      const first = await inboxRepo.firstDirection(db, r.id);
      const initiator = first === undefined ? undefined : first === 'inbound' ? counterpartName(r) : agentName;
      const seenAt = Math.max(r.last_message_at, ...rows.map((m) => m.at));
      await inboxRepo.markRead(db, r.id, seenAt);
      return rows.map((m) => presentRoomMessage(m, r, agentName, initiator));
    },

    /** GET /api/v2/conversation/{roomId}/{uuid}: one conversation's transcript (tool calls included), as the contract's one-item array. */
    async conversation(scope: Scope, targetAccountId: number | undefined, roomId: string, uuid: string) {
      const c = await conversationIn(scope, targetAccountId, roomId, uuid);
      const [{ lines, truncated }, analysis, line] = await Promise.all([transcripts([c.id], TRANSCRIPT_MAX, true), analysisRepo.find(db, c.id), withLatency([c.id])]);
      return [{
        success: true as const, message: 'Success', ...presentConversationSummary(c, analysisView(analysis)), truncated: truncated.has(c.id),
        conversation: (lines.get(c.id) ?? []).map(line),
      }];
    },

    /**
     * GET /api/v2/conversation/{roomId}/{uuid}/recording: the call's recording (a stereo WAV),
     * on the same tenancy as the transcript; 404 when the conversation has none.
     */
    async recording(scope: Scope, targetAccountId: number | undefined, roomId: string, uuid: string) {
      const c = await conversationIn(scope, targetAccountId, roomId, uuid);
      const file = await deps.recordings.open(c.org_id, c.id);
      if (!file) throw new NotFound(`conversation ${c.id} has no recording`);
      return { ...file, filename: `${c.id}.wav` };
    },

    /**
     * POST /api/v2/conversation/batch: up to 200 transcripts at once. A pair that names no
     * conversation of the tenant (unknown, another organization's, a uuid of another room) is a
     * failed item; the batch itself succeeds.
     */
    async batch(scope: Scope, targetAccountId: number | undefined, items: readonly BatchItem[]) {
      if (items.length === 0) throw new Invalid('items must have at least 1 item');
      if (items.length > BATCH_MAX_ITEMS) throw new Invalid(`items must have at most ${BATCH_MAX_ITEMS} items`);
      const t = await tenant(scope, targetAccountId);
      const keys = items.map((i) => parseRoomKey(i.roomId));
      const rooms = new Map((await inboxRepo.byIds(db, t.org.id, keys.flatMap((k) => (k ? [k.id] : []))))
        .filter((r) => t.rooms.accountId === undefined || r.account_id === t.rooms.accountId).map((r) => [r.id, r]));
      const ids = items.map((i) => conversationIdOf(i.uuid));
      const conversations = new Map((await historyRepo.conversations(db, t.org.id, [...new Set(ids.filter(Boolean))])).map((c) => [c.id, c]));
      const found = items.map((item, i) => {
        const key = keys[i];
        const r = key ? rooms.get(key.id) : undefined;
        if (!key || !r || r.account_id !== key.accountId) return { item, error: `roomId ${item.roomId} was not found` };
        const c = conversations.get(ids[i]);
        if (!c || c.room_id !== r.id) return { item, error: `uuid ${item.uuid} was not found in room ${item.roomId}` };
        return { item, conversation: c };
      });
      const foundIds = [...new Set(found.flatMap((f) => (f.conversation ? [f.conversation.id] : [])))];
      const [{ lines, truncated }, analyses, line] = await Promise.all([
        transcripts(foundIds, BATCH_TRANSCRIPT_MAX, true),
        analysisRepo.byIds(db, foundIds).then((rows) => new Map(rows.map((a) => [a.id, a]))),
        withLatency(foundIds),
      ]);
      const results = found.map((f) => (f.conversation
        ? {
          // The pair as it was sent (uuid perhaps with its :timestamp suffixes), then the conversation's own uuid.
          ...presentConversationSummary(f.conversation, analysisView(analyses.get(f.conversation.id))), conversationUuid: f.conversation.id,
          success: true, roomId: f.item.roomId, uuid: f.item.uuid, message: 'Success',
          truncated: truncated.has(f.conversation.id), conversation: (lines.get(f.conversation.id) ?? []).map(line),
        }
        : { success: false, roomId: f.item.roomId, uuid: f.item.uuid, message: f.error! }));
      const ok = results.filter((r) => r.success).length;
      return {
        success: true as const,
        message: ok === items.length ? 'Success' : `${items.length - ok} of ${items.length} conversations were not found`,
        stats: { requested: items.length, ok, failed: items.length - ok },
        results,
      };
    },

    /**
     * GET /api/v2/logs: one entry per conversation that started in [start, end], newest first.
     * JSON: a numbered page with counts; CSV: a stream of every matching row (or of the page asked
     * for), read in batches with a keyset cursor.
     */
    async logs(scope: Scope, q: LogsQuery, keys: readonly string[]): Promise<
      { kind: 'json'; body: Record<string, unknown> } | { kind: 'csv'; filename: string; stream: Readable }
    > {
      const p = parseLogsQuery(q, keys, clock());
      const t = await tenant(scope, q.targetAccountId);
      const checked = await logFilter(scope, t, p);
      const filter = p.matchesNothing ? undefined : checked;
      const offset = (p.page - 1) * p.pageSize;
      const withTranscript = p.fields.includes('transcript');
      if (p.format === 'csv') {
        const batchSize = withTranscript ? CSV_TRANSCRIPT_BATCH : CSV_BATCH;
        const size = Math.min(batchSize, p.paged ? p.pageSize : batchSize);
        const first = filter ? await logRepo.page(db, filter, size, { offset: p.paged ? offset : 0 }) : [];
        if (!filter || first.length === 0) throw new NotFound('No logs found for CSV export');
        return { kind: 'csv', filename: csvFilename(t.org.id, p.start, p.end), stream: csvStream(filter, p, first, size, batchSize) };
      }
      if (withTranscript && p.pageSize > LOG_TRANSCRIPT_MAX_PAGE_SIZE) {
        throw new Invalid(`pageSize must be at most ${LOG_TRANSCRIPT_MAX_PAGE_SIZE} when fields includes transcript`);
      }
      const total = filter ? await logRepo.count(db, filter) : 0;
      const rows = !filter || total === 0 || offset >= total ? [] : await logRepo.page(db, filter, p.pageSize, { offset });
      const totalPages = Math.ceil(total / p.pageSize);
      return {
        kind: 'json',
        body: {
          success: true, message: 'Success',
          logs: await logEntries(rows, p.fields),
          count: rows.length, totalCount: total,
          pagination: { page: p.page, pageSize: p.pageSize, totalPages, totalCount: total, hasMore: offset + rows.length < total, pageCount: totalPages },
          ...(p.includeFields ? { schema: [...LOG_FIELDS] } : {}),
        },
      };
    },
  };
}

export type HistoryService = ReturnType<typeof historyService>;
