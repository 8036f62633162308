// Conversations (issue 13): rooms (an agent and one counterpart), conversations (one call or one
// messaging session in a room), their messages (the transcript), the durable queue of turns (an
// inbound message the agent still has to answer), automation requests waiting for
// POST /agent/zapier/response, organizations' own model providers, and where an organization's
// agent replies to receiveMessage go.
import type { Kysely } from 'kysely';
import type { Dialect } from '../types.ts';
import { withId } from './0001-foundation.ts';

export function conversations(dialect: Dialect) {
  return {
    async up(db: Kysely<any>): Promise<void> {
      // receiveMessage replies: the organization's default URL and the secret that signs them (sealed).
      await db.schema.alterTable('accounts').addColumn('message_webhook_url', 'text').execute();
      await db.schema.alterTable('accounts').addColumn('message_signing_secret', 'text').execute();
      // Deliveries of kind 'message' go to this URL (signed with the organization's message secret).
      await db.schema.alterTable('webhook_deliveries').addColumn('target_url', 'text').execute();

      await withId(db.schema.createTable('conversation_rooms'), dialect)
        .addColumn('org_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        // The agent account that talks in this room.
        .addColumn('account_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        // The counterpart's normalised address: an E.164 number, `web:<visitor>` or an API sourceAddress.
        .addColumn('counterpart', 'text', (c) => c.notNull())
        .addColumn('counterpart_kind', 'text', (c) => c.notNull()) // 'phone' | 'web' | 'address'
        .addColumn('display_name', 'text')
        .addColumn('last_message', 'text')
        .addColumn('last_message_at', 'bigint', (c) => c.notNull())
        .addColumn('unread', 'integer', (c) => c.notNull().defaultTo(0))
        // Decided by the junk rules when the room opens or a message arrives (docs/conversations.md).
        .addColumn('junk', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('junk_reason', 'text')
        // The organization's own decision (1 junk, 0 not junk), which wins over the rules; null: the rules decide.
        .addColumn('junk_override', 'integer')
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('updated_at', 'bigint', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('conversation_rooms_counterpart').on('conversation_rooms')
        .columns(['account_id', 'counterpart']).unique().execute();
      await db.schema.createIndex('conversation_rooms_inbox').on('conversation_rooms')
        .columns(['org_id', 'junk', 'last_message_at']).execute();

      await db.schema.createTable('conversations')
        // The contract's conversation uuid.
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('room_id', 'integer', (c) => c.notNull().references('conversation_rooms.id').onDelete('cascade'))
        .addColumn('org_id', 'integer', (c) => c.notNull())
        .addColumn('account_id', 'integer', (c) => c.notNull())
        .addColumn('channel', 'text', (c) => c.notNull()) // 'api' | 'sms' | 'voice' | 'web' | 'sip'
        .addColumn('direction', 'text', (c) => c.notNull()) // 'inbound' | 'outbound'
        .addColumn('counterpart', 'text', (c) => c.notNull())
        // The agent's live configuration's title and the version it was published from, when it opened.
        .addColumn('agent_version', 'bigint')
        // 'model' or 'simulated' (no provider configured: every reply says so).
        .addColumn('engine', 'text', (c) => c.notNull())
        .addColumn('provider', 'text')
        .addColumn('model', 'text')
        .addColumn('task_id', 'text')
        // The carrier's reference (a Twilio CallSid or MessageSid that opened it).
        .addColumn('carrier_ref', 'text')
        .addColumn('started_at', 'bigint', (c) => c.notNull())
        .addColumn('last_activity_at', 'bigint', (c) => c.notNull())
        .addColumn('ended_at', 'bigint')
        // Null while open; then 'completed', 'ended_by_agent', 'transferred', 'no_response', 'hung_up', 'failed'.
        .addColumn('outcome', 'text')
        .addColumn('outcome_detail', 'text')
        .addColumn('duration_ms', 'bigint')
        .addColumn('messages_in', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('messages_out', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('model_calls', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('tokens_in', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('tokens_out', 'integer', (c) => c.notNull().defaultTo(0))
        // JSON: the channel's state (a voice call's no-answer counter, the reply target of a message session).
        .addColumn('state', 'text', (c) => c.notNull().defaultTo('{}'))
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('updated_at', 'bigint', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('conversations_org_started').on('conversations').columns(['org_id', 'started_at']).execute();
      await db.schema.createIndex('conversations_room').on('conversations').columns(['room_id', 'started_at']).execute();
      await db.schema.createIndex('conversations_open').on('conversations').columns(['ended_at', 'last_activity_at']).execute();
      await db.schema.createIndex('conversations_carrier_ref').on('conversations').columns(['carrier_ref']).execute();

      await db.schema.createTable('conversation_messages')
        // The contract's message uuid (receiveMessage's messageUuid for an inbound API message).
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('conversation_id', 'text', (c) => c.notNull().references('conversations.id').onDelete('cascade'))
        .addColumn('room_id', 'integer', (c) => c.notNull())
        .addColumn('org_id', 'integer', (c) => c.notNull())
        // 'inbound' (the counterpart), 'outbound' (the agent), 'tool' (a tool the agent ran: name, arguments, result).
        .addColumn('direction', 'text', (c) => c.notNull())
        .addColumn('text', 'text', (c) => c.notNull())
        .addColumn('source', 'text', (c) => c.notNull()) // the channel it came or went by
        .addColumn('status', 'text', (c) => c.notNull()) // 'received', 'pending', 'success', 'failed', 'interrupted'
        // JSON: attachments [{type, url}], a tool call {name, arguments, result, refused}, context and metadata.
        .addColumn('attachments', 'text', (c) => c.notNull().defaultTo('[]'))
        .addColumn('data', 'text')
        .addColumn('at', 'bigint', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('conversation_messages_conversation').on('conversation_messages').columns(['conversation_id', 'at']).execute();
      await db.schema.createIndex('conversation_messages_room').on('conversation_messages').columns(['room_id', 'at']).execute();
      await db.schema.createIndex('conversation_messages_org').on('conversation_messages').columns(['org_id', 'at']).execute();

      // The durable queue of turns: an inbound message the agent answers in a worker.
      await db.schema.createTable('conversation_turns')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('org_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        .addColumn('conversation_id', 'text', (c) => c.notNull().references('conversations.id').onDelete('cascade'))
        .addColumn('message_id', 'text', (c) => c.notNull())
        // JSON: where the reply goes ({kind: 'webhook', url} | {kind: 'sms', from, to} | {kind: 'none'}) and
        // the model loop's saved state while an automation request is outstanding.
        .addColumn('reply_to', 'text', (c) => c.notNull())
        .addColumn('resume', 'text')
        .addColumn('state', 'text', (c) => c.notNull().defaultTo('pending'))
        .addColumn('run_at', 'bigint', (c) => c.notNull())
        .addColumn('attempt', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('max_attempts', 'integer', (c) => c.notNull().defaultTo(5))
        .addColumn('lease_owner', 'text')
        .addColumn('lease_expires_at', 'bigint')
        .addColumn('last_error', 'text')
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('updated_at', 'bigint', (c) => c.notNull())
        .addColumn('finished_at', 'bigint')
        .execute();
      await db.schema.createIndex('conversation_turns_claim').on('conversation_turns').columns(['state', 'run_at'])
        .where('state', '=', 'pending').execute();
      await db.schema.createIndex('conversation_turns_rescue').on('conversation_turns').columns(['state', 'lease_expires_at']).execute();

      // Asynchronous automation actions: the request a turn waits on until POST /agent/zapier/response.
      await db.schema.createTable('automation_requests')
        .addColumn('id', 'text', (c) => c.primaryKey()) // the requestId
        .addColumn('org_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        .addColumn('turn_id', 'text', (c) => c.notNull())
        .addColumn('conversation_id', 'text', (c) => c.notNull())
        .addColumn('tool_call_id', 'text', (c) => c.notNull())
        .addColumn('action', 'text', (c) => c.notNull())
        .addColumn('state', 'text', (c) => c.notNull()) // 'waiting' | 'answered' | 'expired'
        .addColumn('response', 'text')
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('expires_at', 'bigint', (c) => c.notNull())
        .addColumn('answered_at', 'bigint')
        .execute();

      // An organization's own model providers (bring your own key); the key is sealed.
      await withId(db.schema.createTable('llm_providers'), dialect)
        .addColumn('org_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('base_url', 'text', (c) => c.notNull())
        .addColumn('api_key', 'text')
        // JSON array of model ids this provider serves for the organization.
        .addColumn('models', 'text', (c) => c.notNull().defaultTo('[]'))
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('updated_at', 'bigint', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('llm_providers_org_name').on('llm_providers').columns(['org_id', 'name']).unique().execute();
    },
  };
}
