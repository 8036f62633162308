// Queries on the conversation tables: conversation_rooms (an agent and one counterpart),
// conversations (one call or messaging session), conversation_messages (the transcript),
// conversation_turns (the queue's own columns are src/queue/engine.ts's), automation_requests,
// tool_effects and turn_latencies.
import { sql } from 'kysely';
import { redactsPersonalData } from '../compliance/service.ts';
import { redactData, redactPersonalData } from '../compliance/redact.ts';
import { notify } from '../../db/index.ts';
import { ENDED_ROWS } from '../../queue/engine.ts';
import { engineOf } from '../../db/fulltext.ts';
import type {
  AccountRow, AnalysisRow, AnsweredBy, AutomationRequestRow, ConversationOutcome, ConversationRow, Db, Executor, MessageRow, RoomRow, ToolEffectRow, TurnLatencyRow, TurnRow,
} from '../../db/types.ts';

type NewRoom = Pick<RoomRow, 'org_id' | 'account_id' | 'counterpart' | 'counterpart_kind' | 'display_name' | 'junk' | 'junk_reason'>;
type NewConversation = Omit<ConversationRow, 'messages_in' | 'messages_out' | 'model_calls' | 'tokens_in' | 'tokens_out' | 'ended_at' | 'outcome' | 'outcome_detail' | 'duration_ms' | 'caller_verified'
  | 'answered_by' | 'answered_by_at' | 'voicemail_recording'>
  & Partial<Pick<ConversationRow, 'caller_verified'>>;

/** An ancestor's column on the organizations' rows (`o.` joined). */
const ANCESTOR_COLUMN_OF = {
  partner: 'o.partner_id', reseller: 'o.reseller_id', organization: 'o.org_id', agent: 'o.id',
} as const;

/**
 * The channel the live feed listens on (live.ts): `c:<conversation id>` when a conversation opened
 * or changed (who answered, its end), `m:<message id>` when a line was stored or its status or
 * text changed. Sent in the writing transaction: PostgreSQL delivers it, to every process, once
 * the rows are visible; SQLite to this process's own listeners (src/db/index.ts).
 */
export const LIVE_CHANNEL = 'callplane_live';
const liveChange = (ex: Executor, kind: 'c' | 'm', id: string) => notify(ex, LIVE_CHANNEL, `${kind}:${id}`);

export const roomRepo = {
  async find(db: Executor, id: number): Promise<RoomRow | undefined> {
    return db.selectFrom('conversation_rooms').selectAll().where('id', '=', id).executeTakeFirst();
  },
  async byCounterpart(db: Executor, accountId: number, counterpart: string): Promise<RoomRow | undefined> {
    return db.selectFrom('conversation_rooms').selectAll()
      .where('account_id', '=', accountId).where('counterpart', '=', counterpart).executeTakeFirst();
  },
  /** The agent's room with this counterpart, created when there is none (race-free: the unique index decides). */
  async findOrCreate(db: Executor, room: NewRoom, now: number): Promise<RoomRow> {
    await db.insertInto('conversation_rooms')
      .values({ ...room, last_message: null, last_message_at: now, unread: 0, junk_override: null, created_at: now, updated_at: now })
      .onConflict((oc) => oc.columns(['account_id', 'counterpart']).doNothing())
      .execute();
    const row = await roomRepo.byCounterpart(db, room.account_id, room.counterpart);
    if (!row) throw new Error(`room of account ${room.account_id} with ${room.counterpart} vanished`);
    return row;
  },
  /** A message arrived or left: the room's last message, its time, and (inbound) one more unread. */
  async touch(db: Executor, id: number, text: string, at: number, inbound: boolean): Promise<void> {
    await db.updateTable('conversation_rooms')
      .set((eb) => ({
        last_message: text,
        last_message_at: sql<number>`case when ${eb.ref('last_message_at')} > ${at} then ${eb.ref('last_message_at')} else ${at} end`,
        unread: inbound ? eb(eb.ref('unread'), '+', 1) : eb.ref('unread'),
        updated_at: at,
      }))
      .where('id', '=', id).execute();
  },
  async setJunk(db: Executor, id: number, junk: 0 | 1, reason: string | null, now: number): Promise<void> {
    await db.updateTable('conversation_rooms').set({ junk, junk_reason: reason, updated_at: now }).where('id', '=', id).execute();
  },
};

export const conversationRepo = {
  /** The latest conversation a task's call or text held, begun at or after `since` (ms): its attempt's (conversations_task). */
  /** The latest conversation of a task since `since`: its id and its room's contract id (`<agent>:<room>`). */
  async latestOfTask(db: Executor, taskId: string, since: number): Promise<{ id: string; roomId: string } | null> {
    const row = await db.selectFrom('conversations').select(['id', 'account_id', 'room_id']).where('task_id', '=', taskId).where('started_at', '>=', since)
      .orderBy('started_at', 'desc').limit(1).executeTakeFirst();
    return row ? { id: row.id, roomId: `${row.account_id}:${row.room_id}` } : null;
  },
  async find(db: Executor, id: string): Promise<ConversationRow | undefined> {
    return db.selectFrom('conversations').selectAll().where('id', '=', id).executeTakeFirst();
  },
  /** Which of these conversations still exist (the recordings sweep: a recording whose conversation is gone goes too). */
  async existingIds(db: Executor, orgId: number, ids: readonly string[]): Promise<Set<string>> {
    if (ids.length === 0) return new Set();
    const rows = await db.selectFrom('conversations').select('id').where('org_id', '=', orgId).where('id', 'in', [...ids]).execute();
    return new Set(rows.map((r) => r.id));
  },
  /** The room's open conversation on a channel with activity since `since` (a message session continues). */
  async openInRoom(db: Executor, roomId: number, channel: string, since: number): Promise<ConversationRow | undefined> {
    return db.selectFrom('conversations').selectAll()
      .where('room_id', '=', roomId).where('channel', '=', channel as ConversationRow['channel'])
      .where('ended_at', 'is', null).where('last_activity_at', '>=', since)
      .orderBy('started_at', 'desc').limit(1).executeTakeFirst();
  },
  /** The room's latest conversation on a channel, open or ended. */
  async latestInRoom(db: Executor, roomId: number, channel: ConversationRow['channel']): Promise<ConversationRow | undefined> {
    return db.selectFrom('conversations').selectAll()
      .where('room_id', '=', roomId).where('channel', '=', channel)
      .orderBy('started_at', 'desc').limit(1).executeTakeFirst();
  },
  /**
   * The organization's most recently active open conversation on a channel with this counterpart
   * (any agent), active since `since`: whose session an inbound text continues.
   */
  async openWithCounterpart(db: Executor, orgId: number, channel: string, counterpart: string, since: number): Promise<ConversationRow | undefined> {
    return db.selectFrom('conversations').selectAll()
      .where('org_id', '=', orgId).where('channel', '=', channel as ConversationRow['channel']).where('counterpart', '=', counterpart)
      .where('ended_at', 'is', null).where('last_activity_at', '>=', since)
      .orderBy('last_activity_at', 'desc').limit(1).executeTakeFirst();
  },
  /** The conversations a task's call opened, newest first (a SIMULATED call's attempts). */
  async ofTask(db: Executor, orgId: number, taskId: string): Promise<ConversationRow[]> {
    return db.selectFrom('conversations').selectAll()
      .where('org_id', '=', orgId).where('task_id', '=', taskId)
      .orderBy('started_at', 'desc').limit(10).execute();
  },
  async byCarrierRef(db: Executor, orgId: number, carrierRef: string): Promise<ConversationRow | undefined> {
    return db.selectFrom('conversations').selectAll()
      .where('carrier_ref', '=', carrierRef).where('org_id', '=', orgId).executeTakeFirst();
  },
  async insert(db: Executor, row: NewConversation): Promise<ConversationRow> {
    const inserted = await db.insertInto('conversations').values(row).returningAll().executeTakeFirstOrThrow();
    await liveChange(db, 'c', inserted.id);
    return inserted;
  },
  /** Adds a message's or a model call's counts and moves the last activity. */
  async count(db: Executor, id: string, at: number, add: { in?: number; out?: number; calls?: number; tokensIn?: number; tokensOut?: number }): Promise<void> {
    await db.updateTable('conversations')
      .set((eb) => ({
        messages_in: eb(eb.ref('messages_in'), '+', add.in ?? 0),
        messages_out: eb(eb.ref('messages_out'), '+', add.out ?? 0),
        model_calls: eb(eb.ref('model_calls'), '+', add.calls ?? 0),
        tokens_in: eb(eb.ref('tokens_in'), '+', add.tokensIn ?? 0),
        tokens_out: eb(eb.ref('tokens_out'), '+', add.tokensOut ?? 0),
        last_activity_at: sql<number>`case when ${eb.ref('last_activity_at')} > ${at} then ${eb.ref('last_activity_at')} else ${at} end`,
        updated_at: at,
      }))
      .where('id', '=', id).execute();
  },
  async setState(db: Executor, id: string, state: string, now: number): Promise<void> {
    await db.updateTable('conversations').set({ state, updated_at: now }).where('id', '=', id).execute();
  },
  async setEngine(db: Executor, id: string, v: Pick<ConversationRow, 'engine' | 'provider' | 'model'>, now: number): Promise<void> {
    await db.updateTable('conversations').set({ ...v, updated_at: now }).where('id', '=', id).execute();
  },
  /** Who answered the call, once: false when it was already decided (the first verdict stands). */
  async setAnsweredBy(db: Executor, id: string, answeredBy: AnsweredBy, at: number): Promise<boolean> {
    const r = await db.updateTable('conversations').set({ answered_by: answeredBy, answered_by_at: at, updated_at: at })
      .where('id', '=', id).where('answered_by', 'is', null).executeTakeFirst();
    const changed = Number(r.numUpdatedRows) > 0;
    if (changed) await liveChange(db, 'c', id);
    return changed;
  },
  /** The recording holding the message left on a machine (its API path). */
  async setVoicemailRecording(db: Executor, id: string, path: string, now: number): Promise<void> {
    await db.updateTable('conversations').set({ voicemail_recording: path, updated_at: now }).where('id', '=', id).execute();
    await liveChange(db, 'c', id);
  },
  /** Ends an open conversation; false when it had already ended (the first outcome stands). */
  async end(db: Executor, id: string, outcome: ConversationOutcome, detail: string | null, now: number): Promise<boolean> {
    const r = await db.updateTable('conversations')
      .set((eb) => ({
        outcome, outcome_detail: detail, ended_at: now, updated_at: now,
        duration_ms: eb(sql<number>`${now}`, '-', eb.ref('started_at')),
      }))
      .where('id', '=', id).where('ended_at', 'is', null).executeTakeFirst();
    const ended = Number(r.numUpdatedRows) > 0;
    if (ended) await liveChange(db, 'c', id);
    return ended;
  },
  /** Open message sessions idle since before `before` (closed by maintenance), oldest first. */
  async idle(db: Executor, before: number, channels: readonly string[], limit: number): Promise<ConversationRow[]> {
    return db.selectFrom('conversations').selectAll()
      .where('ended_at', 'is', null).where('last_activity_at', '<', before)
      .where('channel', 'in', channels as ConversationRow['channel'][])
      .orderBy('last_activity_at').limit(limit).execute();
  },
};

export const messageRepo = {
  /**
   * The one place a message is stored: with the organization's redaction on, its text and data
   * have their personal data replaced by placeholders first (compliance/redact.ts), so every
   * reader sees them redacted. Answers the text as stored.
   */
  async insert(db: Executor, row: Omit<MessageRow, 'attachments'> & { attachments?: string }): Promise<string> {
    const stored = await redactsPersonalData(db, row.org_id) ? { ...row, text: redactPersonalData(row.text), data: redactData(row.data) } : row;
    await db.insertInto('conversation_messages').values(stored).execute();
    await liveChange(db, 'm', row.id);
    return stored.text;
  },
  async find(db: Executor, id: string): Promise<MessageRow | undefined> {
    return db.selectFrom('conversation_messages').selectAll().where('id', '=', id).executeTakeFirst();
  },
  /** An agent's reply cut short by the caller: only what was heard stays (status `interrupted`). */
  async interrupt(db: Executor, orgId: number, id: string, heard: string): Promise<void> {
    const text = await redactsPersonalData(db, orgId) ? redactPersonalData(heard) : heard;
    await db.updateTable('conversation_messages').set({ text, status: 'interrupted' }).where('id', '=', id).where('org_id', '=', orgId).execute();
    await liveChange(db, 'm', id);
  },
  async setStatus(db: Executor, id: string, status: MessageRow['status']): Promise<void> {
    await db.updateTable('conversation_messages').set({ status }).where('id', '=', id).execute();
    await liveChange(db, 'm', id);
  },
  /** A conversation's transcript, oldest first. */
  async ofConversation(db: Executor, conversationId: string): Promise<MessageRow[]> {
    return db.selectFrom('conversation_messages').selectAll()
      .where('conversation_id', '=', conversationId).orderBy('at').orderBy('id').execute();
  },
  /** The room's last `limit` messages before `before` (ms), oldest first: the history a turn sends the model. */
  async recentInRoom(db: Executor, roomId: number, before: number, limit: number): Promise<MessageRow[]> {
    const rows = await db.selectFrom('conversation_messages').selectAll()
      .where('room_id', '=', roomId).where('at', '<', before)
      .orderBy('at', 'desc').orderBy('id', 'desc').limit(limit).execute();
    return rows.reverse();
  },
  /**
   * The room's last `limit` messages said by the person or the agent (no tool records), oldest
   * first; within one millisecond what the person said comes before the answer.
   */
  async spokenInRoom(db: Executor, roomId: number, limit: number): Promise<MessageRow[]> {
    const rows = await db.selectFrom('conversation_messages').selectAll()
      .where('room_id', '=', roomId).where('direction', 'in', ['inbound', 'outbound'])
      .orderBy('at', 'desc').orderBy('direction', 'desc').orderBy('id', 'desc').limit(limit).execute();
    return rows.reverse();
  },
};

export const turnRepo = {
  async insert(db: Executor, row: Pick<TurnRow, 'id' | 'org_id' | 'conversation_id' | 'message_id' | 'reply_to' | 'run_at' | 'created_at' | 'updated_at'>): Promise<void> {
    await db.insertInto('conversation_turns').values({ ...row, state: 'pending', attempt: 0, resume: null, lease_owner: null, lease_expires_at: null, last_error: null, finished_at: null }).execute();
  },
  async find(db: Executor, id: string): Promise<TurnRow | undefined> {
    return db.selectFrom('conversation_turns').selectAll().where('id', '=', id).executeTakeFirst();
  },
  async setResume(db: Executor, id: string, resume: string | null, now: number): Promise<void> {
    await db.updateTable('conversation_turns').set({ resume, updated_at: now }).where('id', '=', id).execute();
  },
  /**
   * Turns that ended before `before`, through the partial index conversation_turns_ended (migration
   * 0021-retention-indexes).
   */
  endedBefore(db: Executor, before: number, limit: number) {
    return db.selectFrom('conversation_turns').select('id')
      .where(ENDED_ROWS).where('finished_at', '<', before).limit(limit);
  },
  /** Deletes turns that ended before `before` (the conversation and its messages stay); how many. */
  async pruneEnded(db: Db, before: number, batch = 1000): Promise<number> {
    return db.transaction().execute(async (tx) => {
      const rows = await turnRepo.endedBefore(tx, before, batch).execute();
      if (rows.length === 0) return 0;
      await tx.deleteFrom('conversation_turns').where('id', 'in', rows.map((r) => r.id)).execute();
      return rows.length;
    });
  },
  /** A waiting turn is due now (its automation request was answered). */
  async wake(db: Executor, id: string, now: number): Promise<void> {
    await db.updateTable('conversation_turns').set({ run_at: now, updated_at: now })
      .where('id', '=', id).where('state', '=', 'pending').execute();
  },
};

/** A conversation's analysis as the reads show it (null columns: none was queued, it ended before analyses existed). */
export interface AnalysisView {
  analysis_state: AnalysisRow['state'] | null;
  analysis_engine: AnalysisRow['engine'];
  analysis_answer: string | null;
  analysis_error: string | null;
}

export const analysisRepo = {
  /** Queues the analysis of a conversation that just ended (once: the conversation's id is the key). */
  async queue(db: Executor, conversationId: string, orgId: number, now: number, skipped?: string): Promise<boolean> {
    // Skipped (the agent's postCallAnalysis): recorded as settled, never claimed, the reason kept.
    const r = await db.insertInto('conversation_analyses')
      .values({ id: conversationId, org_id: orgId, run_at: now, created_at: now, updated_at: now,
        ...(skipped ? { state: 'canceled' as const, last_error: skipped, finished_at: now } : {}) })
      .onConflict((oc) => oc.column('id').doNothing()).executeTakeFirst();
    return Number(r.numInsertedOrUpdatedRows ?? 0) > 0;
  },
  /**
   * The analyses finished in [fromMs, toMs) of the organizations below `within` (the accounts'
   * ancestor column), counted by organization and outcome (the answer's JSON `outcome`): one
   * grouped query, read through conversation_analyses_org_finished (migration 0042).
   */
  async outcomeCounts(db: Executor, within: Pick<AccountRow, 'id' | 'kind'>, fromMs: number, toMs: number): Promise<{ org_id: number; outcome: string | null; n: number }[]> {
    const outcome = engineOf(db) === 'postgres' ? sql<string | null>`(a.answer::json ->> 'outcome')` : sql<string | null>`json_extract(a.answer, '$.outcome')`;
    const rows = await db.selectFrom('conversation_analyses as a').innerJoin('accounts as o', 'o.id', 'a.org_id')
      .select(['a.org_id', outcome.as('outcome'), (eb) => eb.fn.countAll<number | string>().as('n')])
      .where(ANCESTOR_COLUMN_OF[within.kind], '=', within.id)
      .where('a.state', '=', 'finished').where('a.answer', 'is not', null)
      .where('a.finished_at', '>=', fromMs).where('a.finished_at', '<', toMs)
      .groupBy(['a.org_id', outcome])
      .execute();
    return rows.map((r) => ({ org_id: Number(r.org_id), outcome: r.outcome, n: Number(r.n) }));
  },
  async find(db: Executor, id: string): Promise<AnalysisRow | undefined> {
    return db.selectFrom('conversation_analyses').selectAll().where('id', '=', id).executeTakeFirst();
  },
  async byIds(db: Executor, ids: readonly string[]): Promise<AnalysisRow[]> {
    if (ids.length === 0) return [];
    return db.selectFrom('conversation_analyses').selectAll().where('id', 'in', [...ids]).execute();
  },
  /** The validated answer, recorded before anything is done with it (a retry reuses it). */
  async saveAnswer(db: Executor, id: string, v: Pick<AnalysisRow, 'engine' | 'provider' | 'model' | 'answer'>, now: number): Promise<void> {
    await db.updateTable('conversation_analyses').set({ ...v, updated_at: now }).where('id', '=', id).execute();
  },
  /** One model request's usage, and whether its answer failed the check. */
  async counted(db: Executor, id: string, add: { tokensIn: number; tokensOut: number; invalid: boolean }, now: number): Promise<void> {
    await db.updateTable('conversation_analyses')
      .set((eb) => ({
        model_calls: eb(eb.ref('model_calls'), '+', 1),
        tokens_in: eb(eb.ref('tokens_in'), '+', add.tokensIn),
        tokens_out: eb(eb.ref('tokens_out'), '+', add.tokensOut),
        invalid_answers: eb(eb.ref('invalid_answers'), '+', add.invalid ? 1 : 0),
        updated_at: now,
      }))
      .where('id', '=', id).execute();
  },
};

export const automationRepo = {
  async insert(db: Executor, row: AutomationRequestRow): Promise<void> {
    await db.insertInto('automation_requests').values(row).execute();
  },
  async find(db: Executor, id: string): Promise<AutomationRequestRow | undefined> {
    return db.selectFrom('automation_requests').selectAll().where('id', '=', id).executeTakeFirst();
  },
  /** Records the answer; false when it was no longer waiting (answered or expired). */
  async answer(db: Executor, id: string, response: string, now: number): Promise<boolean> {
    const r = await db.updateTable('automation_requests').set({ state: 'answered', response, answered_at: now })
      .where('id', '=', id).where('state', '=', 'waiting').executeTakeFirst();
    return Number(r.numUpdatedRows) > 0;
  },
  async expire(db: Executor, id: string): Promise<boolean> {
    const r = await db.updateTable('automation_requests').set({ state: 'expired' })
      .where('id', '=', id).where('state', '=', 'waiting').executeTakeFirst();
    return Number(r.numUpdatedRows) > 0;
  },
};

export const toolEffectRepo = {
  async find(db: Executor, turnKey: string, callKey: string): Promise<ToolEffectRow | undefined> {
    return db.selectFrom('tool_effects').selectAll().where('turn_key', '=', turnKey).where('call_key', '=', callKey).executeTakeFirst();
  },
  /**
   * Locks the conversation's row until the transaction ends (PostgreSQL; SQLite runs one write
   * transaction at a time): two turns of one conversation count and record its texts one after the other.
   */
  async lockConversation(tx: Executor, conversationId: string): Promise<void> {
    await tx.selectFrom('conversations').select('id').where('id', '=', conversationId).forUpdate().execute();
  },
  /** The conversation's recorded calls of these tools that were not refused or mocked (started or done). */
  async countOf(db: Executor, conversationId: string, tools: readonly string[]): Promise<number> {
    const r = await db.selectFrom('tool_effects').select((eb) => eb.fn.countAll<number>().as('n'))
      .where('conversation_id', '=', conversationId).where('tool', 'in', [...tools]).where('state', 'not in', ['refused', 'mocked'])
      .executeTakeFirstOrThrow();
    return Number(r.n);
  },
  /** Records that a call's effect is starting; false when the call was recorded already. */
  async start(db: Executor, row: Omit<ToolEffectRow, 'state' | 'outcome' | 'updated_at'>): Promise<boolean> {
    const r = await db.insertInto('tool_effects').values({ ...row, state: 'started', outcome: null, updated_at: row.created_at })
      .onConflict((oc) => oc.columns(['turn_key', 'call_key']).doNothing()).executeTakeFirst();
    return Number(r.numInsertedOrUpdatedRows ?? 0) > 0;
  },
  /** Records an agent test's call, answered by its mock (or that it had none): nothing was done, and no cap counts it. */
  async mocked(db: Executor, row: Omit<ToolEffectRow, 'state' | 'updated_at'>): Promise<void> {
    await db.insertInto('tool_effects').values({ ...row, state: 'mocked', updated_at: row.created_at })
      .onConflict((oc) => oc.columns(['turn_key', 'call_key']).doNothing()).execute();
  },
  /** Records what the call answered (`refused`: it did nothing, and no cap counts it). */
  async finish(db: Executor, turnKey: string, callKey: string, state: 'done' | 'refused', outcome: string, now: number): Promise<void> {
    await db.updateTable('tool_effects').set({ state, outcome, updated_at: now })
      .where('turn_key', '=', turnKey).where('call_key', '=', callKey).execute();
  },
};

// ---------------------------------------------------------------------------------------------
// The history's reads (history.ts): the inbox, messages, transcripts and conversation logs, and
// the two writes reading makes (mark read, the organization's junk decision).

/** Whose rooms a read sees: an organization's, or only one of its agents'. */
export interface RoomScope {
  orgId: number;
  /** An agent's token (or targetAccountId naming an agent): only this agent's rooms. */
  accountId?: number;
}

export interface InboxFilter {
  junk: 0 | 1;
  /** Only rooms with unread messages. */
  unread?: boolean;
  /** Also the staging test chat's rooms (counterpart kind `test`), left out by default. */
  includeTest?: boolean;
}

/** A message with the room it was said in (GET /api/v2/messages/recent). */
export type MessageInRoom = MessageRow & Pick<RoomRow, 'account_id' | 'counterpart' | 'counterpart_kind' | 'display_name' | 'junk' | 'junk_reason'>
  & Pick<ConversationRow, 'messages_out' | 'duration_ms' | 'messages_in' | 'ended_at' | 'channel' | 'voicemail_recording'> & AnalysisView;

function inboxQuery(db: Executor, s: RoomScope, f: InboxFilter) {
  let q = db.selectFrom('conversation_rooms').where('org_id', '=', s.orgId).where('junk', '=', f.junk);
  if (s.accountId !== undefined) q = q.where('account_id', '=', s.accountId);
  if (f.unread) q = q.where('unread', '>', 0);
  if (!f.includeTest) q = q.where('counterpart_kind', '!=', 'test');
  return q;
}

export const inboxRepo = {
  /** One page of the inbox (or the junk inbox), newest activity first (index conversation_rooms_inbox). */
  async page(db: Executor, s: RoomScope, f: InboxFilter, limit: number, offset: number): Promise<RoomRow[]> {
    return inboxQuery(db, s, f).selectAll()
      .orderBy('last_message_at', 'desc').orderBy('id', 'desc').limit(limit).offset(offset).execute();
  },
  async count(db: Executor, s: RoomScope, f: InboxFilter): Promise<number> {
    const r = await inboxQuery(db, s, f).select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
    return Number(r.n);
  },
  /** The room `accountId:id` when it lies within `s` (another organization's or agent's: undefined). */
  async find(db: Executor, s: RoomScope, accountId: number, id: number): Promise<RoomRow | undefined> {
    if (s.accountId !== undefined && s.accountId !== accountId) return undefined;
    return db.selectFrom('conversation_rooms').selectAll()
      .where('id', '=', id).where('account_id', '=', accountId).where('org_id', '=', s.orgId).executeTakeFirst();
  },
  /** Rooms by id within an organization (a batch's lookups). */
  async byIds(db: Executor, orgId: number, ids: readonly number[]): Promise<RoomRow[]> {
    if (ids.length === 0) return [];
    return db.selectFrom('conversation_rooms').selectAll().where('org_id', '=', orgId).where('id', 'in', [...ids]).execute();
  },
  /**
   * Marks the room read up to `seenAt` (ms): a message that arrived after what the reader was
   * shown leaves the count alone, so nothing unread is ever lost to a read racing a new message.
   */
  async markRead(db: Executor, id: number, seenAt: number): Promise<void> {
    await db.updateTable('conversation_rooms').set({ unread: 0 })
      .where('id', '=', id).where('unread', '>', 0).where('last_message_at', '<=', seenAt).execute();
  },
  /** The organization's decision (junk_override) and the junk state it leads to. */
  async setJunkDecision(db: Executor, id: number, v: Pick<RoomRow, 'junk' | 'junk_reason' | 'junk_override'>, now: number): Promise<void> {
    await db.updateTable('conversation_rooms').set({ ...v, updated_at: now }).where('id', '=', id).execute();
  },
  /** The channel of the room's latest conversation (the junk rules depend on it). */
  async lastChannel(db: Executor, roomId: number): Promise<ConversationRow['channel'] | undefined> {
    const r = await db.selectFrom('conversations').select('channel').where('room_id', '=', roomId)
      .orderBy('started_at', 'desc').limit(1).executeTakeFirst();
    return r?.channel;
  },
  /** Who opened the room: the direction of its first conversation. */
  async firstDirection(db: Executor, roomId: number): Promise<ConversationRow['direction'] | undefined> {
    const r = await db.selectFrom('conversations').select('direction').where('room_id', '=', roomId)
      .orderBy('started_at').limit(1).executeTakeFirst();
    return r?.direction;
  },
};

/**
 * Messages of one millisecond in the order they happened: what the person said, the tools the
 * agent ran on it, then the agent's answer.
 */
const SAID_ORDER = sql<number>`case direction when 'inbound' then 0 when 'tool' then 1 else 2 end`;

export const historyRepo = {
  /** The latest `limit` messages across the rooms of `s` (no tool calls), newest first, with their rooms and conversations' counts. */
  async recent(db: Executor, s: RoomScope, limit: number): Promise<MessageInRoom[]> {
    let q = db.selectFrom('conversation_messages as m').innerJoin('conversation_rooms as r', 'r.id', 'm.room_id')
      .innerJoin('conversations as c', 'c.id', 'm.conversation_id')
      .leftJoin('conversation_analyses as a', 'a.id', 'm.conversation_id')
      .selectAll('m').select(['r.account_id', 'r.counterpart', 'r.counterpart_kind', 'r.display_name', 'r.junk', 'r.junk_reason', 'c.messages_out', 'c.duration_ms', 'c.voicemail_recording',
        'c.messages_in', 'c.ended_at', 'c.channel', 'a.state as analysis_state', 'a.engine as analysis_engine', 'a.answer as analysis_answer', 'a.last_error as analysis_error'])
      .where('m.org_id', '=', s.orgId).where('m.direction', '<>', 'tool');
    if (s.accountId !== undefined) q = q.where('r.account_id', '=', s.accountId);
    return q.orderBy('m.at', 'desc').orderBy(sql`case m.direction when 'inbound' then 0 when 'tool' then 1 else 2 end`, 'desc')
      .orderBy('m.id', 'desc').limit(limit).execute();
  },
  /** Conversations by id within an organization. */
  async conversations(db: Executor, orgId: number, ids: readonly string[]): Promise<ConversationRow[]> {
    if (ids.length === 0) return [];
    return db.selectFrom('conversations').selectAll().where('org_id', '=', orgId).where('id', 'in', [...ids]).execute();
  },
  /**
   * The first `perConversation` messages of each conversation (tool calls too when `tools`), in
   * order: conversation, then time. One statement for a whole batch or a page of logs.
   */
  async transcripts(db: Executor, ids: readonly string[], perConversation: number, tools: boolean): Promise<(MessageRow & { n: number })[]> {
    if (ids.length === 0) return [];
    const numbered = db.selectFrom('conversation_messages').selectAll()
      .select((eb) => eb.fn.agg<number>('row_number').over((ob) => ob.partitionBy('conversation_id').orderBy('at').orderBy(SAID_ORDER).orderBy('id')).as('n'))
      .where('conversation_id', 'in', [...ids])
      .$if(!tools, (q) => q.where('direction', '<>', 'tool'));
    return db.selectFrom(numbered.as('t')).selectAll().where('t.n', '<=', perConversation)
      .orderBy('t.conversation_id').orderBy('t.n').execute();
  },
};

/** What GET /api/v2/logs selects: an organization's (or an agent's) conversations that started in [from, to] (ms). */
export interface LogFilter {
  orgId: number;
  accountId?: number;
  from: number;
  to: number;
  directions?: readonly ConversationRow['direction'][];
  channels?: readonly ConversationRow['channel'][];
  /** Outcomes; `open` selects conversations that have not ended. */
  outcomes?: readonly (ConversationOutcome | 'open')[];
  engines?: readonly ConversationRow['engine'][];
  /**
   * One room, which the caller has checked is the tenant's (and the agent's, if one is named): the
   * query then reads that room's conversations alone (conversations_room), since a room's
   * conversations are all of its organization and agent.
   */
  roomId?: number;
  counterpart?: string;
  provider?: string;
  model?: string;
  taskId?: string;
}

/** A conversation as the logs show it: with its room's display name. */
export type LogRow = ConversationRow & { display_name: string | null } & AnalysisView;

/** Where a page of logs continues (newest first): the last row's start and id. */
export interface LogCursor { startedAt: number; id: string }

function logQuery(db: Executor, f: LogFilter) {
  let q = db.selectFrom('conversations as c').where('c.started_at', '>=', f.from).where('c.started_at', '<=', f.to);
  if (f.roomId !== undefined) q = q.where('c.room_id', '=', f.roomId);
  else {
    q = q.where('c.org_id', '=', f.orgId);
    if (f.accountId !== undefined) q = q.where('c.account_id', '=', f.accountId);
  }
  if (f.directions?.length) q = q.where('c.direction', 'in', [...f.directions]);
  if (f.channels?.length) q = q.where('c.channel', 'in', [...f.channels]);
  if (f.engines?.length) q = q.where('c.engine', 'in', [...f.engines]);
  if (f.outcomes?.length) {
    const ended = f.outcomes.filter((o): o is ConversationOutcome => o !== 'open');
    const open = f.outcomes.includes('open');
    q = q.where((eb) => eb.or([
      ...(ended.length ? [eb('c.outcome', 'in', ended)] : []),
      ...(open ? [eb('c.ended_at', 'is', null)] : []),
    ]));
  }
  if (f.counterpart !== undefined) q = q.where('c.counterpart', '=', f.counterpart);
  if (f.provider !== undefined) q = q.where('c.provider', '=', f.provider);
  if (f.model !== undefined) q = q.where('c.model', '=', f.model);
  if (f.taskId !== undefined) q = q.where('c.task_id', '=', f.taskId);
  return q;
}

export const logRepo = {
  /**
   * Up to `limit` conversations, newest first: after `cursor` (keyset, for streaming) or after
   * skipping `offset` (a numbered page). The page's ids are chosen first, in the index
   * (conversations_org_started_id; conversations_agent_started for one agent; conversations_room
   * for one room), and only those
   * rows are read and joined to their rooms: a deep offset skips index entries, not rows.
   */
  async page(db: Executor, f: LogFilter, limit: number, at: { offset?: number; cursor?: LogCursor }): Promise<LogRow[]> {
    const { cursor } = at;
    // After a cursor the range's upper end is the cursor's start itself (one bound, which the
    // index seeks to), so each batch of a stream starts where the last one stopped.
    let ids = logQuery(db, cursor ? { ...f, to: Math.min(f.to, cursor.startedAt) } : f).select('c.id');
    if (cursor) ids = ids.where((eb) => eb.or([eb('c.started_at', '<', cursor.startedAt), eb('c.id', '<', cursor.id)]));
    ids = ids.orderBy('c.started_at', 'desc').orderBy('c.id', 'desc').limit(limit);
    if (at.offset) ids = ids.offset(at.offset);
    return db.selectFrom('conversations as l').innerJoin('conversation_rooms as r', 'r.id', 'l.room_id')
      .leftJoin('conversation_analyses as a', 'a.id', 'l.id')
      .selectAll('l').select(['r.display_name', 'a.state as analysis_state', 'a.engine as analysis_engine', 'a.answer as analysis_answer', 'a.last_error as analysis_error'])
      .where('l.id', 'in', ids)
      .orderBy('l.started_at', 'desc').orderBy('l.id', 'desc').execute();
  },
  async count(db: Executor, f: LogFilter): Promise<number> {
    const r = await logQuery(db, f).select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
    return Number(r.n);
  },
};

/** The latencies of spoken turns (migration 0031), one row per reply. */
export const latencyRepo = {
  async insert(db: Executor, row: TurnLatencyRow): Promise<void> {
    await db.insertInto('turn_latencies').values(row).onConflict((oc) => oc.column('message_id').doNothing()).execute();
  },
  /** The rows of these conversations' replies (their transcripts' agent lines). */
  async ofConversations(db: Executor, conversationIds: readonly string[]): Promise<TurnLatencyRow[]> {
    if (conversationIds.length === 0) return [];
    return db.selectFrom('turn_latencies').selectAll().where('conversation_id', 'in', conversationIds).execute();
  },
  /** An agent's turns since `from` (ms), newest first, at most `limit`. */
  async ofAgent(db: Executor, accountId: number, from: number, limit: number): Promise<TurnLatencyRow[]> {
    return db.selectFrom('turn_latencies').selectAll().where('account_id', '=', accountId).where('at', '>=', from)
      .orderBy('at', 'desc').limit(limit).execute();
  },
};

export const conversationRecordRepo = {
  /**
   * The organization's conversations that ended in [from, to), by end time then id, after
   * `after`, at most `limit` (the activity-record export; index conversations_org_ended, migration 0027).
   */
  async endedBetween(db: Executor, orgId: number, from: number, to: number, after: { at: number; id: string } | null, limit: number): Promise<ConversationRow[]> {
    let q = db.selectFrom('conversations').selectAll().where('org_id', '=', orgId).where('ended_at', 'is not', null)
      .where('ended_at', '>=', from).where('ended_at', '<', to);
    if (after) {
      // The range on the index's column first (an OR alone had the page start from the window's beginning every time).
      q = q.where('ended_at', '>=', after.at)
        .where((eb) => eb.or([eb('ended_at', '>', after.at), eb('id', '>', after.id)]));
    }
    return q.orderBy('ended_at').orderBy('id').limit(limit).execute();
  },
};

// ---------------------------------------------------------------------------------------------
// The live feed's reads (live.ts): the conversations in progress with their last lines, and the
// rows a notification names, each with the ladder of its agent (which streams may see it).

/** The accounts a conversation lies below: its agent (`account_id`), organization (`org_id`), reseller and partner. */
export type LiveLadder = Pick<ConversationRow, 'account_id' | 'org_id'> & Pick<AccountRow, 'partner_id' | 'reseller_id'>;
export type LiveConversationRow = ConversationRow & LiveLadder & Pick<RoomRow, 'display_name'>;
export type LiveMessageRow = MessageRow & LiveLadder;

function liveConversations(db: Executor) {
  return db.selectFrom('conversations as c').innerJoin('accounts as a', 'a.id', 'c.account_id')
    .innerJoin('conversation_rooms as r', 'r.id', 'c.room_id')
    .selectAll('c').select(['a.partner_id', 'a.reseller_id', 'r.display_name']);
}

export const liveRepo = {
  /**
   * The conversations in progress below `target` (an agent, organization, reseller or partner),
   * newest first, at most `limit`: the open ones are few, and found through conversations_open.
   */
  async open(db: Executor, target: Pick<AccountRow, 'id' | 'kind'>, limit: number): Promise<LiveConversationRow[]> {
    // The staging test chat's sessions are not customer conversations: never in the live feed.
    let q = liveConversations(db).where('c.ended_at', 'is', null).where('c.channel', '!=', 'test');
    if (target.kind === 'agent') q = q.where('c.account_id', '=', target.id);
    else if (target.kind === 'organization') q = q.where('c.org_id', '=', target.id);
    else if (target.kind === 'reseller') q = q.where('a.reseller_id', '=', target.id);
    else q = q.where('a.partner_id', '=', target.id);
    return q.orderBy('c.started_at', 'desc').orderBy('c.id', 'desc').limit(limit).execute();
  },
  /** Conversations by id, wherever they are (the feed filters them per stream). */
  async conversations(db: Executor, ids: readonly string[]): Promise<LiveConversationRow[]> {
    if (ids.length === 0) return [];
    return liveConversations(db).where('c.id', 'in', [...ids]).where('c.channel', '!=', 'test').execute();
  },
  /** Messages by id, with their conversation's ladder. */
  async messages(db: Executor, ids: readonly string[]): Promise<LiveMessageRow[]> {
    if (ids.length === 0) return [];
    return db.selectFrom('conversation_messages as m').innerJoin('conversations as c', 'c.id', 'm.conversation_id')
      .innerJoin('accounts as a', 'a.id', 'c.account_id')
      .selectAll('m').select(['c.account_id', 'a.partner_id', 'a.reseller_id'])
      .where('m.id', 'in', [...ids]).where('c.channel', '!=', 'test').execute();
  },
  /** The last `perConversation` lines of each conversation (tool calls included), oldest first. One statement. */
  async lastLines(db: Executor, ids: readonly string[], perConversation: number): Promise<MessageRow[]> {
    if (ids.length === 0) return [];
    const numbered = db.selectFrom('conversation_messages').selectAll()
      .select((eb) => eb.fn.agg<number>('row_number').over((ob) => ob.partitionBy('conversation_id').orderBy('at', 'desc').orderBy(SAID_ORDER, 'desc').orderBy('id', 'desc')).as('n'))
      .where('conversation_id', 'in', [...ids]);
    const rows = await db.selectFrom(numbered.as('t')).selectAll().where('t.n', '<=', perConversation)
      .orderBy('t.conversation_id').orderBy('t.n', 'desc').execute();
    return rows.map(({ n: _n, ...m }) => m);
  },
};
