// Issue 27, every turn's latency: `turn_latencies` holds, per spoken turn of the agent (keyed by
// its reply's message), how long each step took — the end of the caller's speech to the end of the
// turn (the VAD's silence window), to the transcript, to the model's first token, to the first
// audio out, and in all — with the path (sip, stream, gather) and the engines that ran. A step a
// path cannot see (gathered Twilio calls: Twilio listens and speaks) is null. The conversation
// reads show it beside the reply; GET /api/v2/agent/{agentId}/latency summarises an agent's by
// (account_id, at).
import type { Kysely } from 'kysely';

export function turnLatencies() {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema.createTable('turn_latencies')
        .addColumn('message_id', 'text', (c) => c.primaryKey().references('conversation_messages.id').onDelete('cascade'))
        .addColumn('org_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        // The agent account (GET /api/v2/agent/{agentId}/latency reads by it).
        .addColumn('account_id', 'integer', (c) => c.notNull())
        .addColumn('conversation_id', 'text', (c) => c.notNull().references('conversations.id').onDelete('cascade'))
        // 'sip' | 'stream' | 'gather'
        .addColumn('path', 'text', (c) => c.notNull())
        .addColumn('stt_engine', 'text')
        .addColumn('llm_engine', 'text')
        .addColumn('tts_engine', 'text')
        .addColumn('at', 'bigint', (c) => c.notNull())
        .addColumn('endpoint_ms', 'integer')
        .addColumn('stt_ms', 'integer')
        .addColumn('llm_first_token_ms', 'integer')
        .addColumn('tts_first_audio_ms', 'integer')
        .addColumn('total_ms', 'integer')
        .execute();
      await db.schema.createIndex('turn_latencies_agent').on('turn_latencies').columns(['account_id', 'at']).execute();
      await db.schema.createIndex('turn_latencies_conversation').on('turn_latencies').columns(['conversation_id']).execute();
    },
  };
}
