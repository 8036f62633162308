// Across organizations (#/overview; partners and resellers): the figures of every organization below
// the account over a window (GET /api/v2/stats/overview, a callplane extension): calls and texts per
// day as a chart, each organization's calls, texts, minutes, tokens, success rate, cost and cost per
// call, the organizations near their plan's included amounts (each linking to its billing page),
// and the calls and conversations in progress across them (the live feed, GET
// /api/v2/conversations/live, which covers every organization below the account).
import { useEffect, useMemo, useState, type FormEvent } from 'react';
import { keepPreviousData, useQuery } from '@tanstack/react-query';
import { api, ok, when } from '../../api.ts';
import { Link, navigate } from '../../router.tsx';
import { useSession } from '../../session.tsx';
import { BarChart } from '../../ui/chart.tsx';
import { AccountName } from '../../ui/names.tsx';
import './across.css';
import { Badge, Button, ErrorNote, Field, Loading, Note, Page, Section, Table } from '../../ui/parts.tsx';
import { applyEvent, followLive, type FeedStatus, type LiveCall } from '../conversations/live-feed.ts';

const PAGE = 25;
const ITEM_WORDS: Record<string, string> = {
  callMinutes: 'call minutes', texts: 'texts', tasks: 'tasks', conversations: 'conversations', modelTokens: 'model tokens',
};

const percent = (rate: number | null) => (rate === null ? '—' : `${Math.round(rate * 1000) / 10} %`);
function money(amount: number | null, currency: string | null): string {
  if (amount === null || currency === null) return '—';
  try {
    return new Intl.NumberFormat('en', { style: 'currency', currency, maximumFractionDigits: 4 }).format(amount);
  } catch {
    return `${amount} ${currency}`;
  }
}
const count = (n: number) => n.toLocaleString('en');

export default function Across({ query }: { query: URLSearchParams }) {
  const { account } = useSession();
  const from = query.get('from') ?? '';
  const to = query.get('to') ?? '';
  const offset = Math.max(0, Number(query.get('offset')) || 0);
  const go = (next: { from?: string; to?: string; offset?: number }) => {
    const q = new URLSearchParams();
    const f = next.from ?? from; const t = next.to ?? to; const o = next.offset ?? offset;
    if (f) q.set('from', f);
    if (t) q.set('to', t);
    if (o) q.set('offset', String(o));
    navigate(`/overview${q.size ? `?${q}` : ''}`);
  };
  const overview = useQuery({
    queryKey: ['overview', account.id, from, to, offset],
    queryFn: () => ok(api.GET('/api/v2/stats/overview', { params: { query: { startDate: from || undefined, endDate: to || undefined, limit: PAGE, offset } } })),
    refetchInterval: 30_000,
    placeholderData: keepPreviousData,
  });
  const o = overview.data;

  const submit = (e: FormEvent<HTMLFormElement>) => {
    e.preventDefault();
    const field = (name: string) => (e.currentTarget.elements.namedItem(name) as HTMLInputElement | null)?.value ?? '';
    go({ from: field('from'), to: field('to'), offset: 0 });
  };

  const chartKey = o ? JSON.stringify(o.days) : '';
  const chart = useMemo(() => {
    if (!chartKey) return null;
    const days = JSON.parse(chartKey) as { date: string; calls: number; texts: number }[];
    return {
      labels: days.map((d) => d.date.slice(5)),
      series: [
        { label: 'Calls', values: days.map((d) => d.calls), color: '#0b5cad' },
        { label: 'Texts', values: days.map((d) => d.texts), color: '#8250df' },
      ],
    };
  }, [chartKey]);

  return (
    <Page title="Across organizations">
      <form key={`${from}/${to}`} className="inline-form" onSubmit={submit} aria-label="Window">
        <Field label="From" name="from" type="date" defaultValue={from} hint="Default: the first day of this month" />
        <Field label="To" name="to" type="date" defaultValue={to} hint="Default: today" />
        <Button type="submit">Show</Button>
      </form>
      {overview.error ? <ErrorNote error={overview.error} /> : !o ? <Loading what="Loading the overview" /> : (
        <>
          <p role="status" data-testid="overview-window">
            {o.window.startDate} to {o.window.endDate} ({o.timezone}): {count(o.totals.organizations)} organization{o.totals.organizations === 1 ? '' : 's'}.
          </p>
          <Section title="In total">
            <dl className="figures" data-testid="overview-totals">
              <dt>Calls</dt><dd>{count(o.totals.calls)}</dd>
              <dt>Texts</dt><dd>{count(o.totals.texts)}</dd>
              <dt>Call minutes</dt><dd>{count(o.totals.callMinutes)}</dd>
              <dt>Model tokens</dt><dd>{count(o.totals.modelTokens)}</dd>
              <dt>Success rate</dt><dd>{percent(o.totals.successRate)} <span className="muted">({o.totals.succeeded} of {o.totals.analysed} analysed)</span></dd>
              <dt>Cost</dt><dd>{money(o.totals.cost, o.totals.currency)}</dd>
              <dt>Cost per call</dt><dd>{money(o.totals.costPerCall, o.totals.currency)}</dd>
            </dl>
            <p className="muted">
              Success: an analysed conversation whose outcome is {o.successOutcomes.join(' or ')}. Cost: as billing costs it — the plan&apos;s
              and add-ons&apos; prices plus usage past the included amounts (simulated calls, texts and tokens are not costed). {o.message && o.message !== 'Stats fetched successfully' ? o.message.replace(/^Stats fetched successfully; /, '') : ''}
            </p>
          </Section>
          <Section title="Calls and texts per day">
            {chart ? <div className="cp-chart"><BarChart title={`Calls and texts per day, ${o.window.startDate} to ${o.window.endDate} (time zone ${o.timezone})`} labels={chart.labels} series={chart.series} /></div> : null}
          </Section>
          <Section title={`Near their plan's limits (${o.nearLimit.length})`}>
            {o.nearLimit.length === 0 ? <p className="muted">No organization has used {Math.round(o.nearLimitShare * 100)} % of an amount its plan includes.</p> : (
              <ul className="near-limit" aria-label="Organizations near their plan's limits">
                {o.nearLimit.map((n) => (
                  <li key={`${n.organizationId}:${n.item}`}>
                    <Badge tone={n.share >= 1 ? 'bad' : 'warn'}>{n.share >= 1 ? 'Past' : 'Near'}</Badge>{' '}
                    <Link to={`/o/${n.organizationId}/billing`}>{n.name}</Link>: {count(n.used)} of {count(n.included)} {ITEM_WORDS[n.item] ?? n.item} ({Math.round(n.share * 100)} %)
                  </li>
                ))}
              </ul>
            )}
          </Section>
          <Section title="Organizations">
            <Table
              caption="Each organization's figures in the window"
              rowKey={(r) => r.organizationId}
              rows={o.organizations}
              empty="No organization yet."
              columns={[
                { key: 'name', label: 'Organization', cell: (r) => <><Link to={`/o/${r.organizationId}`}>{r.name}</Link>{r.active ? null : <> <Badge tone="warn">Suspended</Badge></>}</> },
                { key: 'calls', label: 'Calls', cell: (r) => count(r.calls) },
                { key: 'texts', label: 'Texts', cell: (r) => count(r.texts) },
                { key: 'minutes', label: 'Minutes', cell: (r) => count(r.callMinutes) },
                { key: 'tokens', label: 'Model tokens', cell: (r) => count(r.modelTokens) },
                { key: 'success', label: 'Success rate', cell: (r) => `${percent(r.successRate)}${r.analysed ? ` (${r.succeeded}/${r.analysed})` : ''}` },
                { key: 'cost', label: 'Cost', cell: (r) => money(r.cost, r.currency) },
                { key: 'perCall', label: 'Cost per call', cell: (r) => money(r.costPerCall, r.currency) },
                { key: 'billing', label: 'Billing', cell: (r) => <Link to={`/o/${r.organizationId}/billing`} aria-label={`Billing of ${r.name}`}>Billing</Link> },
              ]}
            />
            {o.total > PAGE ? (
              <p>
                <Button disabled={offset === 0} onClick={() => go({ offset: Math.max(0, offset - PAGE) })}>Previous</Button>{' '}
                <span>{offset + 1}–{Math.min(offset + PAGE, o.total)} of {o.total}</span>{' '}
                <Button disabled={offset + PAGE >= o.total} onClick={() => go({ offset: offset + PAGE })}>Next page</Button>
              </p>
            ) : null}
          </Section>
        </>
      )}
      <LiveAcross />
    </Page>
  );
}

function feedWords(s: FeedStatus): string {
  switch (s.state) {
    case 'connecting': return 'Connecting to the live feed…';
    case 'connected': return 'Connected: calls appear as they start, across every organization.';
    case 'reconnecting': return `Reconnecting (attempt ${s.attempt}, in ${s.inSeconds} s): ${s.reason}.`;
    case 'stopped': return `Not connected: ${s.reason}`;
  }
}

/** The conversations in progress below the account, from its own live feed (no targetAccountId: its whole subtree). */
function LiveAcross() {
  const [calls, setCalls] = useState<LiveCall[]>([]);
  const [status, setStatus] = useState<FeedStatus>({ state: 'connecting' });
  useEffect(() => {
    const abort = new AbortController();
    void followLive({ target: {}, signal: abort.signal, onEvent: (e) => setCalls((cs) => applyEvent(cs, e)), onStatus: setStatus });
    return () => abort.abort();
  }, []);
  const open = calls.filter((c) => c.endedAt === null && !c.gone);
  return (
    <Section title={`Live across organizations (${open.length})`}>
      <p role="status" className={status.state === 'connected' || status.state === 'connecting' ? 'note' : 'error'} data-feed={status.state}>{feedWords(status)}</p>
      <Table
        caption="Calls and conversations in progress across organizations"
        rowKey={(c) => c.uuid}
        rows={open}
        empty="Nothing is in progress in any organization."
        columns={[
          { key: 'org', label: 'Organization', cell: (c) => <Link to={`/o/${c.orgId}/live`}><AccountName id={c.orgId} /></Link> },
          { key: 'kind', label: 'What', cell: (c) => `${c.eventType === 'call' ? 'Call' : 'Conversation'} ${c.direction === 'inbound' ? 'from' : 'to'} ${c.counterpartName ?? c.counterpart}` },
          { key: 'channel', label: 'Channel', cell: (c) => c.channel },
          { key: 'started', label: 'Started', cell: (c) => when(c.startedAt) },
          { key: 'last', label: 'Last line', cell: (c) => c.messages.at(-1)?.message ?? <span className="muted">Nothing said yet</span> },
        ]}
      />
      {status.state === 'stopped' ? <Note>Reload the page to try again.</Note> : null}
    </Section>
  );
}
