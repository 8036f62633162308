// Issue 23: a retried turn must not repeat what its tools did. `tool_effects` records, per tool
// call of a turn, that its effect was started and what it answered, keyed by the turn and the
// call's place in it (src/modules/conversations/turn.ts says why that key): a retry hands the
// model the recorded answer instead of texting the person again. A conversation's recorded texts
// and follow-ups are also what its cap counts. `caller_verified` says whether an inbound call's
// caller ID was vouched for (Twilio's full STIR/SHAKEN attestation, or a SIP trunk the
// organization whitelisted); null where there is no caller to verify (outbound calls, messages).
import type { Kysely } from 'kysely';

export function toolEffects() {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema.alterTable('conversations').addColumn('caller_verified', 'integer').execute();
      await db.schema.createTable('tool_effects')
        .addColumn('turn_key', 'text', (c) => c.notNull())
        .addColumn('call_key', 'text', (c) => c.notNull())
        .addColumn('org_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        .addColumn('conversation_id', 'text', (c) => c.notNull().references('conversations.id').onDelete('cascade'))
        .addColumn('tool', 'text', (c) => c.notNull())
        .addColumn('tool_call_id', 'text', (c) => c.notNull())
        // 'started' (the effect may have happened; its answer was not recorded) | 'done'
        .addColumn('state', 'text', (c) => c.notNull())
        // JSON ToolOutcome: what the model was told.
        .addColumn('outcome', 'text')
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('updated_at', 'bigint', (c) => c.notNull())
        .addPrimaryKeyConstraint('tool_effects_pk', ['turn_key', 'call_key'])
        .execute();
      await db.schema.createIndex('tool_effects_conversation').on('tool_effects').columns(['conversation_id', 'tool']).execute();
    },
  };
}
