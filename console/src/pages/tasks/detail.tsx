// One task: every field getTask answers (state, attempts, times, the result and error), refreshed
// every 2 s while it is pending or running; cancel (updateTask state "canceled") and delete
// (deleteTask), each asked first.
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { api, ok, when } from '../../api.ts';
import { Link, navigate } from '../../router.tsx';
import { taskQueries, tasksChanged } from '../../queries/tasks.ts';
import { useSession } from '../../session.tsx';
import { ErrorNote, Loading, Note, Page, Section, Table } from '../../ui/parts.tsx';
import { Confirm } from '../../ui/confirm.tsx';
import { AccountName } from '../../ui/names.tsx';
import { isSimulated, ResultFacts, SimulatedBadge, StateBadge, type Task } from './common.tsx';
import { TaskNav } from './list.tsx';

export default function TaskDetail({ params }: { params: Record<string, string> }) {
  const acting = useSession();
  const { orgId, target } = acting;
  const client = useQueryClient();
  const id = params.taskId;
  const task = useQuery(taskQueries.one(acting, id));
  const cancel = useMutation({
    mutationFn: () => ok(api.POST('/api/v2/tasks/{taskId}', { params: { path: { taskId: id }, query: { ...target } }, body: { state: 'canceled' } })),
    onSuccess: () => void tasksChanged(client, orgId),
  });
  const remove = useMutation({
    mutationFn: () => ok(api.DELETE('/api/v2/tasks/{taskId}', { params: { path: { taskId: id }, query: { ...target } } })),
    onSuccess: () => { void tasksChanged(client, orgId); navigate('/tasks'); },
  });
  const t = task.data?.task;
  return (
    <Page title={`Task ${id}`} actions={<TaskNav />}>
      {task.isPending ? <Loading what="Loading the task" /> : task.error ? <ErrorNote error={task.error} /> : t ? (
        <>
          <Section title="State" actions={
            <>
              {t.state === 'pending' || t.state === 'running'
                ? <Confirm label="Cancel task" question="Cancel this task?" confirm="Yes, cancel it" onConfirm={() => cancel.mutate()} disabled={cancel.isPending || !!t.cancelRequestedAt} />
                : null}
              {t.state !== 'running'
                ? <Confirm label="Delete task" question="Delete this task and its record?" confirm="Yes, delete it" onConfirm={() => remove.mutate()} disabled={remove.isPending} />
                : null}
            </>
          }>
            <p><StateBadge state={t.state} /><SimulatedBadge task={t} /> {t.state === 'running' && t.cancelRequestedAt ? 'Asked to stop; it ends as soon as the carrier has hung up.' : null}</p>
            {isSimulated(t) ? <Note>SIMULATED: this task ran on the simulated carrier; nothing was dialled or sent, and no conversation was held.</Note> : null}
            {t.state === 'pending' && t.heldReason ? <p className="held" role="status"><strong>Waiting:</strong> {t.heldReason}. Next considered {when(t.runAt)}.</p> : null}
            <ErrorNote error={cancel.error ?? remove.error} />
            {cancel.isSuccess && cancel.data.task.state === 'canceled' ? <Note>Canceled.</Note> : null}
            <Facts task={t} />
          </Section>
          <Section title="Outcome">
            {t.error ? <p role="alert" className="error">{t.error}</p> : null}
            {t.result ? <ResultFacts result={t.result as Record<string, unknown>} /> : <p className="muted">No result yet.</p>}
          </Section>
          <Section title="Attempts">
            <Table
              caption="Attempt log" rows={t.attemptLog} rowKey={(a) => `${a.attempt}-${a.at}`} empty="No call or text has gone out yet."
              columns={[
                { key: 'n', label: 'Attempt', cell: (a) => a.attempt },
                { key: 'at', label: 'Went out', cell: (a) => when(a.at) },
                { key: 'result', label: 'Result', cell: (a) => a.result ?? 'under way' },
                { key: 'from', label: 'Caller ID', cell: (a) => (a.callerId ? `${a.callerId}${a.callerIdBasis ? ` (${a.callerIdBasis})` : ''}` : 'the provider\'s default') },
                { key: 'conv', label: 'Conversation', cell: (a) => (a.conversationId && a.roomId
                  ? <Link to={`/conversations/${encodeURIComponent(a.roomId)}/${encodeURIComponent(a.conversationId)}`}>Open the conversation</Link>
                  : a.conversationId ? <code>{a.conversationId}</code> : isSimulated(t) ? 'none (SIMULATED)' : 'none') },
              ]}
            />
          </Section>
          <Section title="What it says">
            <dl className="kv">
              <dt>Greeting</dt><dd>{t.greeting ?? '—'}</dd>
              {t.type === 'text' ? <><dt>Message</dt><dd>{t.content ?? '—'}</dd></> : null}
              <dt>Context</dt><dd>{t.context ?? '—'}</dd>
              <dt>Task context</dt><dd>{t.taskContext ?? '—'}</dd>
              <dt>Wait to greet</dt><dd>{t.waitToGreet ? 'yes' : 'no'}</dd>
              {t.type === 'call' ? <><dt>Voicemail</dt><dd>{t.voicemail ? `${t.voicemail.action}${t.voicemail.message ? `: ${t.voicemail.message}` : ''}` : "the agent's setting"}</dd></> : null}
              <dt>External task id</dt><dd>{t.externalTaskId ?? '—'}</dd>
              <dt>Meta</dt><dd>{t.meta ? <code>{JSON.stringify(t.meta)}</code> : '—'}</dd>
            </dl>
          </Section>
        </>
      ) : null}
    </Page>
  );
}

function Facts({ task: t }: { task: Task }) {
  return (
    <dl className="kv">
      <dt>Type</dt><dd>{t.type}</dd>
      <dt>Target</dt><dd>{t.target ?? '—'}</dd>
      <dt>Agent</dt><dd><AccountName id={t.accountId} /></dd>
      <dt>Attempts</dt><dd>{t.attempts} of {t.maxAttempts}</dd>
      <dt>Provider</dt><dd>{t.provider ?? '—'}{t.providerRef ? ` (${t.providerRef})` : ''}</dd>
      <dt>Created</dt><dd>{when(t.createdAt)}</dd>
      <dt>Scheduled for</dt><dd>{t.scheduledFor ? when(t.scheduledFor) : 'as soon as possible'}</dd>
      {t.state === 'pending' ? <><dt>Next considered</dt><dd>{when(t.runAt)}</dd></> : null}
      {t.heldReason ? <><dt>Held back by</dt><dd>{t.heldReason}</dd></> : null}
      <dt>Started</dt><dd>{when(t.startedAt)}</dd>
      <dt>Finished</dt><dd>{when(t.finishedAt)}</dd>
      <dt>Updated</dt><dd>{when(t.updatedAt)}</dd>
      {t.cancelRequestedAt ? <><dt>Cancel asked</dt><dd>{when(t.cancelRequestedAt)}</dd></> : null}
    </dl>
  );
}
