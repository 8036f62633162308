// POST /api/v2/billing/billingSystemConfig (the contract's), its reading, GET /api/v2/billing/billingSystemSettings (an extension: the contract's path keeps only its POST), and the public
// ingress each processor posts its webhooks to: /api/v2/billing/webhook/{accountId}/stripe|chargebee.
// docs/billing.md, "Payment processors"; docs/api.md, "Billing systems".
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { App } from '../../http/types.ts';
import { AccountId, Envelope, errors, Obj, Security, Nullable } from '../../http/schemas.ts';
import type { BillingSystemService } from './billing-systems.ts';
import { MAX_WEBHOOK_BYTES, type ProcessorSubscriptions } from './processor-subscriptions.ts';
import { PROCESSORS, type ProcessorType } from './processors.ts';

const tags = ['Billing'];
const TargetQuery = Type.Object({
  targetAccountId: Type.Optional(AccountId('The reseller or partner whose billing system it is (a partner acting for one of its resellers); default: the token\'s own')),
});
const Key = (description: string) => Type.Optional(Type.String({ maxLength: 500, description }));

const BillingSystem = Obj({
  accountId: Type.Integer({ description: 'The reseller or partner whose billing system it is' }),
  billingSystemType: Type.String({ description: 'stripe or chargebee' }),
  apiKey: Type.String({ description: 'Masked' }),
  publishableKey: Nullable(Type.String({ description: 'Masked' })),
  webhookSigningKey: Nullable(Type.String({ description: 'Stripe: masked; null for Chargebee' })),
  site: Nullable(Type.String({ description: 'Chargebee: the site\'s name; null for Stripe' })),
  webhookUsername: Nullable(Type.String({ description: 'Chargebee: the webhook\'s basic-auth user name' })),
  webhookPassword: Nullable(Type.String({ description: 'Chargebee: masked' })),
  webhookUrl: Type.String({ description: 'The URL to configure as the webhook endpoint at the processor' }),
  verifiedAt: Type.Integer({ description: 'When the processor last accepted apiKey (unix seconds)' }),
  createdAt: Type.Integer(), updatedAt: Type.Integer(),
}, 'A billing system; every key masked');

export async function billingSystemRoutes(app: App, deps: { billingSystems: BillingSystemService; processorSubscriptions: ProcessorSubscriptions }) {
  const { billingSystems } = deps;

  app.post('/api/v2/billing/billingSystemConfig', {
    schema: {
      operationId: 'billingSystemConfig', tags, security: Security, summary: 'Provision Billing System Configuration',
      description: 'Reseller or partner (a partner may name one of its resellers with targetAccountId). Stripe needs apiKey, publishableKey and webhookSigningKey; Chargebee apiKey, publishableKey, site, webhookUsername and webhookPassword. An update of the same type keeps keys not sent again, except apiKey when the Chargebee site changes. The apiKey is checked with the processor before it is kept: 400 when the processor refuses it, 502 when the processor cannot be reached.',
      querystring: TargetQuery,
      body: Type.Object({
        billingSystemType: Type.String({ description: 'stripe or chargebee' }),
        apiKey: Key('Required - API Key used for billing system access'),
        publishableKey: Key('Required - Publishable Key used for embedded checkouts'),
        webhookSigningKey: Key('Required for Stripe only - used for validating webhooks are signed by Stripe'),
        site: Key('Required for Chargebee only - site (without chargebee.com) of your payment system'),
        webhookUsername: Key('Required for Chargebee only - username for webhook authentication'),
        webhookPassword: Key('Required for Chargebee only - password for webhook authentication'),
      }),
      response: { 200: Envelope({ billingSystem: BillingSystem }), ...errors(400, 403, 404, 502) },
    },
  }, async (req) => billingSystems.put(req.scope, req.query.targetAccountId, req.body));

  app.get('/api/v2/billing/billingSystemSettings', {
    schema: {
      operationId: 'getBillingSystemConfig', tags, security: Security, summary: 'View Billing System Configuration (callplane extension)',
      description: 'Reseller or partner: its own billing system, keys masked (null when it has none), and whose billing system its organizations subscribe through (its own, else its partner\'s).',
      querystring: TargetQuery,
      response: {
        200: Envelope({
          billingSystem: Nullable(BillingSystem),
          inEffect: Nullable(Obj({ accountId: Type.Integer(), billingSystemType: Type.String() }, 'The billing system in effect for the account\'s organizations')),
        }),
        ...errors(403, 404),
      },
    },
  }, async (req) => billingSystems.get(req.scope, req.query.targetAccountId));

  await app.register(billingWebhookIngress, { processorSubscriptions: deps.processorSubscriptions });
}

/** The processors' webhooks: public (the processor's signature or basic auth is the credential), the body kept as the bytes received. */
async function billingWebhookIngress(app: FastifyInstance, opts: { processorSubscriptions: ProcessorSubscriptions }): Promise<void> {
  // In this scope only: any content type arrives as a Buffer (Stripe signs the exact bytes).
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: MAX_WEBHOOK_BYTES }, (_req, body, done) => done(null, body));
  app.post('/api/v2/billing/webhook/:accountId/:processor', { config: { public: true }, schema: { hide: true } }, async (req, reply) => {
    const params = req.params as { accountId: string; processor: string };
    const accountId = /^\d{1,15}$/.test(params.accountId) ? Number(params.accountId) : 0;
    if (!(PROCESSORS as readonly string[]).includes(params.processor)) {
      return reply.status(404).send({ success: false, message: `Route POST ${req.url.split('?')[0]} not found`, requestId: req.id });
    }
    const headers: Record<string, string | undefined> = {};
    for (const [name, value] of Object.entries(req.headers)) headers[name] = Array.isArray(value) ? value[0] : value;
    const result = await opts.processorSubscriptions.receive({
      accountId, type: params.processor as ProcessorType, headers, rawBody: Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0),
    });
    return { success: true, ...(result.duplicate ? { duplicate: true } : {}) };
  });
}
