// What organizations used and what it costs (GET /api/v2/stats/usage), read from usage_daily, the
// rollups the write paths keep (tasks' ends, conversations' ends, model calls; see
// repository.ts usageRepo). Never a scan of the records. docs/billing.md, "Usage", has the rules.
import type { AccountRow, Db, SubscriptionRow } from '../../db/types.ts';
import { Invalid, NotFound } from '../../http/errors.ts';
import type { Scope } from '../../http/auth.ts';
import { nowMs } from '../../lib/time.ts';
import { accountRepo } from '../accounts/repository.ts';
import { localDay } from '../tasks/limits.ts';
import type { Addon, Plan } from './catalog.ts';
import { addonsFitting } from './entitlements.ts';
import { catalogOwners, findPlan, releaseHeldTasks } from './plans.ts';
import { localDayStart, periodOf } from './periods.ts';
import { addonRepo, periodRepo, subscriptionRepo, usageRepo, type UsageMetric } from './repository.ts';

/** The billed items, in answer order: what a plan includes and sells past its included amounts. */
export const BILLED = ['callMinutes', 'texts', 'tasks', 'conversations', 'modelTokens'] as const;
/** Counted but not billed on their own: shown with allItems (test*: the staging test chat's sessions and tokens, never billed). */
export const EXTRA = ['calls', 'callSeconds', 'testConversations', 'testTokens'] as const;
type Billed = (typeof BILLED)[number];

const RATE_OF: Record<Billed, keyof Plan['overage']> = {
  callMinutes: 'callMinute', texts: 'text', tasks: 'task', conversations: 'conversation', modelTokens: 'modelTokensPer1k',
};
/** The longest range a timeseries by day may cover. */
export const MAX_DAYS = 3_700;

export interface UsageQuery {
  targetAccountId?: number;
  giveCosts?: boolean; combineCosts?: boolean; timeseries?: boolean; allItems?: boolean;
  billingPeriod?: string; startDate?: string; endDate?: string; frequency?: string;
}

export interface BillingPeriodInput { startDateTimestamp: number; endDateTimestamp: number; allowGap?: boolean }

type Totals = Partial<Record<UsageMetric, number>>;

/** Money in integer nano-units of the currency's major unit (1e-9): exact for rates with up to 6 decimals per unit or per 1,000 tokens. */
const NANO = 1_000_000_000n;
const toMicro = (major: number) => BigInt(Math.round(major * 1e6));

function fractionDigits(currency: string): number {
  try { return new Intl.NumberFormat('en', { style: 'currency', currency }).resolvedOptions().maximumFractionDigits ?? 2; } catch { return 2; }
}

/** Nano-units to the currency's minor units, half up (amounts are never negative). */
function toMinor(nano: bigint, digits: number): bigint {
  const per = NANO / 10n ** BigInt(digits);
  return (nano + per / 2n) / per;
}

type Included = Record<Billed, number | null>;

/** What a plan and its add-ons include over `months` months (null = unlimited). */
export function includedOver(plan: Plan, months: number, addons: readonly Addon[]): Included {
  const out = {} as Included;
  for (const m of BILLED) {
    const base = plan.included[m];
    out[m] = base === null ? null : (base + addons.reduce((n, a) => n + (a.adds[m] ?? 0), 0)) * months;
  }
  return out;
}

/** What one organization's usage costs past its included amounts, per billed item, in nano-units. */
function overageNano(plan: Plan, included: Included, used: Totals): Record<Billed, bigint> {
  const out = {} as Record<Billed, bigint>;
  for (const m of BILLED) {
    const inc = included[m];
    const rate = plan.overage[RATE_OF[m]];
    const over = inc === null ? 0 : Math.max(0, (used[m] ?? 0) - inc);
    // A rate is per unit, or per 1,000 tokens: micro-units × 1,000 per unit = nano-units, or micro-units per token.
    out[m] = rate === null || over === 0 ? 0n : BigInt(over) * toMicro(rate) * (m === 'modelTokens' ? 1n : 1000n);
  }
  return out;
}

/** YYYY-MM-DD of a Date built from UTC fields. */
const ymd = (d: Date) => d.toISOString().slice(0, 10);
function addDays(day: string, n: number): string {
  const d = new Date(`${day}T00:00:00Z`);
  d.setUTCDate(d.getUTCDate() + n);
  return ymd(d);
}
function parseDate(value: string | undefined, field: string): number | undefined {
  if (value === undefined || value === '') return undefined;
  const ms = /^\d{4}-\d{2}-\d{2}/.test(value) ? Date.parse(value) : NaN;
  if (!Number.isFinite(ms)) throw new Invalid(`${field} must be an ISO date or date-time such as 2026-04-01T00:00:00.000Z`);
  return ms;
}

export interface UsageServiceDeps {
  db: Db;
  now?: () => number;
  /** Wakes this process's task runners (a new billing period may let held tasks start). */
  wakeTasks?: () => void;
}

export function usageService(deps: UsageServiceDeps) {
  const { db } = deps;
  const now = deps.now ?? nowMs;

  /** The organization's plan for costs: its subscription's copy while one is in force, else the plan its productPlanId names. */
  async function planOf(org: AccountRow, sub: SubscriptionRow | undefined, cache = new Map<string, Promise<Plan | null>>()): Promise<Plan | null> {
    if (sub) return JSON.parse(sub.plan) as Plan;
    if (!org.product_plan_id) return null;
    // A reseller's organizations share its catalog: each plan is looked up once a query.
    const owners = catalogOwners(org);
    const key = `${owners.partnerId}:${owners.resellerId}:${org.product_plan_id}`;
    let found = cache.get(key);
    if (!found) cache.set(key, (found = findPlan(db, owners, org.product_plan_id).then((p) => p?.item ?? null)));
    return found;
  }

  return {
    /**
     * Starts an organization's next billing period (a reseller or partner for one below it): the
     * period must begin after the current one began and no later than it ends (earlier closes the
     * current one there); later leaves a gap, refused unless `allowGap`.
     */
    async setBillingPeriod(scope: Scope, who: { targetAccountId?: number; externalAccountId?: string }, body: BillingPeriodInput) {
      scope.requireActor(['partner', 'reseller'], 'start a billing period');
      if (who.targetAccountId !== undefined && who.externalAccountId !== undefined) throw new Invalid('give targetAccountId or externalAccountId, not both');
      let org: AccountRow | undefined;
      if (who.externalAccountId !== undefined) {
        if (!who.externalAccountId.trim()) throw new Invalid('externalAccountId must not be empty');
        [org] = await accountRepo.findByExternalId(db, scope.actor, who.externalAccountId);
        if (!org) throw new NotFound(`Account not found for externalAccountId '${who.externalAccountId}'`);
        if (org.kind !== 'organization') throw new NotFound(`externalAccountId '${who.externalAccountId}' is not an organization`);
      } else if (who.targetAccountId !== undefined) {
        org = await scope.target(who.targetAccountId, ['organization']);
      } else {
        throw new Invalid('targetAccountId or externalAccountId is required: the organization whose billing period starts');
      }
      const start = body.startDateTimestamp * 1000;
      const end = body.endDateTimestamp * 1000;
      if (start > end) throw new Invalid('startDateTimestamp must not be greater than endDateTimestamp');
      if (start === end) throw new Invalid('endDateTimestamp must be after startDateTimestamp');
      const orgId = org.id;
      const iso = (ms: number) => new Date(ms).toISOString();
      const t = now();
      const previous = await db.transaction().execute(async (tx) => {
        await accountRepo.lock(tx, orgId); // one period change of an organization at a time
        const sub = await subscriptionRepo.current(tx, orgId);
        const latest = await periodRepo.latest(tx, orgId);
        const current = latest ?? (sub ? { start_at: Number(sub.period_start), end_at: Number(sub.period_end) } : undefined);
        if (current) {
          if (start <= current.start_at) {
            throw new Invalid(`startDateTimestamp (${iso(start)}) overlaps the current billing period, which started ${iso(current.start_at)}: a new period starts after it`);
          }
          if (start > current.end_at && body.allowGap !== true) {
            throw new Invalid(`startDateTimestamp (${iso(start)}) leaves a gap after the current billing period, which ends ${iso(current.end_at)}: start it then, or pass allowGap: true`);
          }
          if (latest && start < latest.end_at) await periodRepo.close(tx, orgId, latest.start_at, start, t);
        }
        await periodRepo.insert(tx, orgId, start, end, scope.actor.id, t);
        // The subscription in force is billed on the new period.
        if (sub) await subscriptionRepo.update(tx, sub.id, { period_start: start, period_end: end, updated_at: t });
        // Tasks an included amount of the old period held back are looked at again.
        await releaseHeldTasks(tx, orgId, t);
        return current ? { start_at: current.start_at, end_at: Math.min(current.end_at, start) } : null;
      });
      deps.wakeTasks?.();
      const secs = (ms: number) => Math.floor(ms / 1000);
      return {
        success: true, message: 'Billing period updated', organizationId: orgId,
        billingPeriod: { startDateTimestamp: body.startDateTimestamp, endDateTimestamp: body.endDateTimestamp },
        previousBillingPeriod: previous ? { startDateTimestamp: secs(previous.start_at), endDateTimestamp: secs(previous.end_at) } : null,
      };
    },

    async usage(scope: Scope, q: UsageQuery) {
      let subject = await scope.target(q.targetAccountId, ['partner', 'reseller', 'organization', 'agent']);
      if (subject.kind === 'agent') {
        const org = await accountRepo.findById(db, subject.org_id!);
        if (!org) throw new NotFound(`organization of account ${subject.id} was not found`);
        subject = org;
      }
      const which = q.billingPeriod ?? 'current';
      if (which !== 'current' && which !== 'previous') throw new Invalid('billingPeriod must be current or previous');
      const frequency = q.frequency ?? 'day';
      if (frequency !== 'day' && frequency !== 'month' && frequency !== 'year') throw new Invalid('frequency must be day, month or year');
      const zone = subject.timezone || 'UTC';
      const at = now();
      const today = localDay(at, zone);

      const orgs = subject.kind === 'organization' ? [subject]
        : (await accountRepo.list(db, { kind: 'organization', within: subject })).rows;
      const sub = subject.kind === 'organization' ? await subscriptionRepo.current(db, subject.id) : undefined;

      // The billing period: the last one an ancestor set (previous: the one before), else the
      // subscription's in force (previous: the term before it), else the calendar month in the account's zone.
      const set = subject.kind === 'organization' ? await periodRepo.lastTwo(db, subject.id, at) : [];
      const period = periodOf(which, set, sub, at, zone);
      let fromDay = period.fromDay;
      const lastDay = period.lastDay;
      const periodStart = period.start; const periodEnd = period.end;
      const start = parseDate(q.startDate, 'startDate');
      const end = parseDate(q.endDate, 'endDate');
      if (start !== undefined) fromDay = localDay(start, zone);
      const toDay = end !== undefined ? localDay(end, zone) : lastDay < today ? lastDay : today;
      if (toDay < fromDay) throw new Invalid(`endDate (${toDay}) must not be before startDate (${fromDay}) in time zone ${zone}`);
      const span = Math.round((Date.parse(`${toDay}T00:00:00Z`) - Date.parse(`${fromDay}T00:00:00Z`)) / 86_400_000) + 1;
      if (span > MAX_DAYS) throw new Invalid(`startDate to endDate must cover at most ${MAX_DAYS} days`);

      const items: readonly UsageMetric[] = q.allItems ? [...BILLED, ...EXTRA] : BILLED;
      const showUsage = !q.giveCosts || q.combineCosts === true;
      const showCosts = q.giveCosts === true || q.combineCosts === true;
      // Without a timeseries the range is one bucket: the sums are made by the database.
      const bucketLength = !q.timeseries ? 0 : frequency === 'day' ? 10 : frequency === 'month' ? 7 : 4;
      const bucketOf = (day: string) => day.slice(0, bucketLength);
      const buckets: string[] = [];
      if (bucketLength === 0) buckets.push('');
      else for (let d = fromDay; d <= toDay; d = addDays(d, 1)) if (buckets.at(-1) !== bucketOf(d)) buckets.push(bucketOf(d));
      const rows = await usageRepo.sums(db, orgs.map((o) => o.id), fromDay, toDay, bucketLength);

      // Per organization, per bucket: what it used.
      const used = new Map<number, Map<string, Totals>>();
      for (const r of rows) {
        let perBucket = used.get(r.org_id);
        if (!perBucket) used.set(r.org_id, (perBucket = new Map<string, Totals>()));
        const t = perBucket.get(r.bucket) ?? {};
        t[r.metric as UsageMetric] = (t[r.metric as UsageMetric] ?? 0) + r.n;
        perBucket.set(r.bucket, t);
      }
      const add = (into: Totals, t: Totals) => { for (const [k, n] of Object.entries(t)) into[k as UsageMetric] = (into[k as UsageMetric] ?? 0) + n; };

      // Costs: each organization on its own plan (and term) with its add-ons; per bucket, the
      // overage up to the bucket's end less the overage before it. Subscriptions and add-ons of
      // every organization are read in one query each.
      const plans = new Map<number, Plan | null>();
      const includedOf = new Map<number, Included>();
      const addonsOf = new Map<number, Addon[]>();
      const subs = subject.kind === 'organization' ? new Map(sub ? [[subject.id, sub]] : []) : await subscriptionRepo.currentOf(db, orgs.map((o) => o.id));
      let currency: string | null = null; let mixed = false; let unpriced = 0;
      const range = { fromMs: localDayStart(fromDay, zone), toMs: localDayStart(addDays(toDay, 1), zone) };
      const addonRows = await addonRepo.of(db, orgs.map((o) => o.id), range);
      const cache = new Map<string, Promise<Plan | null>>();
      for (const org of orgs) {
        const orgSub = subs.get(org.id);
        const plan = await planOf(org, orgSub, cache);
        plans.set(org.id, plan);
        if (!plan) { unpriced++; continue; }
        const addons = addonsFitting(addonRows.filter((r) => r.org_id === org.id), plan.productPlanId);
        addonsOf.set(org.id, addons);
        includedOf.set(org.id, includedOver(plan, orgSub?.term === 'year' ? 12 : 1, addons));
        if (currency === null) currency = plan.currency; else if (currency !== plan.currency) mixed = true;
      }
      const priced = showCosts && !mixed && currency !== null;
      const digits = priced ? fractionDigits(currency!) : 2;
      const major = (minor: bigint) => Number(minor) / 10 ** digits;
      const price = (p: { monthlyPrice: number; yearlyPrice: number }, term: string | undefined) =>
        BigInt(Math.round((term === 'year' ? p.yearlyPrice : p.monthlyPrice) * 10 ** digits));

      const totals: Totals = {};
      const over: Partial<Record<Billed, number>> = {};
      const bucketUsage = buckets.map(() => ({} as Totals));
      const bucketCost = buckets.map(() => ({} as Record<Billed, bigint>));
      const totalCost = Object.fromEntries(BILLED.map((m) => [m, 0n])) as Record<Billed, bigint>;
      let planPrice = 0n; let addonPrice = 0n;
      for (const org of orgs) {
        const perBucket = used.get(org.id);
        const plan = plans.get(org.id) ?? null;
        const included = includedOf.get(org.id);
        const running: Totals = {};
        let before = Object.fromEntries(BILLED.map((m) => [m, 0n])) as Record<Billed, bigint>;
        if (priced && plan) {
          const term = subs.get(org.id)?.term;
          planPrice += price(plan, term);
          for (const a of addonsOf.get(org.id) ?? []) addonPrice += price(a, term);
        }
        buckets.forEach((b, i) => {
          const t = perBucket?.get(b) ?? {};
          add(bucketUsage[i]!, t); add(totals, t); add(running, t);
          if (!priced || !plan || !included) return;
          const upTo = overageNano(plan, included, running);
          for (const m of BILLED) {
            const minor = toMinor(upTo[m], digits) - toMinor(before[m], digits);
            bucketCost[i]![m] = (bucketCost[i]![m] ?? 0n) + minor;
            totalCost[m] += minor;
          }
          before = upTo;
        });
        // Past the included amounts, whether or not overage is sold (what a task is held back for, or what it costs).
        if (included) for (const m of BILLED) if (included[m] !== null) over[m] = (over[m] ?? 0) + Math.max(0, (running[m] ?? 0) - included[m]!);
      }

      const figures = (t: Totals, cost: Record<Billed, bigint> | null, withPlan: boolean) => {
        const out: Record<string, number | null> = {};
        if (showUsage) for (const m of items) out[m] = t[m] ?? 0;
        if (showCosts) {
          let sum = withPlan ? planPrice : 0n;
          for (const m of BILLED) { const c = cost?.[m] ?? 0n; sum += c; out[`cost:${m}`] = priced ? major(c) : null; }
          if (withPlan) {
            sum += addonPrice;
            out['cost:plan'] = priced ? major(planPrice) : null;
            out['cost:addons'] = priced ? major(addonPrice) : null;
          }
          out['cost:total'] = priced ? major(sum) : null;
        }
        return out;
      };

      const subjectIncluded = subject.kind === 'organization' ? includedOf.get(subject.id) ?? null : null;
      return {
        success: true,
        message: !showCosts ? 'Stats fetched successfully'
          : mixed ? 'Stats fetched successfully; costs are null: the organizations are billed in different currencies'
          : currency === null ? 'Stats fetched successfully; costs are null: no organization is on a plan of its catalog'
          : unpriced > 0 ? `Stats fetched successfully; ${unpriced} organization(s) without a plan of their catalog are not costed`
          : 'Stats fetched successfully',
        accountId: subject.id,
        accountType: subject.kind,
        organizations: orgs.length,
        timezone: zone,
        billingPeriod: {
          period: start === undefined && end === undefined ? which : null,
          startDate: fromDay, endDate: toDay,
          startDateTimestamp: periodStart === null ? null : Math.floor(periodStart / 1000),
          endDateTimestamp: periodEnd === null ? null : Math.floor(periodEnd / 1000),
        },
        productPlanId: subject.kind === 'organization' ? (sub?.plan_id ?? subject.product_plan_id) : null,
        included: subjectIncluded,
        addons: subject.kind === 'organization' ? (addonsOf.get(subject.id) ?? []).map((a) => a.addonId) : null,
        overIncluded: Object.fromEntries(BILLED.map((m) => [m, over[m] ?? 0])),
        currency: showCosts && !mixed ? currency : null,
        usage: figures(totals, totalCost, true),
        timeseries: q.timeseries
          ? buckets.map((b, i) => ({ date: b, ...figures(bucketUsage[i]!, bucketCost[i]!, false) }))
          : null,
      };
    },
  };
}

export type UsageService = ReturnType<typeof usageService>;
