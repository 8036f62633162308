// Queries on the conversation tables: conversation_rooms (an agent and one counterpart),
// conversations (one call or messaging session), conversation_messages (the transcript),
// conversation_turns (the queue's own columns are src/queue/engine.ts's) and automation_requests.
import { sql } from 'kysely';
import type {
  AutomationRequestRow, ConversationOutcome, ConversationRow, Db, Executor, MessageRow, RoomRow, TurnRow,
} from '../../db/types.ts';

type NewRoom = Pick<RoomRow, 'org_id' | 'account_id' | 'counterpart' | 'counterpart_kind' | 'display_name' | 'junk' | 'junk_reason'>;
type NewConversation = Omit<ConversationRow, 'messages_in' | 'messages_out' | 'model_calls' | 'tokens_in' | 'tokens_out' | 'ended_at' | 'outcome' | 'outcome_detail' | 'duration_ms'>;

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
  async find(db: Executor, id: string): Promise<ConversationRow | undefined> {
    return db.selectFrom('conversations').selectAll().where('id', '=', id).executeTakeFirst();
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
  async byCarrierRef(db: Executor, orgId: number, carrierRef: string): Promise<ConversationRow | undefined> {
    return db.selectFrom('conversations').selectAll()
      .where('carrier_ref', '=', carrierRef).where('org_id', '=', orgId).executeTakeFirst();
  },
  async insert(db: Executor, row: NewConversation): Promise<ConversationRow> {
    return db.insertInto('conversations').values(row).returningAll().executeTakeFirstOrThrow();
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
  /** Ends an open conversation; false when it had already ended (the first outcome stands). */
  async end(db: Executor, id: string, outcome: ConversationOutcome, detail: string | null, now: number): Promise<boolean> {
    const r = await db.updateTable('conversations')
      .set((eb) => ({
        outcome, outcome_detail: detail, ended_at: now, updated_at: now,
        duration_ms: eb(sql<number>`${now}`, '-', eb.ref('started_at')),
      }))
      .where('id', '=', id).where('ended_at', 'is', null).executeTakeFirst();
    return Number(r.numUpdatedRows) > 0;
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
  async insert(db: Executor, row: Omit<MessageRow, 'attachments'> & { attachments?: string }): Promise<void> {
    await db.insertInto('conversation_messages').values(row).execute();
  },
  async find(db: Executor, id: string): Promise<MessageRow | undefined> {
    return db.selectFrom('conversation_messages').selectAll().where('id', '=', id).executeTakeFirst();
  },
  async setStatus(db: Executor, id: string, status: MessageRow['status']): Promise<void> {
    await db.updateTable('conversation_messages').set({ status }).where('id', '=', id).execute();
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
  /** Deletes turns that ended before `before` (the conversation and its messages stay); how many. */
  async pruneEnded(db: Db, before: number, batch = 1000): Promise<number> {
    return db.transaction().execute(async (tx) => {
      const rows = await tx.selectFrom('conversation_turns').select('id')
        .where('state', 'in', ['finished', 'failed', 'canceled']).where('finished_at', '<', before).limit(batch).execute();
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
