// Daily counts and limits: the calls and texts started on each of the last 14 days of the
// organization's day (taskDailyCounts, one day per request; the service counts in the
// organization's time zone, which its answer names and the chart's title says), and the limits
// that govern calls and texts (getTaskLimits, updateTaskLimits).
import { useMemo, useState, type FormEvent } from 'react';
import { useMutation, useQueries, useQuery, useQueryClient } from '@tanstack/react-query';
import type { paths } from '../../../../sdk/schema.d.ts';
import { api, ok } from '../../api.ts';
import { limitsSaved, taskQueries } from '../../queries/tasks.ts';
import { useSession } from '../../session.tsx';
import { BarChart } from '../../ui/chart.tsx';
import { Button, ErrorNote, Field, Loading, Note, Page, Section } from '../../ui/parts.tsx';
import { Checkbox, shiftDate } from './common.tsx';
import { TaskNav } from './list.tsx';

const DAYS = 14;

export default function DailyAndLimits() {
  return (
    <Page title="Daily counts and limits" actions={<TaskNav />}>
      <DailyChart />
      <LimitsSection />
    </Page>
  );
}

function DailyChart() {
  const acting = useSession();
  // Today first: its answer says which day it is where the organization is, and in which zone.
  const today = useQuery({ ...taskQueries.daily(acting, 'today'), refetchInterval: 5_000 });
  const date = today.data?.counts.date;
  const earlier = useQueries({
    queries: Array.from({ length: DAYS - 1 }, (_, i) => {
      const day = date ? shiftDate(date, -(DAYS - 1 - i)) : '';
      return { ...taskQueries.daily(acting, day), enabled: !!date, staleTime: 60_000 };
    }),
  });
  const all = [...earlier.map((q) => q.data?.counts), today.data?.counts];
  // The chart is drawn again only when a figure changes, not on every refresh.
  const key = all.every((c) => c !== undefined) ? JSON.stringify(all) : '';
  const figures = useMemo(() => {
    if (!key) return null;
    const days = JSON.parse(key) as { date: string; calls: number; texts: number }[];
    return {
      labels: days.map((c) => c.date.slice(5)),
      series: [
        { label: 'Calls', values: days.map((c) => c.calls), color: '#0b5cad' },
        { label: 'Texts', values: days.map((c) => c.texts), color: '#8250df' },
      ],
    };
  }, [key]);
  const error = today.error ?? earlier.find((q) => q.error)?.error;
  const zone = today.data?.counts.timezone;
  const caps = today.data?.limits;
  return (
    <Section title="Calls and texts started per day">
      {error ? <ErrorNote error={error} /> : !figures || !today.data ? <Loading what="Loading daily counts" /> : (
        <>
          <div className="cp-chart"><BarChart title={`Calls and texts started per day, last ${DAYS} days (time zone ${zone})`} labels={figures.labels} series={figures.series} /></div>
          <p role="status">
            Today ({today.data.counts.date}, {zone}): {today.data.counts.calls} calls, {today.data.counts.texts} texts, {today.data.counts.tasks} in all.
            {caps && (caps.calls !== undefined || caps.texts !== undefined || caps.tasks !== undefined)
              ? ` Daily caps: ${[caps.calls !== undefined ? `${caps.calls} calls` : '', caps.texts !== undefined ? `${caps.texts} texts` : '', caps.tasks !== undefined ? `${caps.tasks} in all` : ''].filter(Boolean).join(', ')}.`
              : ' No daily caps.'}
          </p>
          <p className="muted">Each attempt of a call or text counts on the day it started; pings are not counted.</p>
        </>
      )}
    </Section>
  );
}

type Limits = paths['/api/v2/tasks/limits']['get']['responses'][200]['content']['application/json']['limits'];
const WEEKDAYS = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];

interface Form {
  hours: boolean; timezone: string; days: number[]; start: string; end: string;
  cooldownCalls: string; cooldownTexts: string;
  retryBusy: string; retryNoAnswer: string; retryDelay: string;
  dailyCalls: string; dailyTexts: string; dailyTasks: string; concurrency: string;
}

const str = (n: number | undefined) => (n === undefined ? '' : String(n));
const num = (s: string) => (s.trim() === '' ? null : Number(s));

function formOf(l: Limits): Form {
  const b = l.businessHours;
  return {
    hours: !!b, timezone: b?.timezone ?? Intl.DateTimeFormat().resolvedOptions().timeZone, days: b?.days ?? [1, 2, 3, 4, 5],
    start: b?.start ?? '09:00', end: b?.end ?? '17:00',
    cooldownCalls: str(l.cooldowns.calls), cooldownTexts: str(l.cooldowns.texts),
    retryBusy: str(l.retries.busy), retryNoAnswer: str(l.retries.noAnswer), retryDelay: str(l.retries.delaySec),
    dailyCalls: str(l.daily.calls), dailyTexts: str(l.daily.texts), dailyTasks: str(l.daily.tasks), concurrency: str(l.concurrencyPerRun),
  };
}

/** Only the parts that changed: an organization may not send daily or concurrencyPerRun at all. */
function patchOf(before: Form, f: Form, above: boolean): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  const hours = f.hours ? { timezone: f.timezone, days: [...f.days].sort(), start: f.start, end: f.end } : null;
  const was = before.hours ? { timezone: before.timezone, days: [...before.days].sort(), start: before.start, end: before.end } : null;
  if (JSON.stringify(hours) !== JSON.stringify(was)) body.businessHours = hours;
  if (f.cooldownCalls !== before.cooldownCalls || f.cooldownTexts !== before.cooldownTexts) body.cooldowns = { calls: num(f.cooldownCalls), texts: num(f.cooldownTexts) };
  if (f.retryBusy !== before.retryBusy || f.retryNoAnswer !== before.retryNoAnswer || f.retryDelay !== before.retryDelay) {
    body.retries = { busy: num(f.retryBusy), noAnswer: num(f.retryNoAnswer), delaySec: num(f.retryDelay) };
  }
  if (above) {
    if (f.dailyCalls !== before.dailyCalls || f.dailyTexts !== before.dailyTexts || f.dailyTasks !== before.dailyTasks) {
      body.daily = { calls: num(f.dailyCalls), texts: num(f.dailyTexts), tasks: num(f.dailyTasks) };
    }
    if (f.concurrency !== before.concurrency) body.concurrencyPerRun = num(f.concurrency);
  }
  return body;
}

function LimitsSection() {
  const acting = useSession();
  const limits = useQuery(taskQueries.limits(acting));
  return (
    <Section title="Limits">
      <p className="muted">Limits govern calls and texts (pings are exempt), checked when a worker is about to start a task.</p>
      {limits.isPending ? <Loading what="Loading limits" /> : limits.error ? <ErrorNote error={limits.error} /> : (
        <LimitsForm limits={limits.data.limits} />
      )}
    </Section>
  );
}

function LimitsForm({ limits }: { limits: Limits }) {
  const { account, orgId, target } = useSession();
  const client = useQueryClient();
  const above = target.targetAccountId !== undefined && (account.kind === 'reseller' || account.kind === 'partner');
  const before = useMemo(() => formOf(limits), [limits]);
  const [f, setF] = useState<Form>(before);
  const set = (k: keyof Form) => (e: { target: { value: string } }) => setF({ ...f, [k]: e.target.value });
  const save = useMutation({
    mutationFn: (body: Record<string, unknown>) => ok(api.POST('/api/v2/tasks/limits', { params: { query: { ...target } }, body })),
    onSuccess: (data) => void limitsSaved(client, orgId, data),
  });
  const submit = (e: FormEvent) => { e.preventDefault(); save.mutate(patchOf(before, f, above)); };
  const toggleDay = (d: number, on: boolean) => setF({ ...f, days: on ? [...f.days, d] : f.days.filter((x) => x !== d) });
  return (
    <form onSubmit={submit} aria-label="Limits">
      <h3>Business hours</h3>
      <Checkbox label="Start calls and texts only within business hours" checked={f.hours} onChange={(v) => setF({ ...f, hours: v })} />
      {f.hours ? (
        <div className="grid-2 cp-grid">
          <Field label="Time zone" value={f.timezone} onChange={set('timezone')} hint="An IANA zone, e.g. Europe/Paris." />
          <fieldset className="days">
            <legend>Days</legend>
            {WEEKDAYS.map((name, d) => <Checkbox key={name} label={name} checked={f.days.includes(d)} onChange={(v) => toggleDay(d, v)} />)}
          </fieldset>
          <Field label="Opens at" type="time" value={f.start} onChange={set('start')} />
          <Field label="Closes at" value={f.end} onChange={set('end')} hint="HH:MM, after the opening; 24:00 for the end of the day." pattern="\d{2}:\d{2}" />
        </div>
      ) : null}
      <h3>Cooldowns (seconds between two attempts to the same number)</h3>
      <div className="grid-2 cp-grid">
        <Field label="Calls cooldown" type="number" min={0} value={f.cooldownCalls} onChange={set('cooldownCalls')} hint="Empty: none." />
        <Field label="Texts cooldown" type="number" min={0} value={f.cooldownTexts} onChange={set('cooldownTexts')} hint="Empty: none." />
      </div>
      <h3>Retries after busy or no answer</h3>
      <div className="grid-2 cp-grid">
        <Field label="Retries when busy" type="number" min={0} max={5} value={f.retryBusy} onChange={set('retryBusy')} hint="0–5; empty: none." />
        <Field label="Retries when not answered" type="number" min={0} max={5} value={f.retryNoAnswer} onChange={set('retryNoAnswer')} hint="0–5; empty: none." />
        <Field label="Delay between retries (seconds)" type="number" min={1} value={f.retryDelay} onChange={set('retryDelay')} hint="Empty: 300." />
      </div>
      <h3>Daily caps and concurrency</h3>
      {above ? (
        <div className="grid-2 cp-grid">
          <Field label="Calls per day" type="number" min={0} value={f.dailyCalls} onChange={set('dailyCalls')} hint="Empty: no cap." />
          <Field label="Texts per day" type="number" min={0} value={f.dailyTexts} onChange={set('dailyTexts')} hint="Empty: no cap." />
          <Field label="Calls and texts per day" type="number" min={0} value={f.dailyTasks} onChange={set('dailyTasks')} hint="Empty: no cap." />
          <Field label="Running at once" type="number" min={1} max={1000} value={f.concurrency} onChange={set('concurrency')} hint="1–1000; empty: 5." />
        </div>
      ) : (
        <dl className="kv">
          <dt>Calls per day</dt><dd>{limits.daily.calls ?? 'no cap'}</dd>
          <dt>Texts per day</dt><dd>{limits.daily.texts ?? 'no cap'}</dd>
          <dt>Calls and texts per day</dt><dd>{limits.daily.tasks ?? 'no cap'}</dd>
          <dt>Running at once</dt><dd>{limits.concurrencyPerRun}</dd>
          <dt>Who sets them</dt><dd>Your reseller or partner (and your plan).</dd>
        </dl>
      )}
      <div className="actions"><Button kind="primary" type="submit" disabled={save.isPending}>Save limits</Button></div>
      <ErrorNote error={save.error} />
      {save.isSuccess ? <Note>Limits saved.</Note> : null}
    </form>
  );
}
