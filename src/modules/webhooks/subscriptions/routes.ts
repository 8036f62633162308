// The Webhooks operations of the contract on /api/v2/webhooks: list, add and remove the
// organization's event subscriptions.
import { Type } from '@sinclair/typebox';
import type { App, AppContext } from '../../../app.ts';
import { AccountId, Envelope, errors, Obj, Security } from '../../../http/schemas.ts';
import { policyFromConfig } from '../../../webhooks/ssrf.ts';
import { MAX_LABEL_LENGTH, MAX_URL_LENGTH, subscriptionService, WEBHOOK_TYPES } from './service.ts';

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

const CreateBody = Type.Object({
  url: Type.String({ maxLength: MAX_URL_LENGTH, description: 'Absolute http(s) URL that receives the events' }),
  label: Type.String({ maxLength: MAX_LABEL_LENGTH, description: 'Friendly label' }),
  type: Type.String({ maxLength: 50, description: `Which events: ${Types}` }),
}, { additionalProperties: true });

const DeleteBody = Type.Object({
  url: Type.String({ maxLength: MAX_URL_LENGTH, description: 'Webhook URL to remove' }),
  type: Type.Optional(Type.String({ maxLength: 50, description: 'Only the subscription of this type (default: every type to this URL)' })),
}, { additionalProperties: true });

export async function subscriptionRoutes(app: App, ctx: AppContext): Promise<void> {
  const subscriptions = subscriptionService({
    db: ctx.database.db, dialect: ctx.database.dialect, box: ctx.box, policy: policyFromConfig(ctx.config),
  });

  app.get('/api/v2/webhooks', {
    schema: {
      operationId: 'listWebhooks', tags, security: Security, summary: 'List Webhooks', querystring: TargetQuery,
      response: { 200: Envelope({ webhooks: Type.Array(Webhook) }), ...errors(403, 404) },
    },
  }, async (req) => subscriptions.list(req.scope, req.query.targetAccountId));

  app.post('/api/v2/webhooks', {
    schema: {
      operationId: 'addWebhook', tags, security: Security, summary: 'Add Webhook',
      description: `Subscribes url to one type of event: ${Types}. The answer carries the new webhook and its signingSecret in full, once.`,
      querystring: TargetQuery, body: CreateBody,
      response: { 201: Envelope({ webhooks: Type.Array(Webhook), signingSecret: Type.String() }), ...errors(400, 403, 404, 409) },
    },
  }, async (req, reply) => reply.status(201).send(await subscriptions.create(req.scope, req.query.targetAccountId, req.body)));

  app.delete('/api/v2/webhooks', {
    schema: {
      operationId: 'removeWebhook', tags, security: Security, summary: 'Remove Webhook',
      description: 'Removes the organization\'s subscriptions to url (every type, or only `type`); their pending deliveries are dropped.',
      querystring: TargetQuery, body: DeleteBody,
      response: { 200: Envelope({ deleted: Type.Number() }), ...errors(400, 403, 404) },
    },
  }, async (req) => subscriptions.remove(req.scope, req.query.targetAccountId, req.body));
}
