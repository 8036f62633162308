// Tasks: the organization's tasks with the filters listTasks offers and pages of 25, refreshed every
// 2 s while any task shown is pending or running; and a form that creates a call, a text or a ping.
import { useState, type FormEvent } from 'react';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { api, ok, when } from '../../api.ts';
import { Link, navigate, useRoute } from '../../router.tsx';
import { taskQueries, tasksChanged } from '../../queries/tasks.ts';
import { useSession } from '../../session.tsx';
import { Button, ErrorNote, Field, Loading, Note, Page, Section, Select, Table, TextArea } from '../../ui/parts.tsx';
import { AgentChoice, Checkbox, localToSeconds, SimulatedBadge, StateBadge, TASK_STATES, TASK_TYPES, type Task } from './common.tsx';

const PAGE = 25;

interface Filters { state: string; type: string; accountId: string; since: string; until: string; sort: string; order: string }
const NO_FILTERS: Filters = { state: '', type: '', accountId: '', since: '', until: '', sort: 'createdAt', order: 'desc' };

export function TaskNav() {
  const { path } = useRoute();
  const here = (to: string) => (path === to ? 'page' as const : undefined);
  return (
    <nav aria-label="Tasks pages" className="actions cp-subnav">
      <Link to="/tasks" aria-current={here('/tasks')}>List</Link>
      <Link to="/tasks/import" aria-current={here('/tasks/import')}>CSV import</Link>
      <Link to="/tasks/daily" aria-current={here('/tasks/daily')}>Daily counts and limits</Link>
    </nav>
  );
}

/** The filters and page live in the fragment (`#/tasks?state=failed&offset=25`): a filtered list can be linked, and survives a reload. */
function filtersOf(query: URLSearchParams): Filters {
  const f = { ...NO_FILTERS };
  for (const k of Object.keys(NO_FILTERS) as (keyof Filters)[]) f[k] = query.get(k) ?? NO_FILTERS[k];
  return f;
}

function go(f: Filters, offset: number): void {
  const q = new URLSearchParams();
  for (const k of Object.keys(NO_FILTERS) as (keyof Filters)[]) if (f[k] !== NO_FILTERS[k]) q.set(k, f[k]);
  if (offset > 0) q.set('offset', String(offset));
  const qs = q.toString();
  navigate(qs ? `/tasks?${qs}` : '/tasks', { replace: true });
}

export default function TasksPage({ query }: { query: URLSearchParams }) {
  const filters = filtersOf(query);
  const offset = Math.max(0, Math.floor(Number(query.get('offset')) || 0));
  return (
    <Page title="Tasks" actions={<TaskNav />}>
      <CreateTask />
      <TaskList key={query.toString()} filters={filters} offset={offset} setOffset={(n) => go(filters, n)} onFilters={(f) => go(f, 0)} />
    </Page>
  );
}

function TaskList({ filters, offset, setOffset, onFilters }: { filters: Filters; offset: number; setOffset: (n: number) => void; onFilters: (f: Filters) => void }) {
  const acting = useSession();
  const [draft, setDraft] = useState<Filters>(filters);
  const set = (k: keyof Filters) => (e: { target: { value: string } }) => setDraft({ ...draft, [k]: e.target.value });
  const query = {
    limit: PAGE, offset,
    sort: filters.sort, order: filters.order,
    ...(filters.state ? { state: filters.state } : {}),
    ...(filters.type ? { type: filters.type } : {}),
    ...(filters.accountId ? { accountId: Number(filters.accountId) } : {}),
    ...(localToSeconds(filters.since) !== undefined ? { since: localToSeconds(filters.since) } : {}),
    ...(localToSeconds(filters.until) !== undefined ? { until: localToSeconds(filters.until) } : {}),
  };
  // States change on their own while tasks run: it refreshes until none shown is pending or running.
  const list = useQuery(taskQueries.list(acting, query));
  const apply = (e: FormEvent) => { e.preventDefault(); onFilters(draft); };
  const total = list.data?.total ?? 0;
  return (
    <Section title="Tasks list">
      <form className="inline-form cp-inline" onSubmit={apply} aria-label="Filter tasks">
        <Select label="State" value={draft.state} onChange={set('state')} options={[{ value: '', label: 'Any' }, ...TASK_STATES]} />
        <Select label="Type" value={draft.type} onChange={set('type')} options={[{ value: '', label: 'Any' }, ...TASK_TYPES]} />
        <AgentChoice label="Agent" value={draft.accountId} onChange={(v) => setDraft({ ...draft, accountId: v })} none="Any" />
        <Field label="Updated since" type="datetime-local" value={draft.since} onChange={set('since')} />
        <Field label="Updated until" type="datetime-local" value={draft.until} onChange={set('until')} />
        <Select label="Sort by" value={draft.sort} onChange={set('sort')} options={[{ value: 'createdAt', label: 'Created' }, { value: 'updatedAt', label: 'Updated' }, { value: 'scheduledFor', label: 'Scheduled for' }]} />
        <Select label="Order" value={draft.order} onChange={set('order')} options={[{ value: 'desc', label: 'Newest first' }, { value: 'asc', label: 'Oldest first' }]} />
        <Button type="submit">Apply filters</Button>
        <Button onClick={() => { setDraft(NO_FILTERS); onFilters(NO_FILTERS); }}>Clear</Button>
      </form>
      {list.isPending ? <Loading what="Loading tasks" /> : list.error ? <ErrorNote error={list.error} /> : (
        <>
          <Table<Task>
            caption="Tasks"
            rows={list.data.tasks}
            rowKey={(t) => t.id}
            empty="No tasks match."
            columns={[
              { key: 'id', label: 'Task', cell: (t) => <Link to={`/tasks/${encodeURIComponent(t.id)}`} className="break">{t.id}</Link> },
              { key: 'type', label: 'Type', cell: (t) => t.type },
              { key: 'target', label: 'Target', cell: (t) => t.target ?? '—' },
              { key: 'state', label: 'State', cell: (t) => <><StateBadge state={t.state} /><SimulatedBadge task={t} /></> },
              { key: 'outcome', label: 'Outcome', cell: (t) => outcome(t) },
              { key: 'attempts', label: 'Attempts', cell: (t) => `${t.attempts} of ${t.maxAttempts}` },
              { key: 'created', label: 'Created', cell: (t) => when(t.createdAt) },
            ]}
          />
          <div className="pager">
            <span role="status">{total === 0 ? 'No tasks' : `Tasks ${offset + 1}–${Math.min(offset + PAGE, total)} of ${total}`}</span>
            <Button disabled={offset === 0} onClick={() => setOffset(Math.max(0, offset - PAGE))}>Previous page</Button>
            <Button disabled={offset + PAGE >= total} onClick={() => setOffset(offset + PAGE)}>Next page</Button>
          </div>
        </>
      )}
    </Section>
  );
}

/** What a task came to, in words: the result's outcome, why it failed, or why a limit holds it. */
export function outcome(t: Task): string {
  const r = t.result as Record<string, unknown> | null;
  if (t.state === 'failed') return t.error ?? 'failed';
  if (r && typeof r.outcome === 'string') return r.outcome;
  if (t.state === 'pending' && t.heldReason) return `held: ${t.heldReason}`;
  if (t.state === 'pending' && t.scheduledFor) return `scheduled for ${when(t.scheduledFor)}`;
  return '—';
}

interface Draft {
  type: string; target: string; greeting: string; content: string; context: string; taskContext: string;
  waitToGreet: boolean; accountId: string; scheduledFor: string; externalTaskId: string; meta: string;
  voicemailAction: string; voicemailMessage: string;
}
const EMPTY: Draft = {
  type: 'call', target: '', greeting: '', content: '', context: '', taskContext: '', waitToGreet: false,
  accountId: '', scheduledFor: '', externalTaskId: '', meta: '', voicemailAction: '', voicemailMessage: '',
};

function CreateTask() {
  const { orgId, target } = useSession();
  const client = useQueryClient();
  const [d, setD] = useState<Draft>(EMPTY);
  const [metaError, setMetaError] = useState<string>('');
  const set = (k: keyof Draft) => (e: { target: { value: string } }) => setD({ ...d, [k]: e.target.value });
  const create = useMutation({
    mutationFn: (body: Record<string, unknown>) => ok(api.POST('/api/v2/tasks', { params: { query: { ...target } }, body: body as { type: string } })),
    onSuccess: () => { setD({ ...EMPTY, type: d.type }); void tasksChanged(client, orgId); },
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    setMetaError('');
    const body: Record<string, unknown> = { type: d.type };
    for (const k of ['target', 'greeting', 'context', 'taskContext', 'externalTaskId'] as const) if (d[k].trim()) body[k] = d[k];
    if (d.type === 'text' && d.content) body.content = d.content;
    if (d.waitToGreet) body.waitToGreet = true;
    if (d.accountId) body.accountId = Number(d.accountId);
    const at = localToSeconds(d.scheduledFor);
    if (at !== undefined) body.scheduledFor = at;
    if (d.meta.trim()) {
      try { body.meta = JSON.parse(d.meta); } catch { setMetaError('meta must be a JSON object, e.g. {"lead": 42}'); return; }
    }
    if (d.type === 'call' && d.voicemailAction) body.voicemail = { action: d.voicemailAction, ...(d.voicemailMessage ? { message: d.voicemailMessage } : {}) };
    create.mutate(body);
  };
  return (
    <Section title="New task">
      <form onSubmit={submit} aria-label="New task">
        <div className="grid-2 cp-grid">
          <Select label="Type" value={d.type} onChange={set('type')} options={[{ value: 'call', label: 'Call' }, { value: 'text', label: 'Text' }, { value: 'ping', label: 'Ping' }]} />
          <Field label="Target" value={d.target} onChange={set('target')} placeholder={d.type === 'ping' ? 'agent username (optional)' : '+14155552671'}
            hint={d.type === 'ping' ? 'Optional: the username of an agent of the organization.' : 'A phone number in international format.'} />
          <Field label="Greeting" value={d.greeting} onChange={set('greeting')} />
          {d.type === 'text' ? <TextArea label="Message" value={d.content} onChange={set('content')} maxLength={1600} hint="At most 1600 characters; without one, the greeting is sent." /> : null}
          <TextArea label="Context" value={d.context} onChange={set('context')} />
          <TextArea label="Task context" value={d.taskContext} onChange={set('taskContext')} />
          <AgentChoice label="Agent" value={d.accountId} onChange={(v) => setD({ ...d, accountId: v })} none="The organization's first agent" hint="Default: the organization's first agent." />
          <Field label="Scheduled for" type="datetime-local" value={d.scheduledFor} onChange={set('scheduledFor')} hint="Empty: as soon as possible (your browser's time zone)." />
          <Field label="External task id" value={d.externalTaskId} onChange={set('externalTaskId')} maxLength={255} />
          <TextArea label="Meta (JSON object)" value={d.meta} onChange={set('meta')} />
          {d.type === 'call' ? (
            <>
              <Select label="When a voicemail answers" value={d.voicemailAction} onChange={set('voicemailAction')}
                options={[{ value: '', label: "The agent's setting" }, { value: 'hangup', label: 'Hang up' }, { value: 'leave-message', label: 'Leave a message' }, { value: 'continue', label: 'Continue' }]} />
              {d.voicemailAction === 'leave-message' ? <Field label="Voicemail message" value={d.voicemailMessage} onChange={set('voicemailMessage')} maxLength={1000} /> : null}
            </>
          ) : null}
        </div>
        <Checkbox label="Wait to greet (let the callee speak first)" checked={d.waitToGreet} onChange={(v) => setD({ ...d, waitToGreet: v })} />
        <div className="actions"><Button kind="primary" type="submit" disabled={create.isPending}>Create task</Button></div>
        {metaError ? <p role="alert" className="error">{metaError}</p> : null}
        <ErrorNote error={create.error} />
        {create.data ? (
          <Note>
            Task <Link to={`/tasks/${encodeURIComponent(create.data.task.id)}`}>{create.data.task.id}</Link> created ({create.data.task.state}).
            {create.data.warnings?.length ? ` ${create.data.warnings.join(' ')}` : ''}
          </Note>
        ) : null}
      </form>
    </Section>
  );
}
