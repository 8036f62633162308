// The conversation engine's operations: receiveMessage (the API channel) and the answers of
// asynchronous automation actions. The history (rooms, messages, logs) is history-routes.ts.
import { Type } from '@sinclair/typebox';
import type { App } from '../../http/types.ts';
import { errors, Security } from '../../http/schemas.ts';
import { MAX_MESSAGE_CHARS, type ConversationService } from './service.ts';
import { STAGING_CHAT_TEXT_CHARS, type StagingChatService } from './staging-chat.ts';

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

/** callplane extension: a test chat with an agent's staging configuration (docs/conversations.md). */
export async function stagingChatRoutes(app: App, { stagingChat }: { stagingChat: StagingChatService }): Promise<void> {
  app.post('/api/v2/agent/:agentId/testMessage', {
    schema: {
      operationId: 'testAgentMessage', tags: ['Agents'], security: Security,
      summary: 'callplane extension: talk with the agent\'s staging configuration (the reply is answered at once)',
      description: 'Runs one turn of the agent\'s STAGING configuration inline and answers the reply, so a change can be tried before it is published. '
        + 'The conversation is recorded (channel web, counterpart web:staging-<your account>-<session>); a new session starts afresh. '
        + 'Any token whose subtree holds the agent. 409 while the same session\'s last message is being answered, 502 when the model fails.',
      params: Type.Object({ agentId: Type.String({ maxLength: 100, description: 'Agent id: camp<accountId>, or the account id' }) }),
      body: Type.Object({
        text: Type.String({ maxLength: STAGING_CHAT_TEXT_CHARS * 2, description: `1–${STAGING_CHAT_TEXT_CHARS} characters after trimming` }),
        session: Type.Optional(Type.String({ maxLength: 40, description: 'Your test session (letters, digits, _ and -; default "default"): another one starts a new conversation' })),
      }),
      response: {
        200: Type.Object({
          success: Type.Boolean(), reply: Type.String(), ended: Type.Boolean({ description: 'The agent ended the conversation' }),
          conversationUuid: Type.String(), engine: Type.String({ description: 'model, or simulated when no model provider is configured' }), model: Type.String(),
          welcome: Type.Optional(Type.String({ description: 'The staging welcome message, recorded first when this message opened the conversation' })),
          simulated: Type.Optional(Type.Boolean()),
        }),
        ...errors(400, 403, 404, 409, 502),
      },
    },
  }, async (req) => stagingChat.send(req.scope, req.params.agentId, req.body));
}
