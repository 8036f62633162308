// GET /api/v2/stats/usage: what an organization (or a reseller's or partner's organizations) used,
// and what it costs under their plans; POST /api/v2/billing/billingPeriod: an organization's next
// billing period, set by its reseller or partner. docs/billing.md ("Usage") and docs/api.md describe it.
import { Type } from '@sinclair/typebox';
import type { App } from '../../http/types.ts';
import { AccountId, Envelope, errors, Security, Nullable } from '../../http/schemas.ts';
import type { UsageService } from './usage.ts';

const Figures = (description: string) => Type.Object({}, {
  additionalProperties: true,
  description: `${description}: callMinutes, texts, tasks, conversations, modelTokens (with allItems also calls, callSeconds, the staging test chat's testConversations, testTokens (never billed), and simulatedCallMinutes, simulatedTexts, simulatedTokens (of the figures above, made by the SIMULATED carrier and model engine), and each speech provider's use in its own unit: speech:<vendor>:audioSeconds (recognised) and speech:<vendor>:characters (synthesized)); with giveCosts or combineCosts the cost:<item>, cost:plan and cost:total keys in the currency's major unit`,
});

export async function usageRoutes(app: App, opts: { usage: UsageService }): Promise<void> {
  const { usage } = opts;
  app.get('/api/v2/stats/usage', {
    schema: {
      operationId: 'viewUsage', tags: ['Billing'], security: Security, summary: 'View Usage',
      description: 'Usage from the rollups kept as records are written (docs/billing.md, "Usage"): an organization\'s own, or summed over a reseller\'s or partner\'s organizations; days in the account\'s time zone.',
      querystring: Type.Object({
        targetAccountId: Type.Optional(AccountId('The account whose usage to read (an ancestor reading for it); default: the token\'s own')),
        giveCosts: Type.Optional(Type.Boolean({ description: 'Returns values for keys with cost: prefix.' })),
        combineCosts: Type.Optional(Type.Boolean({ description: 'Returns cost values and usage values in the same response.' })),
        billingPeriod: Type.Optional(Type.String({ description: 'Accepts previous or current for previous and current billing periods.' })),
        timeseries: Type.Optional(Type.Boolean({ description: 'Returns data as a timeseries.' })),
        startDate: Type.Optional(Type.String({ maxLength: 40, description: 'ISO date-time string, defaults to billing period start date.' })),
        endDate: Type.Optional(Type.String({ maxLength: 40, description: 'ISO date-time string, optional, defaults to today.' })),
        frequency: Type.Optional(Type.String({ description: 'Frequency value. Allowed: day, month, year. Defaults to day.' })),
        allItems: Type.Optional(Type.Boolean({ description: 'Show all product items and not just the current plan.' })),
      }),
      response: {
        200: Envelope({
          accountId: Type.Integer(), accountType: Type.String(), organizations: Type.Integer({ description: 'Organizations summed' }),
          timezone: Type.String({ description: 'The zone the days are in' }),
          billingPeriod: Type.Object({
            period: Nullable(Type.String({ description: 'current or previous; null when startDate or endDate chose the range' })),
            startDate: Type.String({ description: 'First local day (YYYY-MM-DD)' }), endDate: Type.String({ description: 'Last local day (YYYY-MM-DD)' }),
            startDateTimestamp: Nullable(Type.Integer({ description: 'The subscription period\'s start (seconds); null without one' })),
            endDateTimestamp: Nullable(Type.Integer({ description: 'The subscription period\'s end (seconds); null without one' })),
          }),
          productPlanId: Nullable(Type.String()),
          included: Nullable(Type.Object({}, { additionalProperties: true, description: 'What the plan and its add-ons include in the period (null = unlimited); an organization only' })),
          addons: Nullable(Type.Array(Type.String(), { description: 'The add-ons counted in the range (their adds are in included); an organization only' })),
          overIncluded: Type.Object({}, { additionalProperties: true, description: 'Units past the included amounts, per billed item, summed over the organizations (sold as overage or not)' }),
          currency: Nullable(Type.String()),
          usage: Figures('Totals over the range'),
          timeseries: Nullable(Type.Array(Type.Object({ date: Type.String({ description: 'YYYY-MM-DD, YYYY-MM or YYYY' }) }, { additionalProperties: true }))),
        }),
        ...errors(400, 403, 404),
      },
    },
  }, async (req) => usage.usage(req.scope, req.query));

  const Period = Type.Object({
    startDateTimestamp: Type.Integer({ description: 'Seconds since epoch' }), endDateTimestamp: Type.Integer({ description: 'Seconds since epoch' }),
  });
  app.post('/api/v2/billing/billingPeriod', {
    schema: {
      operationId: 'startBillingPeriod', tags: ['Billing'], security: Security, summary: 'Start a new billing period for an organization',
      description: 'Reseller/Partner only. The period starts after the current one began and no later than it ends (earlier closes the current one there); a later start leaves a gap, refused unless allowGap is true.',
      querystring: Type.Object({
        targetAccountId: Type.Optional(AccountId('Account ID to update billing period for')),
        externalAccountId: Type.Optional(Type.String({ maxLength: 200, description: 'External account identifier mapped to the target account' })),
      }),
      body: Type.Object({
        startDateTimestamp: Type.Integer({ minimum: 0, maximum: 253402300799, description: 'Billing period start timestamp (seconds since epoch)' }),
        endDateTimestamp: Type.Integer({ minimum: 0, maximum: 253402300799, description: 'Billing period end timestamp (seconds since epoch)' }),
        allowGap: Type.Optional(Type.Boolean({ description: 'callplane extension: accept a start after the current period ends' })),
      }),
      response: {
        200: Envelope({
          organizationId: Type.Integer(), billingPeriod: Period,
          previousBillingPeriod: Nullable(Period),
        }),
        ...errors(400, 403, 404),
      },
    },
  }, async (req) => usage.setBillingPeriod(req.scope, req.query, req.body));
}
