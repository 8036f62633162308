// An organization's own speech provider keys, an extension (GET and POST /api/v2/speech/providers,
// PUT and DELETE …/{vendor}); docs/api.md, "Speech providers", and docs/voice.md.
import { Type } from '@sinclair/typebox';
import type { App } from '../../http/types.ts';
import { AccountId, Envelope, errors, Obj, Security } from '../../http/schemas.ts';
import { SPEECH_VENDORS } from '../../speech/vendors.ts';
import { MAX_GOOGLE_KEY_LENGTH, MAX_SPEECH_BASE_URL_LENGTH, type SpeechProvidersService } from './service.ts';

const VENDORS = SPEECH_VENDORS.join(', ');

const Provider = Obj({
  vendor: Type.String({ description: VENDORS }),
  apiKey: Type.String({ description: 'The key, masked (****1234; Google: the last four characters of the key\'s private_key_id)' }),
  serviceAccount: Type.Union([Type.String(), Type.Null()], { description: 'Google: the service account\'s client_email; null for the other vendors' }),
  baseUrl: Type.Union([Type.String(), Type.Null()], { description: 'Where the key is sent; null: the vendor\'s own' }),
  enabled: Type.Boolean({ description: 'Whether calls use it (disabled: the process\'s key, if any, is used instead)' }),
  createdAt: Type.Integer({ description: 'unix seconds' }),
  updatedAt: Type.Integer({ description: 'unix seconds' }),
}, 'An organization\'s own speech provider key');

const TargetOrg = Type.Object({
  targetAccountId: Type.Optional(AccountId('Organization to act on (resellers and partners; an organization token acts on itself)')),
});

const VendorParam = Type.Object({ vendor: Type.String({ maxLength: 40, description: VENDORS }) });

const ApiKey = (description: string) => Type.String({ maxLength: MAX_GOOGLE_KEY_LENGTH, description });
// nullable rather than a union: the validator's coercion would turn null into "" in a union's string branch.
const BaseUrl = Type.Unsafe<string | null>({
  type: 'string', nullable: true, maxLength: MAX_SPEECH_BASE_URL_LENGTH,
  description: 'The vendor\'s base URL (a proxy, a regional endpoint), one for its HTTP and WebSocket APIs; must be a public address. Null or omitted: the vendor\'s own',
});

const AddBody = Type.Object({
  vendor: Type.String({ maxLength: 40, description: VENDORS }),
  apiKey: ApiKey('The provider\'s key (Google: the service account\'s JSON key file, as a string), stored sealed and never answered in full'),
  baseUrl: Type.Optional(BaseUrl),
  enabled: Type.Optional(Type.Boolean({ description: 'Default true' })),
}, { additionalProperties: true });

const UpdateBody = Type.Object({
  apiKey: Type.Optional(ApiKey('A new key. Omitted: the stored key is kept, unless baseUrl changes its origin (scheme, host or port): then 400 until it is sent again')),
  baseUrl: Type.Optional(BaseUrl),
  enabled: Type.Optional(Type.Boolean()),
}, { additionalProperties: true });

export async function speechProviderRoutes(app: App, { speechProviders }: { speechProviders: SpeechProvidersService }): Promise<void> {
  const tags = ['Speech providers'];
  app.get('/api/v2/speech/providers', {
    schema: {
      operationId: 'listSpeechProviders', tags, security: Security, summary: 'List the organization\'s own speech provider keys (masked)',
      querystring: TargetOrg, response: { 200: Envelope({ providers: Type.Array(Provider) }), ...errors(400, 403, 404) },
    },
  }, async (req) => speechProviders.list(req.scope, req.query.targetAccountId));

  app.post('/api/v2/speech/providers', {
    schema: {
      operationId: 'addSpeechProvider', tags, security: Security, summary: 'Add the organization\'s own key for a speech provider',
      description: 'One key per vendor: a second is 409. The organization\'s enabled key is used instead of the deployment\'s.',
      querystring: TargetOrg, body: AddBody,
      response: { 201: Envelope({ provider: Provider }), ...errors(400, 403, 404, 409) },
    },
  }, async (req, reply) => reply.status(201).send(await speechProviders.add(req.scope, req.query.targetAccountId, req.body)));

  app.put('/api/v2/speech/providers/:vendor', {
    schema: {
      operationId: 'updateSpeechProvider', tags, security: Security, summary: 'Change the organization\'s key for a speech provider',
      description: 'Changes what is sent (apiKey, baseUrl, enabled) and keeps the rest. A baseUrl of another origin needs apiKey again.',
      params: VendorParam, querystring: TargetOrg, body: UpdateBody,
      response: { 200: Envelope({ provider: Provider }), ...errors(400, 403, 404) },
    },
  }, async (req) => speechProviders.update(req.scope, req.query.targetAccountId, req.params.vendor, req.body));

  app.delete('/api/v2/speech/providers/:vendor', {
    schema: {
      operationId: 'deleteSpeechProvider', tags, security: Security, summary: 'Delete the organization\'s key for a speech provider',
      params: VendorParam, querystring: TargetOrg, response: { 200: Envelope({}), ...errors(400, 403, 404) },
    },
  }, async (req) => speechProviders.remove(req.scope, req.query.targetAccountId, req.params.vendor));
}
