// Billing: the organization's plan and subscription with what it includes and what is used of it,
// tasks held back for an included amount, usage charts by day or month, the billing period (set by
// a reseller or partner), the plans on offer with subscribe and cancel, and add-ons
// (docs/console.md, "Billing").
import { useMemo, useState, type FormEvent } from 'react';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { api, ok, when } from '../../api.ts';
import { billingChanged, billingQueries } from '../../queries/billing.ts';
import { taskQueries } from '../../queries/tasks.ts';
import { useSession } from '../../session.tsx';
import { BarChart } from '../../ui/chart.tsx';
import { Badge, Button, ErrorNote, Field, Loading, Note, Page, Section, Select, Table } from '../../ui/parts.tsx';
import { Confirm } from '../../ui/confirm.tsx';
import './billing.css';

const ITEMS = [
  { key: 'callMinutes', label: 'Call minutes' },
  { key: 'texts', label: 'Texts' },
  { key: 'tasks', label: 'Tasks' },
  { key: 'conversations', label: 'Conversations' },
  { key: 'modelTokens', label: 'Model tokens' },
] as const;
type Item = (typeof ITEMS)[number]['key'];

const num = (v: unknown) => (typeof v === 'number' ? v : 0);
const amount = (n: number | null | undefined) => (n === null || n === undefined ? 'Unlimited' : n.toLocaleString());
const money = (n: number, currency: string) => `${n.toLocaleString(undefined, { minimumFractionDigits: n % 1 ? 2 : 0, maximumFractionDigits: 4 })} ${currency}`;

function usePlan() {
  const acting = useSession();
  return useQuery(billingQueries.plan(acting));
}

export default function Billing() {
  return (
    <Page title="Billing">
      <div className="billing-page">
        <CurrentPlan />
        <Usage />
        <Period />
        <Plans />
        <Addons />
      </div>
    </Page>
  );
}

function CurrentPlan() {
  const acting = useSession();
  const { orgId, target } = acting;
  const client = useQueryClient();
  const plan = usePlan();
  const usage = useQuery(billingQueries.usageNow(acting));
  const held = useQuery({ ...taskQueries.list(acting, { state: 'pending', limit: 100 }), refetchInterval: 10_000 });
  const cancel = useMutation({
    mutationFn: () => ok(api.DELETE('/api/v2/product/cancel', { params: { query: { ...target } }, body: { reason: 'Cancelled in the console' } })),
    onSuccess: () => billingChanged(client, orgId),
  });
  if (plan.isPending) return <Section title="Current plan"><Loading /></Section>;
  if (plan.error) return <Section title="Current plan"><ErrorNote error={plan.error} /></Section>;
  const p = plan.data;
  const s = p.subscription;
  const used = (usage.data?.usage ?? {}) as Record<string, unknown>;
  const included = (usage.data?.included ?? null) as Record<string, number | null> | null;
  const heldTasks = (held.data?.tasks ?? []).filter((t) => t.heldReason);
  return (
    <Section
      title="Current plan"
      actions={s && s.state === 'active' ? (
        <Confirm label="Cancel subscription" question={`End the ${s.planName} subscription now? The organization falls back to its reseller's plan.`} confirm="Yes, cancel it" onConfirm={() => cancel.mutate()} disabled={cancel.isPending} />
      ) : undefined}
    >
      <ErrorNote error={cancel.error} />
      {cancel.data ? <Note>Subscription cancelled: the organization is now on {cancel.data.productPlanId}.</Note> : null}
      <dl className="facts">
        <div><dt>Plan</dt><dd><strong>{p.plan?.name ?? p.productPlanId ?? 'None'}</strong> {p.productPlanId ? <code className="muted">{p.productPlanId}</code> : null}</dd></div>
        <div><dt>Price</dt><dd>{p.plan ? `${money(p.plan.monthlyPrice, p.plan.currency)} a month, ${money(p.plan.yearlyPrice, p.plan.currency)} a year` : '—'}</dd></div>
        <div><dt>Subscription</dt><dd>{s ? <><Badge tone={s.state === 'active' ? 'good' : s.state === 'pending' ? 'warn' : 'neutral'}>{s.state}</Badge> {s.term === 'year' ? 'yearly' : 'monthly'}{s.billingSystem ? ` through ${s.billingSystem}` : ''}</> : 'Not subscribed (a plan given by the reseller)'}</dd></div>
        <div><dt>Billing period</dt><dd>{usage.data ? `${usage.data.billingPeriod.startDate} to ${usage.data.billingPeriod.endDate}` : s ? `${when(s.periodStart)} to ${when(s.periodEnd)}` : '—'}</dd></div>
      </dl>
      {usage.error ? <ErrorNote error={usage.error} /> : null}
      <Table
        caption="Included and used in the billing period" rows={ITEMS} rowKey={(i) => i.key}
        columns={[
          { key: 'item', label: 'Item', cell: (i) => i.label },
          { key: 'included', label: 'Included', cell: (i) => (included ? amount(included[i.key]) : amount(p.plan?.included[i.key])) },
          { key: 'used', label: 'Used', cell: (i) => num(used[i.key]).toLocaleString() },
          { key: 'left', label: 'Left', cell: (i) => {
            const inc = included ? included[i.key] : p.plan?.included[i.key];
            if (inc === null || inc === undefined) return '—';
            const left = inc - num(used[i.key]);
            return left <= 0 ? <Badge tone="bad">None left</Badge> : left.toLocaleString();
          } },
          { key: 'overage', label: 'Past it', cell: (i) => {
            if ((included ? included[i.key] : p.plan?.included[i.key]) === null) return '—';
            const rate = p.plan?.overage[({ callMinutes: 'callMinute', texts: 'text', tasks: 'task', conversations: 'conversation', modelTokens: 'modelTokensPer1k' } as const)[i.key]];
            return rate === null || rate === undefined ? 'Tasks wait (no overage sold)' : `${money(rate, p.plan!.currency)}${i.key === 'modelTokens' ? ' per 1,000' : ' each'}`;
          } },
        ]}
      />
      {p.addons.filter((a) => a.removedAt === null).length > 0 ? (
        <p>Add-ons in force: {p.addons.filter((a) => a.removedAt === null).map((a) => `${a.name}${a.appliesToPlan ? '' : ' (does not fit this plan: adds nothing)'}`).join(', ')}.</p>
      ) : null}
      {heldTasks.length > 0 ? (
        <div className="held" role="status">
          <h3>Held back: {heldTasks.length} task{heldTasks.length === 1 ? '' : 's'}</h3>
          <ul>{[...new Set(heldTasks.map((t) => t.heldReason!))].map((r) => <li key={r}>{r}</li>)}</ul>
        </div>
      ) : <p className="muted">No task is held back for an included amount.</p>}
    </Section>
  );
}

function Usage() {
  const acting = useSession();
  const [frequency, setFrequency] = useState<'day' | 'month'>('day');
  const [period, setPeriod] = useState<'current' | 'previous'>('current');
  const usage = useQuery(billingQueries.usage(acting, frequency, period));
  const series = useMemo(() => {
    const rows = (usage.data?.timeseries ?? []) as Array<Record<string, unknown> & { date: string }>;
    return {
      labels: rows.map((r) => r.date),
      counts: [
        { label: 'Calls', values: rows.map((r) => num(r.calls)), color: '#0b5cad' },
        { label: 'Texts', values: rows.map((r) => num(r.texts)), color: '#1a7f37' },
      ],
      minutes: [{ label: 'Call minutes', values: rows.map((r) => num(r.callMinutes)), color: '#8250df' }],
    };
  }, [usage.data]);
  const per = frequency === 'day' ? 'day' : 'month';
  const totals = (usage.data?.usage ?? {}) as Record<string, unknown>;
  return (
    <Section title="Usage">
      <div className="inline-form">
        <Select label="Billing period" value={period} onChange={(e) => setPeriod(e.target.value as 'current' | 'previous')} options={[{ value: 'current', label: 'Current' }, { value: 'previous', label: 'Previous' }]} />
        <Select label="Per" value={frequency} onChange={(e) => setFrequency(e.target.value as 'day' | 'month')} options={[{ value: 'day', label: 'Day' }, { value: 'month', label: 'Month' }]} />
      </div>
      {usage.isPending ? <Loading /> : usage.error ? <ErrorNote error={usage.error} /> : (
        <>
          <p className="muted">{usage.data.billingPeriod.startDate} to {usage.data.billingPeriod.endDate} ({usage.data.timezone}).</p>
          <dl className="stats" aria-label="Totals">
            <div><dt>Calls</dt><dd>{num(totals.calls)}</dd></div>
            <div><dt>Call minutes</dt><dd>{num(totals.callMinutes)}</dd></div>
            <div><dt>Texts</dt><dd>{num(totals.texts)}</dd></div>
            <div><dt>Tasks</dt><dd>{num(totals.tasks)}</dd></div>
            <div><dt>Conversations</dt><dd>{num(totals.conversations)}</dd></div>
          </dl>
          <div className="grid-2">
            <BarChart title={`Calls and texts per ${per}`} labels={series.labels} series={series.counts} />
            <BarChart title={`Call minutes per ${per}`} labels={series.labels} series={series.minutes} />
          </div>
        </>
      )}
    </Section>
  );
}

/** datetime-local value → unix seconds. */
const seconds = (v: string) => Math.floor(new Date(v).getTime() / 1000);

function Period() {
  const { account, orgId } = useSession();
  const client = useQueryClient();
  const [start, setStart] = useState('');
  const [end, setEnd] = useState('');
  const [allowGap, setAllowGap] = useState(false);
  const set = useMutation({
    mutationFn: () => ok(api.POST('/api/v2/billing/billingPeriod', {
      params: { query: { targetAccountId: orgId } },
      body: { startDateTimestamp: seconds(start), endDateTimestamp: seconds(end), allowGap },
    })),
    onSuccess: () => billingChanged(client, orgId),
  });
  const above = account.kind === 'reseller' || account.kind === 'partner';
  const submit = (e: FormEvent) => { e.preventDefault(); set.mutate(); };
  return (
    <Section title="Billing period">
      {!above ? <p className="muted">The billing period follows the subscription (else the calendar month); only the reseller can start a new one.</p> : (
        <form onSubmit={submit} aria-label="Start a billing period">
          <p className="muted">Starts after the current period began and no later than it ends (earlier closes the current one there).</p>
          <div className="inline-form">
            <Field label="Starts" type="datetime-local" value={start} onChange={(e) => setStart(e.target.value)} required />
            <Field label="Ends" type="datetime-local" value={end} onChange={(e) => setEnd(e.target.value)} required />
            <label className="check"><input type="checkbox" checked={allowGap} onChange={(e) => setAllowGap(e.target.checked)} /> Allow a gap after the current period</label>
            <Button kind="primary" type="submit" disabled={set.isPending}>Start period</Button>
          </div>
          <ErrorNote error={set.error} />
          {set.data ? <Note>Billing period {when(set.data.billingPeriod.startDateTimestamp)} to {when(set.data.billingPeriod.endDateTimestamp)} started.</Note> : null}
        </form>
      )}
    </Section>
  );
}

function Plans() {
  const acting = useSession();
  const { orgId, target } = acting;
  const client = useQueryClient();
  const current = usePlan();
  const plans = useQuery(billingQueries.plans(acting));
  const offered = useQuery(billingQueries.offered(acting));
  const [term, setTerm] = useState<'month' | 'year'>('month');
  const subscribe = useMutation({
    mutationFn: (productPlanId: string) => {
      const back = `${window.location.origin}${window.location.pathname}#/billing`;
      return ok(api.POST('/api/v2/product/subscribe', { params: { query: { ...target } }, body: { productPlanId, term, checkoutType: 'redirect', successUrl: back, cancelUrl: back } }));
    },
    onSuccess: () => billingChanged(client, orgId),
  });
  const sub = current.data?.subscription;
  const offeredId = offered.data?.productPlanId ?? null;
  return (
    <Section title="Plans on offer">
      <Select label="Term" value={term} onChange={(e) => setTerm(e.target.value as 'month' | 'year')} options={[{ value: 'month', label: 'Monthly' }, { value: 'year', label: 'Yearly' }]} />
      <ErrorNote error={subscribe.error} />
      {subscribe.data ? (
        subscribe.data.checkoutUrl
          ? <p className="note" role="status">Pay for {subscribe.data.subscription.planName} at the processor: <a href={subscribe.data.checkoutUrl} rel="noopener noreferrer">open the checkout page</a>. The subscription starts when the payment is confirmed.</p>
          : <Note>Subscribed to {subscribe.data.subscription.planName} ({subscribe.data.subscription.term === 'year' ? 'yearly' : 'monthly'}), in force now.</Note>
      ) : null}
      {plans.isPending ? <Loading /> : plans.error ? <ErrorNote error={plans.error} /> : (
        <Table
          caption="Plans on offer" rows={plans.data.plans} rowKey={(p) => p.productPlanId} empty="No plans are offered."
          columns={[
            { key: 'name', label: 'Plan', cell: (p) => <><strong>{p.name}</strong>{p.productPlanId === offeredId ? <> <Badge tone="live">Offered to you</Badge></> : null}<br /><small className="muted">{p.description}</small></> },
            { key: 'price', label: 'Price', cell: (p) => `${money(p.monthlyPrice, p.currency)} / month, ${money(p.yearlyPrice, p.currency)} / year` },
            { key: 'inc', label: 'Includes a month', cell: (p) => `${amount(p.included.callMinutes)} minutes, ${amount(p.included.texts)} texts, ${amount(p.included.tasks)} tasks` },
            { key: 'act', label: 'Subscribe', cell: (p) => {
              const same = sub && sub.state === 'active' && sub.productPlanId === p.productPlanId && sub.term === term;
              return same ? <Badge tone="good">Your plan</Badge>
                : <Button kind="primary" disabled={subscribe.isPending} onClick={() => subscribe.mutate(p.productPlanId)}>Subscribe to {p.name}</Button>;
            } },
          ]}
        />
      )}
      {offered.error ? <ErrorNote error={offered.error} /> : null}
    </Section>
  );
}

function Addons() {
  const acting = useSession();
  const { orgId, target } = acting;
  const client = useQueryClient();
  const plan = usePlan();
  const available = useQuery(billingQueries.addons(acting));
  const refresh = () => billingChanged(client, orgId);
  const add = useMutation({
    mutationFn: (addonId: string) => {
      // Under a payment processor a priced add-on is paid at its checkout, which returns here.
      const back = `${window.location.origin}${window.location.pathname}#/billing`;
      return ok(api.POST('/api/v2/addon/{addonId}', { params: { path: { addonId }, query: { ...target } }, body: { checkoutType: 'redirect', successUrl: back, cancelUrl: back } }));
    },
    onSuccess: refresh,
  });
  const remove = useMutation({
    mutationFn: (addonId: string) => ok(api.DELETE('/api/v2/addon/{addonId}', { params: { path: { addonId }, query: { ...target } } })),
    onSuccess: refresh,
  });
  const inForce = new Set((plan.data?.addons ?? []).filter((a) => a.removedAt === null).map((a) => a.addonId));
  const adds = (a: { adds: Record<Item, number> }) => ITEMS.filter((i) => a.adds[i.key] > 0).map((i) => `${a.adds[i.key].toLocaleString()} ${i.label.toLowerCase()}`).join(', ');
  return (
    <Section title="Add-ons">
      <ErrorNote error={add.error ?? remove.error} />
      {add.data?.checkoutUrl
        ? <p className="note" role="status">Pay for {add.data.addon.name} at the processor: <a href={add.data.checkoutUrl} rel="noopener noreferrer">open the checkout page</a>. The add-on takes effect when the payment is confirmed.</p>
        : null}
      {available.isPending ? <Loading /> : available.error ? <ErrorNote error={available.error} /> : (
        <Table
          caption="Add-ons for the current plan" rows={available.data.addons} rowKey={(a) => a.addonId} empty="No add-ons fit the current plan."
          columns={[
            { key: 'name', label: 'Add-on', cell: (a) => <><strong>{a.name}</strong><br /><small className="muted">{a.description}</small></> },
            { key: 'adds', label: 'Adds each month', cell: adds },
            { key: 'price', label: 'Price', cell: (a) => `${money(a.monthlyPrice, a.currency)} / month` },
            { key: 'state', label: 'State', cell: (a) => (inForce.has(a.addonId) ? <Badge tone="good">In force</Badge> : <Badge>Not added</Badge>) },
            { key: 'act', label: 'Change', cell: (a) => (inForce.has(a.addonId)
              ? <Confirm label={`Remove ${a.name}`} question={`Remove ${a.name}? Its amounts stop counting now.`} confirm="Yes, remove it" disabled={remove.isPending} onConfirm={() => remove.mutate(a.addonId)} />
              : <Button kind="primary" disabled={add.isPending} onClick={() => add.mutate(a.addonId)}>Add {a.name}</Button>) },
          ]}
        />
      )}
    </Section>
  );
}
