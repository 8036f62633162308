// The Webhooks operations of the contract on /api/v2/webhooks: list, add and remove the
// organization's event subscriptions.
import { Type } from '@sinclair/typebox';
import type { App } from '../../../http/types.ts';
import { AccountId, Envelope, errors, LimitOffsetQuery, Obj, Security } from '../../../http/schemas.ts';
import { QUEUE_STATES } from '../../../db/types.ts';
import { MAX_LABEL_LENGTH, MAX_URL_LENGTH, WEBHOOK_TYPES, type SubscriptionService } from './service.ts';

const tags = ['Webhooks'];
const TargetQuery = Type.Object({
  targetAccountId: Type.Optional(AccountId('Organization to act on (resellers and partners; an organization token acts on itself)')),
});
const Types = `${WEBHOOK_TYPES.join(', ')} (task and registration are callplane additions)`;

const Webhook = Obj({
  id: Type.Number({ description: 'Subscription id' }),
  userId: Type.Number({ description: 'The organization it belongs to' }),
  label: Type.String(),
  timestamp: Type.Number({ description: 'Created at (unix seconds)' }),
  url: Type.String(),
  type: Type.String(),
  signingSecret: Type.String({ description: 'Our Standard Webhooks secret, masked (in full only in the answer to its creation)' }),
}, 'An event subscription. See docs/webhooks.md.');

const Delivery = Obj({
  id: Type.String(), eventId: Type.String({ description: 'The webhook-id your endpoint sees; the same on every retry and replay' }),
  state: Type.String(), webhookId: Type.Number(), url: Type.String(), type: Type.String(),
  attempts: Type.Array(Type.Unknown()), nextAttemptAt: Type.Union([Type.Number(), Type.Null()]), createdAt: Type.Number(),
  payload: Type.Optional(Type.Unknown({ description: 'The event as sent: the JSON body your endpoint receives (callplane extension)' })),
}, 'One event sent to a subscription, with every attempt (times in unix seconds)');

const CreateBody = Type.Object({
  url: Type.String({ maxLength: MAX_URL_LENGTH, description: 'Absolute http(s) URL that receives the events' }),
  label: Type.String({ maxLength: MAX_LABEL_LENGTH, description: 'Friendly label' }),
  type: Type.String({ maxLength: 50, description: `Which events: ${Types}` }),
}, { additionalProperties: true });

const DeleteBody = Type.Object({
  url: Type.String({ maxLength: MAX_URL_LENGTH, description: 'Webhook URL to remove' }),
  type: Type.Optional(Type.String({ maxLength: 50, description: 'Only the subscription of this type (default: every type to this URL)' })),
}, { additionalProperties: true });

export async function subscriptionRoutes(app: App, { subscriptions }: { subscriptions: SubscriptionService }): Promise<void> {
  app.get('/api/v2/webhooks', {
    schema: {
      operationId: 'listWebhooks', tags, security: Security, summary: 'List Webhooks', querystring: TargetQuery,
      response: { 200: Envelope({ webhooks: Type.Array(Webhook) }), ...errors(403, 404) },
    },
  }, async (req) => subscriptions.list(req.scope, req.query.targetAccountId));

  app.post('/api/v2/webhooks', {
    schema: {
      operationId: 'addWebhook', tags, security: Security, summary: 'Add Webhook',
      description: `Subscribes url to one type of event: ${Types}. 201: the new webhook and its signingSecret in full, once. `
        + '200: a webhook of this url and type already exists; it is answered unchanged (its secret masked).',
      querystring: TargetQuery, body: CreateBody,
      response: {
        200: Envelope({ webhooks: Type.Array(Webhook) }),
        201: Envelope({ webhooks: Type.Array(Webhook), signingSecret: Type.String() }),
        ...errors(400, 403, 404, 409),
      },
    },
  }, async (req, reply) => {
    const { created, body } = await subscriptions.create(req.scope, req.query.targetAccountId, req.body);
    return reply.status(created ? 201 : 200).send(body);
  });

  app.delete('/api/v2/webhooks', {
    schema: {
      operationId: 'removeWebhook', tags, security: Security, summary: 'Remove Webhook',
      description: 'Removes the organization\'s subscriptions to url (every type, or only `type`); their pending deliveries are dropped.',
      querystring: TargetQuery, body: DeleteBody,
      response: { 200: Envelope({ deleted: Type.Number() }), ...errors(400, 403, 404) },
    },
  }, async (req) => subscriptions.remove(req.scope, req.query.targetAccountId, req.body));

  app.get('/api/v2/webhooks/deliveries', {
    schema: {
      operationId: 'listWebhookDeliveries', tags, security: Security, summary: 'Deliveries of the organization\'s webhooks, newest first (callplane extension)',
      description: 'Each event sent (or to be sent) to a subscription, with every attempt: time, status code or error, duration, response excerpt, next attempt.',
      querystring: Type.Object({
        ...TargetQuery.properties,
        url: Type.Optional(Type.String({ maxLength: MAX_URL_LENGTH, description: 'Only deliveries to this webhook URL' })),
        type: Type.Optional(Type.String({ maxLength: 50, description: 'Only deliveries of subscriptions of this type' })),
        state: Type.Optional(Type.String({ maxLength: 20, description: `Only deliveries in this state: ${QUEUE_STATES.join(', ')}` })),
        ...LimitOffsetQuery,
      }),
      response: { 200: Envelope({ total: Type.Number(), deliveries: Type.Array(Delivery) }), ...errors(400, 403, 404) },
    },
  }, async (req) => subscriptions.deliveries(req.scope, req.query.targetAccountId, req.query));

  app.post('/api/v2/webhooks/:id/test', {
    schema: {
      operationId: 'testWebhook', tags, security: Security, summary: 'Send a test event to one webhook (callplane extension)',
      description: 'Queues one `webhook.test` event to this subscription, signed and retried like any other, and answers its delivery (follow it in the deliveries).',
      params: Type.Object({ id: Type.Integer({ minimum: 1, description: 'Subscription id' }) }),
      querystring: TargetQuery,
      response: { 200: Envelope({ delivery: Delivery }), ...errors(403, 404) },
    },
  }, async (req) => subscriptions.test(req.scope, req.query.targetAccountId, req.params.id));

  app.post('/api/v2/webhooks/deliveries/:id/replay', {
    schema: {
      operationId: 'replayWebhookDelivery', tags, security: Security, summary: 'Send a delivered or failed event again (callplane extension)',
      description: 'A new delivery of the same event (same webhook-id and body) to the same subscription, due now. 409 while the original is still pending or running.',
      params: Type.Object({ id: Type.String({ minLength: 1, maxLength: 64, description: 'Delivery id' }) }),
      querystring: TargetQuery,
      response: { 200: Envelope({ delivery: Delivery }), ...errors(403, 404, 409) },
    },
  }, async (req) => subscriptions.replay(req.scope, req.query.targetAccountId, req.params.id));
}
