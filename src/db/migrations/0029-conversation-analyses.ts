// Issue 27, "After every conversation": each conversation that ends gets one row here, written in
// the transaction that ends it. The row is both a durable queue job (the queue columns: claimed,
// leased, retried with backoff by src/queue/) and the analysis's result, kept under the
// conversation's id (the row's id *is* the conversation's id, so a conversation is analysed at most
// once): the model's validated answer (`answer`, JSON) is written before anything else is done
// with it, so a retry after the model answered reuses it instead of asking again.
// src/modules/conversations/analysis.ts says what is asked and how the answer is checked.
import { sql, type Kysely } from 'kysely';

export function conversationAnalyses() {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema.createTable('conversation_analyses')
        .addColumn('id', 'text', (c) => c.primaryKey().references('conversations.id').onDelete('cascade'))
        .addColumn('org_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        .addColumn('state', 'text', (c) => c.notNull().defaultTo('pending'))
        .addColumn('run_at', 'bigint', (c) => c.notNull())
        .addColumn('attempt', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('max_attempts', 'integer', (c) => c.notNull().defaultTo(5))
        .addColumn('lease_owner', 'text')
        .addColumn('lease_expires_at', 'bigint')
        .addColumn('last_error', 'text')
        // Who answered: 'model', 'simulated' (the rules, on the SIMULATED engine) or 'facts' (nothing to ask).
        .addColumn('engine', 'text')
        .addColumn('provider', 'text')
        .addColumn('model', 'text')
        // JSON: the validated answer {summary, outcome, leadRating, leadRatingReason, fields}.
        .addColumn('answer', 'text')
        // Answers that failed the check, over every attempt.
        .addColumn('invalid_answers', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('model_calls', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('tokens_in', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('tokens_out', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('updated_at', 'bigint', (c) => c.notNull())
        .addColumn('finished_at', 'bigint')
        .execute();
      await db.schema.createIndex('conversation_analyses_claim').on('conversation_analyses').columns(['state', 'run_at'])
        .where(sql.ref('state'), '=', sql.lit('pending')).execute();
      await db.schema.createIndex('conversation_analyses_running_lease').on('conversation_analyses').column('lease_expires_at')
        .where(sql.ref('state'), '=', sql.lit('running')).execute();
    },
  };
}
