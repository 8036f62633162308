// Phone numbers: search the numbering provider's inventory, assign (buy), bring your own, return,
// and list (an extension). docs/numbers.md; the contract's choices in docs/api.md.
import { Type } from '@sinclair/typebox';
import { Conflict } from '../../http/errors.ts';
import type { App } from '../../http/types.ts';
import { AccountId, Envelope, errors, Obj, Security } from '../../http/schemas.ts';
import { Caps, Held } from './schemas.ts';
import type { NumbersService } from './service.ts';

/**
 * Where a simulated text to one of a SIMULATED provider's numbers goes: the SMS channel's
 * receiveSimulated (src/modules/conversations/sms.ts), handed in by buildApp because conversations
 * sits above numbers (docs/architecture.md, "The order of modules").
 */
export interface SimulatedTexts {
  receiveSimulated(orgId: number, holder: number | null, text: { from: string; to: string; body: string }, log: { warn(obj: object, msg: string): void }):
  Promise<{ kind: 'queued' | 'recorded'; messageId: string; conversationId: string } | { kind: 'duplicate' | 'no-agent' }>;
}

const tags = ['Phone Numbers'];
const Country = Type.String({ minLength: 1, maxLength: 10, description: 'ISO 3166 alpha-2 country code (US, GB)' });
const Place = (what: string) => Type.Optional(Type.String({ maxLength: 100, description: what }));
const City = Place('City (locality) to search in');
const Region = Place('Region to search in (in the US, the state: TX); not every provider can filter by it in every country');
const Target = Type.Object({ targetAccountId: Type.Optional(AccountId('Organization or agent account acting on; resellers and partners must name one')) });
const NumberField = Type.String({ minLength: 1, maxLength: 64, description: 'Phone number, E.164 (+12145551234)' });
const Available = Obj({
  number: Type.String({ description: 'E.164' }), locality: Type.Union([Type.String(), Type.Null()]), region: Type.Union([Type.String(), Type.Null()]),
  country: Type.String(), capabilities: Caps,
  monthlyPrice: Type.Union([Obj({ amount: Type.String(), currency: Type.String() }), Type.Null()], { description: 'When the provider says it' }),
  simulated: Type.Boolean(),
});
const SearchAnswer = Envelope({
  provider: Type.String({ description: 'The numbering provider searched (simulated when the organization has none)' }),
  simulated: Type.Boolean({ description: 'True for the simulated inventory: fictional numbers that reach no one' }),
  limit: Type.Integer({ description: 'At most this many numbers are answered' }),
  numbers: Type.Array(Available),
  phraseDigits: Type.Optional(Type.String({ description: 'What the phrase became on a keypad (* is any one digit)' })),
  prefix: Type.Optional(Type.String()), strict: Type.Optional(Type.Boolean()),
  widenedTo: Type.Optional(Type.String({ description: 'With strict false and nothing matching: the shorter prefix (the general area) searched instead' })),
});
const searchErrors = errors(400, 403, 404, 502, 504);

export async function numbersRoutes(app: App, { numbers, sms }: { numbers: NumbersService; sms: SimulatedTexts }): Promise<void> {
  app.post('/api/v2/phoneNumber/search/local/locality', {
    schema: { operationId: 'searchNumbersByLocality', tags, security: Security,
      summary: `Search local numbers by city, region and country (docs/numbers.md)`, querystring: Target,
      body: Type.Object({ country: Country, city: City, region: Region }),
      response: { 200: SearchAnswer, ...searchErrors } },
  }, async (req) => numbers.search(req.scope, req.query.targetAccountId, 'locality', req.body));

  app.post('/api/v2/phoneNumber/search/local/prefix', {
    schema: { operationId: 'searchNumbersByPrefix', tags, security: Security,
      summary: 'Search local numbers whose national number starts with a prefix (an area code: 216)', querystring: Target,
      body: Type.Object({
        prefix: Type.String({ minLength: 1, maxLength: 20, description: 'Digits the national number starts with (no country code)' }),
        country: Country,
        strict: Type.Optional(Type.Boolean({ default: true, description: 'When false and nothing matches, numbers of the same general area (the area code)' })),
      }),
      response: { 200: SearchAnswer, ...searchErrors } },
  }, async (req) => numbers.search(req.scope, req.query.targetAccountId, 'prefix', req.body));

  app.post('/api/v2/phoneNumber/search/local/phrase', {
    schema: { operationId: 'searchNumbersByPhrase', tags, security: Security,
      summary: 'Search local numbers containing a phrase: letters become keypad digits, * is any one digit', querystring: Target,
      body: Type.Object({
        phrase: Type.String({ minLength: 1, maxLength: 20, description: 'Letters, digits and * (*bitcoin* → *2482646*)' }),
        country: Country, region: Region, city: City,
      }),
      response: { 200: SearchAnswer, ...searchErrors } },
  }, async (req) => numbers.search(req.scope, req.query.targetAccountId, 'phrase', req.body));

  app.post('/api/v2/phoneNumber/assign', {
    schema: { operationId: 'assignNumber', tags, security: Security,
      summary: "Buy a number at the organization's numbering provider and bind it to the agent (the token's, targetAccountId's, or the organization's first)",
      querystring: Target, body: Type.Object({ number: NumberField, country: Country }),
      response: { 200: Envelope({ simulated: Type.Boolean(), phoneNumber: Held }), ...errors(400, 403, 404, 409, 502, 504) } },
  }, async (req) => numbers.assign(req.scope, req.query.targetAccountId, req.body));

  app.post('/api/v2/phoneNumber/byo/assign', {
    schema: { operationId: 'assignByoNumber', tags, security: Security,
      summary: 'Bind a number the customer owns elsewhere to an agent (reseller or partner token, targetAccountId required)',
      querystring: Target, body: Type.Object({ number: NumberField }),
      response: { 200: Envelope({
        phoneNumber: Held,
        webhooks: Obj({ voiceUrl: Type.String(), voiceStatusUrl: Type.String(), smsUrl: Type.String() }, 'Where the customer points the number at their provider'),
      }), ...errors(400, 403, 404, 409) } },
  }, async (req) => numbers.byoAssign(req.scope, req.query.targetAccountId, req.body));

  app.post('/api/v2/phoneNumber/return', {
    schema: { operationId: 'returnNumber', tags, security: Security,
      summary: 'Release a bought number at its provider and unbind it; a BYO number is only unbound (organization, reseller or partner token)',
      querystring: Target, body: Type.Object({ number: NumberField }),
      response: { 200: Envelope({ number: Type.String(), released: Type.Boolean({ description: 'Released at the provider (false for BYO)' }) }), ...errors(400, 403, 404, 409, 502, 504) } },
  }, async (req) => numbers.return(req.scope, req.query.targetAccountId, req.body));

  app.post('/api/v2/phoneNumber/simulate/text', {
    schema: { operationId: 'simulateTextToNumber', tags, security: Security,
      summary: 'A text arriving on one of your SIMULATED numbers, as if sent from `from` (no network delivers texts to them) — an extension',
      querystring: Target,
      body: Type.Object({
        number: NumberField,
        from: Type.String({ minLength: 1, maxLength: 64, description: 'The sender, E.164' }),
        body: Type.String({ minLength: 1, maxLength: 1600 }),
      }),
      response: { 200: Envelope({ simulated: Type.Boolean(), conversationId: Type.String(), messageId: Type.String() }), ...errors(400, 403, 404, 409) } },
  }, async (req) => {
    const held = await numbers.simulatedHolder(req.scope, req.query.targetAccountId, req.body.number);
    const r = await sms.receiveSimulated(held.orgId, held.agentId, { from: req.body.from, to: held.number, body: req.body.body }, req.log);
    if (r.kind !== 'queued' && r.kind !== 'recorded') throw new Conflict(`organization ${held.orgId} has no agent to answer the text`);
    return {
      success: true, simulated: true,
      message: `Text to ${held.number} received (simulated)${r.kind === 'recorded' ? '; not answered: the sender is on a do-not-call list' : ''}`, conversationId: r.conversationId, messageId: r.messageId };
  });

  app.get('/api/v2/phoneNumbers', {
    schema: { operationId: 'listNumbers', tags, security: Security,
      summary: "The organization's numbers and the agent holding each (an agent's token or id: its own) — an extension",
      querystring: Target,
      response: { 200: Envelope({ phoneNumbers: Type.Array(Held) }), ...errors(403, 404) } },
  }, async (req) => numbers.list(req.scope, req.query.targetAccountId));
}
