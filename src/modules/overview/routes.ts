// GET /api/v2/stats/overview (callplane extension): a reseller's or partner's overview across its
// organizations (service.ts; docs/api.md, "Overview"; the console's #/overview, docs/console.md).
import { Type } from '@sinclair/typebox';
import type { App } from '../../http/types.ts';
import { AccountId, Envelope, errors, Nullable, Security } from '../../http/schemas.ts';
import { MAX_PAGE, type OverviewService } from './service.ts';

const Figures = {
  calls: Type.Integer({ description: 'Calls (the usage rollups\' calls)' }),
  texts: Type.Integer(), callMinutes: Type.Integer(), modelTokens: Type.Integer(), conversations: Type.Integer(),
  analysed: Type.Integer({ description: 'Conversations whose analysis finished in the window' }),
  succeeded: Type.Integer({ description: 'Of those, the ones whose outcome is in successOutcomes' }),
  successRate: Nullable(Type.Number({ description: 'succeeded ÷ analysed (0–1); null when nothing was analysed' })),
  currency: Nullable(Type.String()),
  cost: Nullable(Type.Number({ description: 'As GET /api/v2/stats/usage costs it (cost:total): plan and add-on prices plus usage past the included amounts, in the currency\'s major unit; null without a plan (or, in totals, with mixed currencies)' })),
  costPerCall: Nullable(Type.Number({ description: 'cost ÷ calls; null without calls or a cost' })),
};

export async function overviewRoutes(app: App, opts: { overview: OverviewService }): Promise<void> {
  app.get('/api/v2/stats/overview', {
    schema: {
      operationId: 'viewOverview', tags: ['Billing'], security: Security,
      summary: 'A reseller\'s or partner\'s overview across its organizations (callplane extension)',
      description: 'Per organization (paged, by id) and in total over a window of local days: calls, texts, minutes, model tokens, conversations, '
        + 'the success rate of the analysed conversations, cost and cost per call; calls and texts per day; and the organizations whose usage '
        + 'in the window reached nearLimitShare of an amount their plan includes. The totals and days are GET /api/v2/stats/usage\'s for the '
        + 'same account and window. Resellers and partners only (an organization or agent: 403; it reads its own with GET /api/v2/stats/usage). docs/api.md, "Overview".',
      querystring: Type.Object({
        targetAccountId: Type.Optional(AccountId('A reseller below the partner to read for; default: the token\'s own account')),
        startDate: Type.Optional(Type.String({ maxLength: 40, description: 'ISO date or date-time; default: the first day of the current month in the account\'s time zone' })),
        endDate: Type.Optional(Type.String({ maxLength: 40, description: 'ISO date or date-time; default: today' })),
        limit: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_PAGE, description: `Organizations per page (1–${MAX_PAGE}, default 25)` })),
        offset: Type.Optional(Type.Integer({ minimum: 0, description: 'Organizations skipped (by id)' })),
        nearLimitShare: Type.Optional(Type.Number({ exclusiveMinimum: 0, maximum: 1, description: 'The share of an included amount that puts an organization on the near-limit list (default 0.8)' })),
      }),
      response: {
        200: Envelope({
          accountId: Type.Integer(), accountType: Type.String(), timezone: Type.String({ description: 'The zone the days are in (the account\'s)' }),
          window: Type.Object({ startDate: Type.String({ description: 'YYYY-MM-DD' }), endDate: Type.String({ description: 'YYYY-MM-DD' }) }),
          successOutcomes: Type.Array(Type.String(), { description: 'The analysis outcomes counted as a success' }),
          nearLimitShare: Type.Number(),
          totals: Type.Object({ organizations: Type.Integer(), ...Figures }),
          days: Type.Array(Type.Object({ date: Type.String(), calls: Type.Integer(), texts: Type.Integer() })),
          organizations: Type.Array(Type.Object({
            organizationId: Type.Integer(), name: Type.String(), active: Type.Boolean(), productPlanId: Nullable(Type.String()), ...Figures,
          })),
          total: Type.Integer({ description: 'Organizations in all' }), limit: Type.Integer(), offset: Type.Integer(),
          nearLimit: Type.Array(Type.Object({
            organizationId: Type.Integer(), name: Type.String(),
            item: Type.String({ description: 'callMinutes, texts, tasks, conversations or modelTokens' }),
            used: Type.Number({ description: 'Used in the window' }), included: Type.Number({ description: 'What the plan and add-ons include for a term' }),
            share: Type.Number({ description: 'used ÷ included' }),
          }), { description: 'Fullest first, at most 100' }),
        }),
        ...errors(400, 403, 404),
      },
    },
  }, async (req) => opts.overview.overview(req.scope, req.query));
}
