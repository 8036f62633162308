// Accounts operations of the contract: resellers, organizations, agent accounts, details, search.
import { Type } from '@sinclair/typebox';
import type { App } from '../../http/types.ts';
import { AccountId, Envelope, errors, Obj, PaginationQuery, Security } from '../../http/schemas.ts';
import type { AccountService } from './service.ts';

const tags = ['Accounts'];
const Str = (description?: string) => Type.String({ maxLength: 500, ...(description ? { description } : {}) });
// `nullable` rather than a union with Type.Null(): the validator coerces types, and in a union whose
// first branch is a string it turns null into '' before the null branch is tried, so null never cleared.
const Nullable = (description: string) => Type.Unsafe<string | null>({ type: 'string', nullable: true, maxLength: 500, description });
// A plain string enum, so a bad value is answered "<field> must be one of: …" (a union of literals
// reports only its first branch: 'must be "on"').
const OneOf = <T extends string>(values: readonly T[], description?: string) =>
  Type.Unsafe<T>({ type: 'string', enum: [...values], ...(description ? { description } : {}) });
const HipaaSetting = OneOf(['on', 'off', 'inherit'] as const);
const OrgAccountType = OneOf(['internal', 'customer'] as const);
const Active = Type.Optional(Type.Boolean({ description: 'Only rows with this active state' }));

const Integration = Type.Object({
  appId: Type.String({ minLength: 1, maxLength: 200 }),
  appVersion: Type.String({ minLength: 1, maxLength: 50 }),
  appData: Type.Record(Type.String(), Type.String({ maxLength: 4000 }), { description: 'App settings; values that look like secrets are masked in answers' }),
});
const Integrations = Type.Optional(Type.Array(Integration, { maxItems: 50, description: 'Third-party app integrations' }));

const NumberingProvider = Type.Object({
  providerId: Type.String({ minLength: 1, maxLength: 50, description: 'twilio or simulated (see GET /api/v2/numberingProviders)' }),
  default: Type.Optional(Type.Boolean()),
  enabled: Type.Optional(Type.Boolean()),
  config: Type.Record(Type.String(), Type.String({ maxLength: 4000 })),
});

const AccountView = Obj({ id: Type.Integer(), accountType: Type.String(), name: Type.String() }, 'An account at any level of the ladder');
const Listing = (key: string) => Envelope({ [key]: Type.Array(AccountView), total: Type.Integer() });

export async function accountRoutes(app: App, { accounts }: { accounts: AccountService }): Promise<void> {
  app.post('/api/v2/createReseller', {
    schema: {
      operationId: 'createReseller', tags, security: Security, summary: 'Create a new reseller (partner token)',
      querystring: Type.Object({ targetPartnerId: AccountId('Partner id to create the reseller in') }),
      body: Type.Object({
        resellerName: Type.String({ minLength: 1, maxLength: 200 }),
        email: Type.Optional(Type.String({ format: 'email', maxLength: 320 })),
        offeredProductPlanId: Type.Optional(Str()),
        productPlanId: Type.Optional(Str()),
        sellPlanId: Type.Optional(Str('callplane extension: the product plan new organizations of this reseller get by default')),
        hipaaEnabledDefault: Type.Optional(Type.Boolean()),
        resellerStatus: Type.Optional(OneOf(['enabled', 'disabled'] as const)),
      }),
      response: {
        201: Envelope({
          organization: Type.String({ description: 'The new reseller\'s id, as a string (the contract types it as a string)' }),
          reseller: AccountView,
        }),
        ...errors(400, 403, 404, 409),
      },
    },
  }, async (req, reply) => reply.status(201).send(await accounts.createReseller(req.scope, req.query.targetPartnerId, req.body)));

  app.get('/api/v2/listResellers', {
    schema: {
      operationId: 'listResellers', tags, security: Security, summary: 'List resellers (partner token)',
      querystring: Type.Object({ targetPartnerId: AccountId('Partner id to list resellers in'), ...PaginationQuery, active: Active }),
      response: { 200: Listing('resellers'), ...errors(400, 403, 404) },
    },
  }, async (req) => accounts.listResellers(req.scope, req.query.targetPartnerId, req.query));

  app.post('/api/v2/createOrganization', {
    schema: {
      operationId: 'createOrganization', tags, security: Security, summary: 'Create a new organization (reseller or partner token)',
      querystring: Type.Object({ targetResellerId: AccountId('Reseller id under which the organization is created') }),
      body: Type.Object({
        orgName: Type.String({ minLength: 1, maxLength: 200 }),
        email: Type.Optional(Type.String({ format: 'email', maxLength: 320 })),
        accountName: Type.Optional(Str('Name of the default agent account created with the organization')),
        orgAccountType: Type.Optional(OrgAccountType),
        productPlanId: Type.Optional(Str('Defaults to the reseller sell-plan')),
        offeredProductPlanId: Type.Optional(Str()),
        externalAccountId: Type.Optional(Str()),
        externalBillingId: Type.Optional(Str()),
        hipaaSetting: Type.Optional(HipaaSetting),
        numberingProviders: Type.Optional(Type.Array(NumberingProvider, { maxItems: 10 })),
        vidaPremium: Type.Optional(Type.Boolean()),
        smsEnabled: Type.Optional(Type.Boolean()),
        smsBrandId: Type.Optional(Str()),
        smsCampaignId: Type.Optional(Str()),
        integrations: Integrations,
        timezone: Type.Optional(Str('callplane extension: IANA time zone of the organization (task limits, daily counts)')),
      }),
      response: { 201: Envelope({ organization: AccountView }), ...errors(400, 403, 404, 409) },
    },
  }, async (req, reply) => reply.status(201).send(await accounts.createOrganization(req.scope, req.query.targetResellerId, req.body)));

  app.delete('/api/v2/deleteOrganization', {
    schema: {
      operationId: 'deleteOrganization', tags, security: Security,
      summary: 'Delete an organization and everything under it (agents, tokens, members, settings) in one transaction',
      querystring: Type.Object({ targetResellerId: AccountId('Reseller id the organization belongs to') }),
      body: Type.Object({ targetOrganizationId: AccountId('Organization id to delete') }),
      response: { 200: Envelope({}), ...errors(400, 403, 404) },
    },
  }, async (req) => accounts.deleteOrganization(req.scope, req.query.targetResellerId, req.body.targetOrganizationId));

  app.get('/api/v2/listOrganizations', {
    schema: {
      operationId: 'listOrganizations', tags, security: Security, summary: 'List organizations of a reseller',
      querystring: Type.Object({ targetResellerId: AccountId('Reseller id to list organizations in'), ...PaginationQuery, active: Active }),
      response: { 200: Listing('organizations'), ...errors(400, 403, 404) },
    },
  }, async (req) => accounts.listOrganizations(req.scope, req.query.targetResellerId, req.query));

  const TargetAccount = Type.Object({ targetAccountId: Type.Optional(AccountId('Act on this descendant account instead of your own')) });

  app.get('/api/v2/account', {
    schema: {
      operationId: 'getAccount', tags, security: Security, summary: 'Get account details',
      querystring: TargetAccount,
      response: { 200: Envelope({ id: Type.Integer(), username: Type.String(), details: Obj({}, 'The account; an agent\'s carries phoneNumbers, the numbers it holds (a callplane extension, docs/numbers.md)') }), ...errors(400, 404) },
    },
  }, async (req) => accounts.getAccount(req.scope, req.query.targetAccountId));

  app.post('/api/v2/account', {
    schema: {
      operationId: 'updateAccountDetails', tags, security: Security, summary: 'Update profile details of an account',
      querystring: TargetAccount,
      body: Type.Object({
        name: Type.Optional(Str()), partnerName: Type.Optional(Str()), resellerName: Type.Optional(Str()),
        orgName: Type.Optional(Str()), accountName: Type.Optional(Str()), firstName: Type.Optional(Str()),
        lastName: Type.Optional(Str()), description: Type.Optional(Type.String({ maxLength: 5000 })),
        image: Type.Optional(Type.String({ maxLength: 2000 })), businessName: Type.Optional(Str()),
        businessAddress: Type.Optional(Str()), email: Type.Optional(Type.String({ format: 'email', maxLength: 320 })),
      }),
      response: { 200: Envelope({ account: AccountView }), ...errors(400, 404) },
    },
  }, async (req) => accounts.updateAccountDetails(req.scope, req.query.targetAccountId, req.body));

  app.get('/api/v2/listAccounts', {
    schema: {
      operationId: 'listAccounts', tags, security: Security, summary: 'List agent accounts of an organization',
      querystring: Type.Object({ targetOrganizationId: AccountId('Organization id to list accounts in'), ...PaginationQuery, active: Active }),
      response: { 200: Listing('accounts'), ...errors(400, 404) },
    },
  }, async (req) => accounts.listAccounts(req.scope, req.query.targetOrganizationId, req.query));

  app.post('/api/v2/createAccount', {
    schema: {
      operationId: 'createAccount', tags, security: Security, summary: 'Create a new agent account in an organization',
      querystring: Type.Object({ targetOrganizationId: AccountId('Organization id to create the account in') }),
      body: Type.Object({
        accountName: Type.Optional(Str()), externalAccountId: Type.Optional(Str()),
        externalBillingId: Type.Optional(Str()), integrations: Integrations,
      }),
      response: { 201: Envelope({ account: Type.String({ description: 'The new agent account id' }), accountId: Type.Integer() }), ...errors(400, 404, 409) },
    },
  }, async (req, reply) => reply.status(201).send(await accounts.createAccount(req.scope, req.query.targetOrganizationId, req.body)));

  app.delete('/api/v2/deleteAccount', {
    schema: {
      operationId: 'deleteAccount', tags, security: Security, summary: 'Delete an agent account and its tokens',
      querystring: Type.Object({ targetOrganizationId: AccountId('Organization id the account belongs to') }),
      body: Type.Object({ targetAccountId: AccountId('Agent account id to delete') }),
      response: { 200: Envelope({}), ...errors(400, 403, 404) },
    },
  }, async (req) => accounts.deleteAccount(req.scope, req.query.targetOrganizationId, req.body.targetAccountId));

  const Settings = Envelope({ updatedSettings: Type.Array(Type.String()), failedSettings: Type.Optional(Type.Array(Type.String())) });

  app.post('/api/v2/updateOrganization', {
    schema: {
      operationId: 'updateOrganization', tags, security: Security, summary: 'Update organization settings (reseller or partner token)',
      querystring: Type.Object({ targetOrganizationId: AccountId('Organization id to update') }),
      body: Type.Object({
        active: Type.Optional(Type.Boolean()), productPlanId: Type.Optional(Str()),
        offeredProductPlanId: Type.Optional(Nullable('Set null to remove the offer')),
        email: Type.Optional(Type.String({ maxLength: 320 })), orgName: Type.Optional(Str()),
        smsEnabled: Type.Optional(Type.Boolean()), smsBrandId: Type.Optional(Nullable('SMS brand id')),
        smsCampaignId: Type.Optional(Nullable('SMS campaign id')), vidaPremium: Type.Optional(Type.Boolean()),
        externalAccountId: Type.Optional(Nullable('Set null to remove it')),
        externalBillingId: Type.Optional(Nullable('Set null to remove it')),
        hipaaSetting: Type.Optional(HipaaSetting),
        orgAccountType: Type.Optional(OrgAccountType),
        timezone: Type.Optional(Str('callplane extension: IANA time zone of the organization (task limits, daily counts)')),
        outboundMessageWebhookUrl: Type.Optional(Nullable('callplane extension: where agents\' replies to receiveMessage go by default; null removes it')),
        rotateOutboundMessageSigningSecret: Type.Optional(Type.Boolean({ description: 'callplane extension: issue a new secret for signing agents\' replies (answered once in full)' })),
      }),
      response: { 200: Envelope({ updatedSettings: Type.Array(Type.String()), failedSettings: Type.Optional(Type.Array(Type.String())),
        outboundMessageSigningSecret: Type.Optional(Type.String({ description: 'The whsec_… secret that signs agents\' replies, answered once when issued' })) }), ...errors(400, 403, 404, 409) },
    },
  }, async (req) => accounts.updateOrganization(req.scope, req.query.targetOrganizationId, req.body));

  app.post('/api/v2/updateAccount', {
    schema: {
      operationId: 'updateAccount', tags, security: Security, summary: 'Update agent account settings (reseller or partner token)',
      querystring: Type.Object({ targetAccountId: AccountId('Agent account id to update') }),
      body: Type.Object({
        active: Type.Optional(Type.Boolean()), accountName: Type.Optional(Str()),
        externalAccountId: Type.Optional(Nullable('Set null to remove it')),
        externalBillingId: Type.Optional(Nullable('Set null to remove it')),
      }),
      response: { 200: Settings, ...errors(400, 403, 404, 409) },
    },
  }, async (req) => accounts.updateAccount(req.scope, req.query.targetAccountId, req.body));

  const Num = (description: string) => Type.Optional(Type.Number({ description }));
  const usage: Record<string, ReturnType<typeof Num>> = {};
  for (const p of ['currentBillingPeriodVoiceMinutes', 'previousBillingPeriodVoiceMinutes', 'currentBillingPeriodMessages',
    'previousBillingPeriodMessages', 'allTimeVoiceMinutes', 'allTimeMessages']) {
    usage[`${p}Min`] = Num(`Minimum ${p}`);
    usage[`${p}Max`] = Num(`Maximum ${p}`);
  }

  app.get('/api/v2/searchAccounts', {
    schema: {
      operationId: 'searchAccounts', tags, security: Security, summary: 'Search accounts in your subtree',
      querystring: Type.Object({
        accountType: Type.String({ minLength: 1, description: 'partner, reseller, organization or account' }),
        queryText: Type.Optional(Type.String({ maxLength: 200, description: 'Matches name, email or externalAccountId' })),
        ...PaginationQuery,
        createdStart: Num('Unix seconds'), createdEnd: Num('Unix seconds'),
        canceledStart: Num('Unix seconds'), canceledEnd: Num('Unix seconds'),
        subscribed: Type.Optional(Type.Boolean()), canceled: Type.Optional(Type.Boolean()), active: Active,
        onboardingComplete: Type.Optional(Type.Boolean()), productPlanId: Type.Optional(Str()),
        productPlanTerm: Type.Optional(Str()), billingSubscriptionId: Type.Optional(Str()),
        billingId: Type.Optional(Str()), externalAccountId: Type.Optional(Str()),
        ...usage,
      }),
      response: {
        200: Type.Object({
          success: Type.Boolean(), message: Type.String(), totalAccounts: Type.Integer(), pageSize: Type.Integer(),
          pageNumber: Type.Integer(), accounts: Type.Array(AccountView),
        }),
        ...errors(400),
      },
    },
  }, async (req) => accounts.searchAccounts(req.scope, req.query));

  app.get('/api/v2/getAccountByExternalId', {
    schema: {
      operationId: 'getAccountByExternalId', tags, security: Security, summary: 'Fetch an account by externalAccountId (reseller or partner token)',
      querystring: Type.Object({ externalAccountId: Type.String({ maxLength: 500 }) }),
      response: { 200: Envelope({ account: AccountView }), ...errors(400, 403, 404) },
    },
  }, async (req) => accounts.getByExternalId(req.scope, req.query.externalAccountId));
}
