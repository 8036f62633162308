// The columns of an activity-record file (docs/billing.md, "Activity records", documents each)
// and one record per ended task or conversation, with what it used (the same rules as the usage
// rollups, src/modules/tasks/queue-hooks.ts countUsage) and what that costs at its plan's rates.
import type { ConversationRow, TaskRow } from '../../db/types.ts';
import { csvRow, type CsvValue } from '../../lib/csv-cell.ts';
import type { Plan } from '../billing/catalog.ts';
import { endUsage } from '../billing/usage-rules.ts';
import { readJsonObject } from '../../db/json-columns.ts';

export const ADR_COLUMNS = [
  'recordType', 'recordId', 'organizationId', 'agentId', 'channel', 'direction', 'counterpart', 'taskId', 'externalTaskId',
  'startedAt', 'endedAt', 'durationSeconds', 'outcome', 'outcomeDetail',
  'callSeconds', 'callMinutes', 'texts', 'tasks', 'conversations', 'modelTokens', 'currency', 'cost',
] as const;

export const ADR_HEADER = csvRow([...ADR_COLUMNS]);

interface Usage { callSeconds: number; callMinutes: number; texts: number; tasks: number; conversations: number; modelTokens: number }

const iso = (ms: number | null) => (ms === null ? null : new Date(Number(ms)).toISOString());

const parseResult = (result: string | null): Record<string, unknown> => readJsonObject(result);

/** Money in nano-units (1e-9 of the currency's major unit) of `units` at `rate` per unit (or per `per` units). */
function nano(units: number, rate: number | null, per = 1): bigint {
  if (rate === null || units <= 0) return 0n;
  return (BigInt(units) * BigInt(Math.round(rate * 1e6)) * 1000n) / BigInt(per);
}

function fractionDigits(currency: string): number {
  try { return new Intl.NumberFormat('en', { style: 'currency', currency }).resolvedOptions().maximumFractionDigits ?? 2; } catch { return 2; }
}

/**
 * What the record's usage costs at the plan's overage rates, rounded half up to the currency's
 * minor unit: the price of each unit before included amounts, which apply per billing period
 * (GET /api/v2/stats/usage), not per record. Null without a plan.
 */
export function recordCost(u: Usage, plan: Plan | null): { currency: string | null; cost: string | null } {
  if (!plan) return { currency: null, cost: null };
  const o = plan.overage;
  const total = nano(u.callMinutes, o.callMinute) + nano(u.texts, o.text) + nano(u.tasks, o.task)
    + nano(u.conversations, o.conversation) + nano(u.modelTokens, o.modelTokensPer1k, 1000);
  const digits = fractionDigits(plan.currency);
  const per = 1_000_000_000n / 10n ** BigInt(digits);
  const minor = (total + per / 2n) / per;
  const whole = minor / 10n ** BigInt(digits);
  const frac = (minor % 10n ** BigInt(digits)).toString().padStart(digits, '0');
  return { currency: plan.currency, cost: digits === 0 ? whole.toString() : `${whole}.${frac}` };
}

/** One task's record: a call, a text or a ping, with what it used as the usage rollups count it. */
export function taskRecord(t: TaskRow, plan: Plan | null): string {
  const result = parseResult(t.result);
  const ran = t.started_at !== null;
  const d = typeof result.durationSeconds === 'number' && Number.isFinite(result.durationSeconds) && result.durationSeconds > 0
    ? Math.ceil(result.durationSeconds) : 0;
  const u: Usage = {
    callSeconds: t.type === 'call' ? d : 0,
    callMinutes: t.type === 'call' ? Math.ceil(d / 60) : 0,
    texts: t.type === 'text' && t.state === 'finished' ? 1 : 0,
    tasks: t.type !== 'ping' && ran ? 1 : 0,
    conversations: 0,
    modelTokens: 0,
  };
  const { currency, cost } = recordCost(u, plan);
  const detail = typeof result.status === 'string' ? result.status : t.error;
  const values: CsvValue[] = [
    t.type, t.id, t.org_id, t.account_id, t.provider, 'outbound', t.target, t.id, t.external_task_id,
    iso(t.started_at), iso(t.finished_at), t.type === 'call' ? d : null, t.state, detail,
    u.callSeconds, u.callMinutes, u.texts, u.tasks, u.conversations, u.modelTokens, currency, cost,
  ];
  return csvRow(values);
}

/**
 * One conversation's record: its channel, parties, outcome and the model tokens it used; an
 * inbound call's (no task) its call seconds and minutes too, as the rollups count them (a call
 * task's are on the task's record). A staging test chat's (channel test) uses nothing billed.
 */
export function conversationRecord(c: ConversationRow, plan: Plan | null): string {
  const e = endUsage(c);
  const u: Usage = {
    callSeconds: e.callSeconds ?? 0, callMinutes: e.callMinutes ?? 0, texts: 0, tasks: 0, conversations: e.conversations ?? 0,
    modelTokens: c.channel === 'test' ? 0 : Number(c.tokens_in) + Number(c.tokens_out),
  };
  const { currency, cost } = recordCost(u, plan);
  const values: CsvValue[] = [
    'conversation', c.id, c.org_id, c.account_id, c.channel, c.direction, c.counterpart, c.task_id, null,
    iso(c.started_at), iso(c.ended_at), c.duration_ms === null ? null : Number(c.duration_ms) / 1000, c.outcome, c.outcome_detail,
    u.callSeconds, u.callMinutes, u.texts, u.tasks, u.conversations, u.modelTokens, currency, cost,
  ];
  return csvRow(values);
}
