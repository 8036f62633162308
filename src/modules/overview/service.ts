// A reseller's or partner's overview across its organizations (issue 38, part C;
// GET /api/v2/stats/overview, docs/api.md "Overview"): calls, texts, minutes, model tokens, cost and
// cost per call per organization and in total, the success rate from the analyses' outcomes, calls
// and texts by day, and the organizations near their plan's included amounts. The totals and the
// days are GET /api/v2/stats/usage's own answer for the account (the same service), so the two
// never disagree; each organization's figures are billing's `byOrganization` over the same days.
import type { AccountRow, Db } from '../../db/types.ts';
import type { Scope } from '../../http/auth.ts';
import { Invalid } from '../../http/errors.ts';
import { bool } from '../../db/flags.ts';
import { accountRepo } from '../accounts/repository.ts';
import { localDayStart } from '../billing/periods.ts';
import { BILLED, type OrgFigures, type UsageService } from '../billing/usage.ts';
import { analysisRepo } from '../conversations/repository.ts';

/**
 * The analysis outcomes that count as a success: the person got what they wanted (`resolved`), or
 * asked to be contacted again (`callback-requested`, a next step agreed). Every other outcome,
 * an agent's own ones included, counts as analysed and not a success.
 */
export const SUCCESS_OUTCOMES: readonly string[] = ['resolved', 'callback-requested'];
/** An organization is near its limit at this share of an included amount (unless asked otherwise). */
export const NEAR_LIMIT_SHARE = 0.8;
/** Organizations per page of the answer, at most. */
export const MAX_PAGE = 100;
/** Entries of the near-limit list, at most (the fullest first). */
export const MAX_NEAR_LIMIT = 100;

export interface OverviewQuery {
  targetAccountId?: number;
  startDate?: string; endDate?: string;
  limit?: number; offset?: number;
  nearLimitShare?: number;
}

type Item = (typeof BILLED)[number];

const nextDay = (day: string) => {
  const d = new Date(`${day}T00:00:00Z`);
  d.setUTCDate(d.getUTCDate() + 1);
  return d.toISOString().slice(0, 10);
};
const rate = (part: number, whole: number) => (whole === 0 ? null : part / whole);
/** Money per call, rounded to a millionth of the major unit; null without calls or a cost. */
const perCall = (cost: number | null, calls: number) => (cost === null || calls === 0 ? null : Math.round((cost / calls) * 1e6) / 1e6);

export interface OverviewDeps { db: Db; usage: UsageService }

export function overviewService({ db, usage }: OverviewDeps) {
  return {
    async overview(scope: Scope, q: OverviewQuery) {
      // Organizations (and agents) have their own usage (GET /api/v2/stats/usage): this view is across organizations.
      const subject = await scope.target(q.targetAccountId, ['partner', 'reseller']);
      const limit = q.limit ?? 25;
      const offset = q.offset ?? 0;
      const share = q.nearLimitShare ?? NEAR_LIMIT_SHARE;
      if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE) throw new Invalid(`limit must be a whole number from 1 to ${MAX_PAGE}`);
      if (!Number.isInteger(offset) || offset < 0) throw new Invalid('offset must be a whole number, 0 or more');
      if (!(share > 0 && share <= 1)) throw new Invalid('nearLimitShare must be above 0 and at most 1');

      // The totals and the days: the usage operation's own answer, for the same account and window.
      const u = await usage.usage(scope, {
        targetAccountId: subject.id, startDate: q.startDate, endDate: q.endDate,
        combineCosts: true, allItems: true, timeseries: true, frequency: 'day',
      });
      const zone = u.timezone;
      const fromDay = u.billingPeriod.startDate;
      const toDay = u.billingPeriod.endDate;

      const orgs: AccountRow[] = (await accountRepo.list(db, { kind: 'organization', within: subject })).rows;
      const figures = await usage.byOrganization(orgs, fromDay, toDay, zone);
      const outcomes = await analysisRepo.outcomeCounts(db, subject, localDayStart(fromDay, zone), localDayStart(nextDay(toDay), zone));
      const analysed = new Map<number, { analysed: number; succeeded: number }>();
      let allAnalysed = 0; let allSucceeded = 0;
      for (const r of outcomes) {
        const a = analysed.get(r.org_id) ?? { analysed: 0, succeeded: 0 };
        const ok = r.outcome !== null && SUCCESS_OUTCOMES.includes(r.outcome);
        a.analysed += r.n; allAnalysed += r.n;
        if (ok) { a.succeeded += r.n; allSucceeded += r.n; }
        analysed.set(r.org_id, a);
      }

      const n = (f: OrgFigures | undefined, k: string) => Number(f?.used[k as keyof OrgFigures['used']] ?? 0);
      const nearLimit: { organizationId: number; name: string; item: Item; used: number; included: number; share: number }[] = [];
      for (const org of orgs) {
        const f = figures.get(org.id);
        if (!f?.included) continue;
        for (const item of BILLED) {
          const inc = f.included[item];
          if (inc === null || inc <= 0) continue;
          const used = n(f, item);
          if (used / inc >= share) nearLimit.push({ organizationId: org.id, name: org.name, item, used, included: inc, share: Math.round((used / inc) * 1000) / 1000 });
        }
      }
      nearLimit.sort((a, b) => b.share - a.share || a.organizationId - b.organizationId);

      const row = (org: AccountRow) => {
        const f = figures.get(org.id);
        const a = analysed.get(org.id) ?? { analysed: 0, succeeded: 0 };
        const calls = n(f, 'calls');
        return {
          organizationId: org.id, name: org.name, active: bool(org.active),
          productPlanId: f?.productPlanId ?? null,
          calls, texts: n(f, 'texts'), callMinutes: n(f, 'callMinutes'), modelTokens: n(f, 'modelTokens'), conversations: n(f, 'conversations'),
          analysed: a.analysed, succeeded: a.succeeded, successRate: rate(a.succeeded, a.analysed),
          currency: f?.currency ?? null, cost: f?.cost ?? null, costPerCall: perCall(f?.cost ?? null, calls),
        };
      };

      const t = u.usage as Record<string, number | null>;
      const totalCost = t['cost:total'] ?? null;
      const calls = Number(t.calls ?? 0);
      return {
        success: true as const,
        message: u.message,
        accountId: subject.id, accountType: subject.kind, timezone: zone,
        window: { startDate: fromDay, endDate: toDay },
        successOutcomes: [...SUCCESS_OUTCOMES],
        nearLimitShare: share,
        totals: {
          organizations: orgs.length,
          calls, texts: Number(t.texts ?? 0), callMinutes: Number(t.callMinutes ?? 0), modelTokens: Number(t.modelTokens ?? 0), conversations: Number(t.conversations ?? 0),
          analysed: allAnalysed, succeeded: allSucceeded, successRate: rate(allSucceeded, allAnalysed),
          currency: u.currency, cost: totalCost, costPerCall: perCall(totalCost, calls),
        },
        days: (u.timeseries ?? []).map((d: { date: string } & Record<string, unknown>) => ({ date: d.date, calls: Number(d.calls ?? 0), texts: Number(d.texts ?? 0) })),
        organizations: orgs.slice(offset, offset + limit).map(row),
        total: orgs.length, limit, offset,
        nearLimit: nearLimit.slice(0, MAX_NEAR_LIMIT),
      };
    },
  };
}

export type OverviewService = ReturnType<typeof overviewService>;
