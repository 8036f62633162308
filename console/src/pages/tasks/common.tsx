// The tasks area's own small parts: a task's state as a badge in words, a labelled checkbox, and
// the reading of form inputs into the API's unix seconds.
import { useId } from 'react';
import { useQuery } from '@tanstack/react-query';
import type { paths } from '../../../../sdk/schema.d.ts';
import { accountQueries } from '../../queries/accounts.ts';
import { useSession } from '../../session.tsx';
import { Badge, Field, Select } from '../../ui/parts.tsx';
import './tasks.css';

export type Task = paths['/api/v2/tasks/{taskId}']['get']['responses'][200]['content']['application/json']['task'];

export const TASK_STATES = ['pending', 'running', 'finished', 'failed', 'canceled'] as const;
export const TASK_TYPES = ['call', 'text', 'ping'] as const;

const TONE: Record<string, 'neutral' | 'good' | 'warn' | 'bad' | 'live'> = {
  pending: 'neutral', running: 'live', finished: 'good', failed: 'bad', canceled: 'warn',
};

export function StateBadge({ state }: { state: string }) {
  return <Badge tone={TONE[state] ?? 'neutral'}>{state}</Badge>;
}

/** Whether the task ran on the SIMULATED carrier: nothing was dialled or sent. */
export const isSimulated = (t: Task): boolean =>
  t.provider === 'simulated' || (t.result as Record<string, unknown> | null)?.simulated === true;

/** The SIMULATED badge, said in words, for a task nothing real was dialled or sent for. */
export function SimulatedBadge({ task }: { task: Task }) {
  return isSimulated(task) ? <> <Badge tone="warn">SIMULATED</Badge></> : null;
}

const RESULT_LABELS: Record<string, string> = {
  outcome: 'Outcome', status: 'Carrier status', duration: 'Duration (s)', durationSec: 'Duration (s)', answeredBy: 'Answered by',
  simulated: 'Simulated', provider: 'Provider', providerRef: 'Provider reference', stopReason: 'Why retries stopped',
  queueLatencyMs: 'Queue latency (ms)', databaseRoundTripMs: 'Database round trip (ms)', errorCode: 'Error code',
};
const words = (key: string) => RESULT_LABELS[key] ?? key.replace(/([a-z])([A-Z])/g, '$1 $2').replace(/^./, (c) => c.toUpperCase());
const valueOf = (v: unknown) => (v === true ? 'yes' : v === false ? 'no' : v === null || v === undefined ? '—' : typeof v === 'object' ? JSON.stringify(v) : String(v as string | number));

/** A task's result as labelled facts, not JSON: the outcome first. */
export function ResultFacts({ result }: { result: Record<string, unknown> }) {
  const keys = Object.keys(result).sort((a, b) => (a === 'outcome' ? -1 : b === 'outcome' ? 1 : 0));
  return (
    <dl className="kv" aria-label="Result">
      {keys.map((k) => <div key={k} className="kv-row"><dt>{words(k)}</dt><dd>{valueOf(result[k])}</dd></div>)}
    </dl>
  );
}

export function Checkbox({ label, checked, onChange, hint }: { label: string; checked: boolean; onChange: (v: boolean) => void; hint?: string }) {
  const id = useId();
  return (
    <div className="field check">
      <input id={id} type="checkbox" checked={checked} onChange={(e) => onChange(e.target.checked)} aria-describedby={hint ? `${id}-hint` : undefined} />
      <label htmlFor={id}>{label}</label>
      {hint ? <small id={`${id}-hint`} className="muted">{hint}</small> : null}
    </div>
  );
}

/** A `datetime-local` value (the browser's zone) as unix seconds; undefined when empty. */
export function localToSeconds(value: string): number | undefined {
  if (!value) return undefined;
  const ms = new Date(value).getTime();
  return Number.isFinite(ms) ? Math.floor(ms / 1000) : undefined;
}

/** `YYYY-MM-DD` moved by `days` (calendar arithmetic, no time zone involved). */
export function shiftDate(date: string, days: number): string {
  const [y, m, d] = date.split('-').map(Number);
  return new Date(Date.UTC(y, m - 1, d + days)).toISOString().slice(0, 10);
}

/** The organization's agents to choose from (listAccounts); a number field where they cannot be listed. */
export function AgentChoice({ label, value, onChange, none, hint }: { label: string; value: string; onChange: (v: string) => void; none: string; hint?: string }) {
  const { orgId } = useSession();
  const agents = useQuery({ ...accountQueries.agents(orgId), enabled: orgId !== undefined, staleTime: 60_000 });
  if (!agents.data) return <Field label={label} type="number" min={1} value={value} onChange={(e) => onChange(e.target.value)} hint={hint} />;
  return (
    <Select label={label} value={value} onChange={(e) => onChange(e.target.value)}
      options={[{ value: '', label: none }, ...agents.data.accounts.map((a) => ({ value: String(a.id), label: a.name }))]} />
  );
}
