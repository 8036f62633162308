// The Webhook Relay operations of the contract (types, create/update, get, list, delete), our
// deliveries listing and replay, and the public ingress the providers post to (ingress.ts).
import { Type } from '@sinclair/typebox';
import type { Config } from '../../../config.ts';
import type { App } from '../../../http/types.ts';
import { AccountId, Envelope, errors, LimitOffsetQuery, Obj, Security } from '../../../http/schemas.ts';
import { relayIngress } from './ingress.ts';
import { MAX_TIMEOUT_MS, type RelayService } from './service.ts';

const tags = ['Webhooks'];
const TargetQuery = Type.Object({
  targetAccountId: Type.Optional(AccountId('Organization to act on (resellers and partners; an organization token acts on itself)')),
});
const TypeParams = Type.Object({
  type: Type.String({ minLength: 1, maxLength: 100, description: 'Relay type (see GET /api/v2/webhookRelay/types), e.g. twilioSMS' }),
});

const RelayBody = Type.Object({
  url: Type.String({ maxLength: 2048, description: 'Absolute http(s) URL that receives the forwarded webhooks' }),
  timeout: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_TIMEOUT_MS, description: `Milliseconds before a forward is aborted (default 15000, at most ${MAX_TIMEOUT_MS})` })),
  headers: Type.Optional(Type.Unknown({ description: 'Custom headers sent with every forward: an array of single-key objects, e.g. [{"Authorization": "Bearer xyz"}]' })),
  successStatusCodes: Type.Optional(Type.Array(Type.Integer({ minimum: 100, maximum: 599 }), {
    minItems: 1, maxItems: 500, description: 'Status codes of your endpoint that count as delivered (default 200–299)',
  })),
  stripeSigningSecret: Type.Optional(Type.Unknown({ description: 'stripe only: the endpoint\'s signing secret (whsec_…) that Stripe signs with; null clears it' })),
  username: Type.Optional(Type.Unknown({ description: 'chargebee only: the basic-auth username to set on the Chargebee webhook (generated when absent, answered once)' })),
  password: Type.Optional(Type.Unknown({ description: 'chargebee only: the basic-auth password to set on the Chargebee webhook (generated when absent, answered once)' })),
  rotateSigningSecret: Type.Optional(Type.Boolean({ description: 'Issue a new signingSecret for our signatures (answered once, in full)' })),
}, { additionalProperties: true });

const RelayConfig = Obj({
  type: Type.String(),
  url: Type.String(),
  timeout: Type.Number(),
  headers: Type.Array(Obj({}), { description: 'As configured (single-key objects), each value masked' }),
  successStatusCodes: Type.Array(Type.Integer()),
  ingressUrl: Type.String({ description: 'Where the provider must send its webhooks' }),
  signingSecret: Type.String({ description: 'Our Standard Webhooks secret, masked (shown in full only when issued)' }),
  enabled: Type.Boolean(),
  verification: Type.Unknown({ description: '{scheme, ready, detail}: what the ingress checks, and whether it can yet' }),
}, 'A relay configuration. Secrets are masked; see docs/webhooks.md.');

const Delivery = Obj({
  id: Type.String(), eventId: Type.String(), state: Type.String(),
  attempts: Type.Array(Type.Unknown()), nextAttemptAt: Type.Union([Type.Number(), Type.Null()]), createdAt: Type.Number(),
}, 'One forward of a received event, with every attempt (times in unix seconds)');

export async function relayRoutes(app: App, { relays, config }: { relays: RelayService; config: Config }): Promise<void> {
  app.get('/api/v2/webhookRelay/types', {
    schema: {
      operationId: 'listWebhookRelayTypes', tags, security: Security, summary: 'List supported Webhook Relay types',
      response: { 200: Envelope({ types: Type.Array(Obj({ name: Type.String(), description: Type.String() })) }), ...errors() },
    },
  }, () => relays.types());

  app.get('/api/v2/webhookRelay', {
    schema: {
      operationId: 'listWebhookRelays', tags, security: Security, summary: 'List all webhook relay configurations',
      description: '404 when the organization has none, as the contract specifies.',
      querystring: TargetQuery,
      response: { 200: Envelope({ configs: Type.Array(RelayConfig) }), ...errors(403, 404) },
    },
  }, async (req) => relays.list(req.scope, req.query.targetAccountId));

  app.post('/api/v2/webhookRelay/:type', {
    schema: {
      operationId: 'upsertWebhookRelay', tags, security: Security, summary: 'Create or update a webhook relay',
      description: 'Creates the relay for this type, or updates it (fields left out keep their values). '
        + 'The answer carries the configuration and, when a relay is created or rotateSigningSecret is set, our signingSecret in full.',
      params: TypeParams, querystring: TargetQuery, body: RelayBody,
      response: {
        200: Envelope({
          config: RelayConfig,
          signingSecret: Type.Optional(Type.String()),
          username: Type.Optional(Type.String({ description: 'chargebee: the basic-auth username we generated (none was sent), shown this once' })),
          password: Type.Optional(Type.String({ description: 'chargebee: the basic-auth password we generated (none was sent), shown this once' })),
        }),
        ...errors(400, 403, 404, 409),
      },
    },
  }, async (req) => relays.upsert(req.scope, req.query.targetAccountId, req.params.type, req.body));

  app.get('/api/v2/webhookRelay/:type', {
    schema: {
      operationId: 'getWebhookRelay', tags, security: Security, summary: 'Get a webhook relay configuration',
      params: TypeParams, querystring: TargetQuery,
      response: { 200: Envelope({ config: RelayConfig }), ...errors(403, 404) },
    },
  }, async (req) => relays.get(req.scope, req.query.targetAccountId, req.params.type));

  app.delete('/api/v2/webhookRelay/:type', {
    schema: {
      operationId: 'deleteWebhookRelay', tags, security: Security, summary: 'Delete a webhook relay configuration',
      description: 'Its ingress URL stops answering; received events and their deliveries are deleted with it.',
      params: TypeParams, querystring: TargetQuery,
      response: { 200: Envelope({}), ...errors(403, 404) },
    },
  }, async (req) => relays.remove(req.scope, req.query.targetAccountId, req.params.type));

  app.get('/api/v2/webhookRelay/:type/deliveries', {
    schema: {
      operationId: 'listWebhookRelayDeliveries', tags, security: Security, summary: 'Deliveries of a relay, newest first (callplane extension)',
      params: TypeParams,
      querystring: Type.Object({
        ...TargetQuery.properties,
        ...LimitOffsetQuery,
      }),
      response: { 200: Envelope({ total: Type.Number(), deliveries: Type.Array(Delivery) }), ...errors(400, 403, 404) },
    },
  }, async (req) => relays.deliveries(req.scope, req.query.targetAccountId, req.params.type, req.query));

  app.post('/api/v2/webhookRelay/:type/deliveries/:id/replay', {
    schema: {
      operationId: 'replayWebhookRelayDelivery', tags, security: Security, summary: 'Deliver a received event again (callplane extension)',
      description: 'A new delivery of the same event (same webhook-id), due now. 409 while the original is still pending or running.',
      params: Type.Object({ ...TypeParams.properties, id: Type.String({ minLength: 1, maxLength: 200, description: 'Delivery id' }) }),
      querystring: TargetQuery,
      response: { 200: Envelope({ delivery: Delivery }), ...errors(403, 404, 409) },
    },
  }, async (req) => relays.replay(req.scope, req.query.targetAccountId, req.params.type, req.params.id));

  // Its own plugin scope: the ingress parses every body as raw bytes; the API above stays JSON.
  await app.register(relayIngress, { relays, config });
}
