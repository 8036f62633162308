// The conversation engine's operations: receiveMessage (the API channel) and the answers of
// asynchronous automation actions. The history (rooms, messages, logs) is history-routes.ts.
import { Type } from '@sinclair/typebox';
import type { App } from '../../http/types.ts';
import { errors, Security } from '../../http/schemas.ts';
import { MAX_MESSAGE_CHARS, type ConversationService } from './service.ts';

export async function conversationRoutes(app: App, { conversations }: { conversations: ConversationService }): Promise<void> {
  app.post('/api/v2/agent/receiveMessage', {
    schema: {
      operationId: 'receiveMessage', tags: ['Messaging'], security: Security, summary: 'Send message to an agent from your own platform',
      description: 'Answers at once with the message uuid; the agent\'s reply is POSTed, signed, to outboundMessageWebhookUrl '
        + '(or the organization\'s default) with inReplyTo set to that uuid (docs/conversations.md). Reseller or partners only.',
      body: Type.Object({
        targetAgent: Type.String({ minLength: 1, maxLength: 128, description: 'Agent account ID, agent id (camp…), phone number, or username' }),
        sourceAddress: Type.String({ minLength: 1, maxLength: 256, description: 'Sender phone number or address' }),
        message: Type.String({ maxLength: MAX_MESSAGE_CHARS, description: 'Message text' }),
        attachments: Type.Optional(Type.Array(Type.Object({ type: Type.Optional(Type.String()), url: Type.Optional(Type.String()) }))),
        context: Type.Optional(Type.Object({}, { additionalProperties: true })),
        metadata: Type.Optional(Type.Object({}, { additionalProperties: true })),
        outboundMessageWebhookUrl: Type.Optional(Type.String({ maxLength: 2048, description: 'Webhook URL (POST) to deliver agent responses to' })),
      }),
      response: { 200: Type.Object({ success: Type.Boolean(), messageUuid: Type.String() }), ...errors(400, 403, 404) },
    },
  }, async (req) => conversations.receiveMessage(req.scope, req.body));

  app.post('/api/v2/agent/zapier/response', {
    schema: {
      operationId: 'answerAutomationRequest', tags: ['Agents'], security: Security, summary: 'Answer an asynchronous automation action',
      description: 'The agent waits for this answer to the requestId its webhook action sent (docs/conversations.md, Tools). 404 for an unknown requestId, 409 when it was already answered or its time ran out.',
      body: Type.Object({ requestId: Type.Optional(Type.Unknown()), responseData: Type.Optional(Type.Unknown()) }),
      response: { 200: Type.Object({ success: Type.Boolean(), message: Type.String(), requestId: Type.String() }), ...errors(400, 404, 409) },
    },
  }, async (req) => conversations.answerAutomation(req.scope, req.body));
}
