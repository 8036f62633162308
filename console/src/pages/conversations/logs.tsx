// Logs: one entry per conversation that started in a window (GET /api/v2/logs), filtered by
// channel, outcome and counterpart, each linked to its conversation.
import { useQuery } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { when } from '../../api.ts';
import { conversationQueries, type LogFilters as Filters } from '../../queries/conversations.ts';
import { Link } from '../../router.tsx';
import { useSession } from '../../session.tsx';
import { Button, ErrorNote, Field, Loading, Page, Section, Select, Table } from '../../ui/parts.tsx';
import { OutcomeBadge, conversationPath } from './parts.tsx';

type Entry = Record<string, unknown>;

const CHANNELS = [{ value: '', label: 'any' }, ...['voice', 'sip', 'sms', 'api', 'web'].map((v) => ({ value: v, label: v }))];
const OUTCOMES = [{ value: '', label: 'any' }, ...['open', 'completed', 'ended_by_agent', 'transferred', 'no_response', 'hung_up', 'failed', 'voicemail'].map((v) => ({ value: v, label: v.replace(/_/g, ' ') }))];
const text = (v: unknown) => typeof v === 'string' || typeof v === 'number' ? String(v) : '—';

export default function Logs() {
  const acting = useSession();
  const [form, setForm] = useState<Filters>({ days: '7', channel: '', outcome: '', counterpart: '' });
  const [applied, setApplied] = useState<Filters>(form);
  const [page, setPage] = useState(1);
  const logs = useQuery(conversationQueries.logs(acting, applied, page));
  const submit = (e: FormEvent) => { e.preventDefault(); setPage(1); setApplied(form); };
  const set = (k: keyof Filters) => (e: { target: { value: string } }) => setForm({ ...form, [k]: e.target.value });
  const rows = (logs.data?.logs ?? []) as Entry[];
  return (
    <Page title="Logs" actions={<Link to="/conversations">The inbox</Link>}>
      <Section title="Search">
        <form className="inline-form" onSubmit={submit} aria-label="Search the logs">
          <Field label="Last days" type="number" min={1} max={365} value={form.days} onChange={set('days')} />
          <Select label="Channel" options={CHANNELS} value={form.channel} onChange={set('channel')} />
          <Select label="Outcome" options={OUTCOMES} value={form.outcome} onChange={set('outcome')} />
          <Field label="Counterpart" placeholder="+14155550100" value={form.counterpart} onChange={set('counterpart')} />
          <Button type="submit" kind="primary">Search</Button>
        </form>
        <ErrorNote error={logs.error} />
      </Section>
      <Section title="Conversations">
        {logs.isPending ? <Loading /> : logs.error ? null : (
          <>
            <p className="muted">{logs.data.pagination.totalCount} found.</p>
            <div className="conv-wide"><Table caption="Conversation logs" rows={rows} rowKey={(r) => String(r.uuid)} empty="No conversation started in that window with those filters."
              columns={[
                { key: 'at', label: 'Started', cell: (r) => <Link to={conversationPath(String(r.roomId), String(r.uuid))}>{when(r.startedAt as number)}</Link> },
                { key: 'who', label: 'Counterpart', cell: (r) => text(r.counterpartName ?? r.counterpart) },
                { key: 'ch', label: 'Channel', cell: (r) => `${text(r.channel)} (${text(r.direction)})` },
                { key: 'out', label: 'Outcome', cell: (r) => <OutcomeBadge outcome={String(r.outcome)} /> },
                { key: 'dur', label: 'Duration', cell: (r) => typeof r.duration === 'number' ? `${r.duration} s` : '—' },
                { key: 'sum', label: 'Summary', cell: (r) => text(r.summary) },
              ]} /></div>
            {logs.data.pagination.totalPages > 1 ? (
              <div className="actions">
                <Button disabled={page <= 1} onClick={() => setPage(page - 1)}>Previous page</Button>
                <span>Page {page} of {logs.data.pagination.totalPages}</span>
                <Button disabled={!logs.data.pagination.hasMore} onClick={() => setPage(page + 1)}>Next page</Button>
              </div>
            ) : null}
          </>
        )}
      </Section>
    </Page>
  );
}
