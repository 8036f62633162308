// The agent's Tests tab (docs/testing-agents.md, docs/console.md "Agent tests"): its test suites,
// each edited as the YAML document a customer keeps in a repository (saved through the import
// operation, so the API's refusal — naming the path inside the document — is shown beside the
// editor), imported from a file and exported as one; a run started (text or voice, iterations,
// staging or live) and watched until it ends; its results with each scenario's pass rate, each
// check's and the judge's reasons, voice mode's latencies, and each conversation's transcript; and
// the regression view (the run against the previous run of the suite on live). Loaded only when the
// tab is opened (agent.tsx mounts it lazily).
import { useRef, useState, type ChangeEvent } from 'react';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { api, ok, when } from '../../api.ts';
import { agentTestQueries, runsChanged, suitesChanged } from '../../queries/agent-tests.ts';
import { useBlobUrl } from '../../ui/blob-url.ts';
import { Badge, Button, ErrorNote, Field, Loading, Note, Section, Select, Table, TextArea } from '../../ui/parts.tsx';
import './tests.css';

type Runs = Awaited<ReturnType<NonNullable<ReturnType<typeof agentTestQueries.runs>['queryFn']>>>;
type RunRow = Runs['runs'][number];
type RunAnswer = Awaited<ReturnType<NonNullable<ReturnType<typeof agentTestQueries.run>['queryFn']>>>;
type ScenarioResult = RunAnswer['results']['scenarios'][number];

/** What a new suite starts from: one scenario with a check of each common kind. */
const TEMPLATE = `name: Front desk
settings:
  iterations: 1
scenarios:
  - name: books a cleaning
    persona:
      instructions: You are Sam. You want a dental cleaning on Tuesday morning. Answer briefly.
    maxTurns: 6
    toolMocks: []
    checks:
      - said: "Tuesday"
      - neverSaid: "I can't help"
      - maxTurns: 6
`;

const pct = (n: number | null | undefined) => (n === null || n === undefined ? '—' : `${Math.round(n * 100)}%`);

export default function Tests({ agentId }: { agentId: number }) {
  const [runId, setRunId] = useState<string | null>(null);
  return (
    <div className="agent-tests">
      <Suites agentId={agentId} />
      <StartRun agentId={agentId} onStarted={setRunId} />
      <RunsList agentId={agentId} selected={runId} onSelect={setRunId} />
      {runId ? <RunResults agentId={agentId} runId={runId} /> : null}
    </div>
  );
}

function Suites({ agentId }: { agentId: number }) {
  const client = useQueryClient();
  const suites = useQuery(agentTestQueries.suites(agentId));
  const [text, setText] = useState('');
  const [format, setFormat] = useState<'yaml' | 'json'>('yaml');
  const [editing, setEditing] = useState<string | null>(null);
  const file = useRef<HTMLInputElement>(null);
  const save = useMutation({
    mutationFn: (v: { document: string; format: 'yaml' | 'json' }) => ok(api.POST('/api/v2/agent/{agentId}/tests/suites/import', {
      params: { path: { agentId: `camp${agentId}` } }, body: v,
    })),
    onSuccess: (r) => { setEditing(r.suite.id); void suitesChanged(client, agentId); },
  });
  const edit = async (suiteId: string) => {
    save.reset();
    const doc = await client.fetchQuery({ ...agentTestQueries.yaml(agentId, suiteId), staleTime: 0 });
    setText(doc.document);
    setFormat('yaml');
    setEditing(suiteId);
  };
  const imported = async (e: ChangeEvent<HTMLInputElement>) => {
    const f = e.target.files?.[0];
    if (!f) return;
    const content = await f.text();
    const fmt = /\.json$/i.test(f.name) ? 'json' as const : 'yaml' as const;
    setText(content);
    setFormat(fmt);
    save.mutate({ document: content, format: fmt });
    e.target.value = '';
  };
  type Suite = NonNullable<typeof suites.data>['suites'][number];
  return (
    <Section title="Test suites" actions={<Button onClick={() => { save.reset(); setText(TEMPLATE); setFormat('yaml'); setEditing(null); }}>New suite</Button>}>
      {suites.isPending ? <Loading /> : suites.error ? <ErrorNote error={suites.error} /> : (
        <Table<Suite> caption="The agent's test suites" rows={suites.data.suites} rowKey={(s) => s.id} empty="No suites yet: start one with New suite, or import a file."
          columns={[
            { key: 'name', label: 'Suite', cell: (s) => s.name },
            { key: 'version', label: 'Version', cell: (s) => s.version },
            { key: 'scenarios', label: 'Scenarios', cell: (s) => s.scenarios },
            { key: 'edit', label: '', cell: (s) => <Button onClick={() => void edit(s.id)} aria-label={`Edit ${s.name}`}>Edit</Button> },
            { key: 'export', label: '', cell: (s) => <Export agentId={agentId} suiteId={s.id} name={s.name} /> },
          ]} />
      )}
      <div className="field">
        <label htmlFor="suite-file">Import a YAML or JSON file</label>
        <input id="suite-file" ref={file} type="file" accept=".yaml,.yml,.json" onChange={(e) => void imported(e)} />
      </div>
      <form aria-label="Suite document" onSubmit={(e) => { e.preventDefault(); save.mutate({ document: text, format }); }}>
        <TextArea label={`Suite document (${format.toUpperCase()})`} rows={18} spellCheck={false} value={text} onChange={(e) => setText(e.target.value)}
          hint="Saving imports it: a new suite, or the next version of the agent's suite of the same name (docs/testing-agents.md)." />
        <div className="actions">
          <Button kind="primary" type="submit" disabled={save.isPending || text.trim() === ''}>Save suite</Button>
          {editing ? <span className="muted">Editing {suites.data?.suites.find((s) => s.id === editing)?.name ?? editing}</span> : null}
        </div>
        <ErrorNote error={save.error} />
        {save.data ? <Note>{save.data.created ? 'Created' : 'Saved'} suite {save.data.suite.name}, version {save.data.suite.version}.</Note> : null}
      </form>
    </Section>
  );
}

/** A download of the suite's YAML (the page fetches it, then offers it as a file). */
function Export({ agentId, suiteId, name }: { agentId: number; suiteId: string; name: string }) {
  const [blob, setBlob] = useState<Blob | null>(null);
  const link = useBlobUrl<HTMLAnchorElement>(blob, 'href');
  const client = useQueryClient();
  const fetchIt = useMutation({
    mutationFn: () => client.fetchQuery({ ...agentTestQueries.yaml(agentId, suiteId), staleTime: 0 }),
    onSuccess: (d) => setBlob(new Blob([d.document], { type: 'application/yaml' })),
  });
  if (blob) return <a ref={link} download={`${name.replace(/[^\w.-]+/g, '-')}.yaml`}>Download {name}.yaml</a>;
  return (
    <>
      <Button onClick={() => fetchIt.mutate()} disabled={fetchIt.isPending} aria-label={`Export ${name}`}>Export</Button>
      <ErrorNote error={fetchIt.error} />
    </>
  );
}

function StartRun({ agentId, onStarted }: { agentId: number; onStarted: (runId: string) => void }) {
  const client = useQueryClient();
  const suites = useQuery(agentTestQueries.suites(agentId));
  const [suiteId, setSuiteId] = useState('');
  const [mode, setMode] = useState<'text' | 'voice'>('text');
  const [version, setVersion] = useState('staging');
  const [iterations, setIterations] = useState('');
  const start = useMutation({
    mutationFn: () => ok(api.POST('/api/v2/agent/{agentId}/tests/runs', {
      params: { path: { agentId: `camp${agentId}` } },
      body: { suiteId: suiteId || suites.data?.suites[0]?.id || '', mode, version, ...(iterations.trim() ? { iterations: Number(iterations) } : {}) },
    })),
    onSuccess: (r) => { onStarted(r.run.id); void runsChanged(client, agentId); },
  });
  const options = (suites.data?.suites ?? []).map((s) => ({ value: s.id, label: `${s.name} (version ${s.version})` }));
  return (
    <Section title="Run">
      <form aria-label="Start a test run" onSubmit={(e) => { e.preventDefault(); start.mutate(); }}>
        <div className="row">
          <Select label="Suite" options={options} value={suiteId || options[0]?.value || ''} onChange={(e) => setSuiteId(e.target.value)} />
          <Select label="Mode" options={[{ value: 'text', label: 'Text' }, { value: 'voice', label: 'Voice (a call over SIP)' }]} value={mode} onChange={(e) => setMode(e.target.value as 'text' | 'voice')} />
          <Select label="Configuration" options={[{ value: 'staging', label: 'Staging' }, { value: 'live', label: 'Live' }]} value={version} onChange={(e) => setVersion(e.target.value)} />
          <Field label="Iterations" type="number" min={1} max={20} placeholder="the suite's" value={iterations} onChange={(e) => setIterations(e.target.value)} />
        </div>
        <Button kind="primary" type="submit" disabled={start.isPending || options.length === 0}>Start run</Button>
        <ErrorNote error={start.error} />
      </form>
    </Section>
  );
}

function RunsList({ agentId, selected, onSelect }: { agentId: number; selected: string | null; onSelect: (id: string) => void }) {
  const runs = useQuery(agentTestQueries.runs(agentId));
  const suites = useQuery(agentTestQueries.suites(agentId));
  const nameOf = (id: string) => suites.data?.suites.find((s) => s.id === id)?.name ?? id;
  return (
    <Section title="Runs">
      {runs.isPending ? <Loading /> : runs.error ? <ErrorNote error={runs.error} /> : (
        <Table<RunRow> caption="Test runs, newest first" rows={runs.data.runs} rowKey={(r) => r.id} empty="No runs yet."
          columns={[
            { key: 'id', label: 'Run', cell: (r) => <Button onClick={() => onSelect(r.id)} aria-pressed={selected === r.id}>{r.id}</Button> },
            { key: 'suite', label: 'Suite', cell: (r) => `${nameOf(r.suiteId)} v${r.suiteVersion}` },
            { key: 'target', label: 'Against', cell: (r) => (r.target === 'version' ? `version ${r.agentVersion}` : r.target) },
            { key: 'mode', label: 'Mode', cell: (r) => r.mode },
            { key: 'progress', label: 'Progress', cell: (r) => `${r.progress.done}/${r.progress.total}` },
            { key: 'state', label: 'State', cell: (r) => <RunState run={r} /> },
            { key: 'at', label: 'Started', cell: (r) => when(r.createdAt) },
          ]} />
      )}
    </Section>
  );
}

function RunState({ run }: { run: Pick<RunRow, 'state' | 'passed'> }) {
  if (run.state === 'finished') return run.passed ? <Badge tone="good">passed</Badge> : <Badge tone="bad">failed</Badge>;
  if (run.state === 'failed' || run.state === 'canceled') return <Badge tone="bad">{run.state}</Badge>;
  return <Badge tone="live">{run.state}</Badge>;
}

function RunResults({ agentId, runId }: { agentId: number; runId: string }) {
  const run = useQuery(agentTestQueries.run(agentId, runId));
  const done = run.data && !['pending', 'running'].includes(run.data.run.state);
  return (
    <Section title={`Run ${runId}`}>
      {run.isPending ? <Loading /> : run.error ? <ErrorNote error={run.error} /> : (
        <>
          <p>
            <RunState run={run.data.run} /> <span className="muted">{run.data.run.mode} mode · {run.data.run.progress.done} of {run.data.run.progress.total} conversations · pass rate {pct(run.data.results.passRate)}</span>
          </p>
          {run.data.run.lastError ? <p role="alert" className="error">{run.data.run.lastError}</p> : null}
          {run.data.results.scenarios.map((s) => <Scenario key={s.index} agentId={agentId} scenario={s} since={run.data.run.createdAt} />)}
          {done ? <Comparison agentId={agentId} runId={runId} /> : null}
        </>
      )}
    </Section>
  );
}

function Scenario({ agentId, scenario: s, since }: { agentId: number; scenario: ScenarioResult; since: number }) {
  return (
    <article className="card" aria-label={`Scenario ${s.name}`}>
      <h3>{s.passed ? <Badge tone="good">passed</Badge> : <Badge tone="bad">failed</Badge>} {s.name} <span className="muted">pass rate {pct(s.passRate)}</span></h3>
      <Table<ScenarioResult['checks'][number]> caption={`Checks of ${s.name}`} rows={s.checks} rowKey={(c) => c.what}
        columns={[
          { key: 'what', label: 'Check', cell: (c) => c.what },
          { key: 'rate', label: 'Pass rate', cell: (c) => (c.passRate === null ? <span className="muted">not decided{c.simulated ? ' (SIMULATED)' : ''}</span> : pct(c.passRate)) },
        ]} />
      {s.iterations.map((it) => (
        <details key={it.iteration} open={!it.passed}>
          <summary>Iteration {it.iteration + 1}: {it.passed ? 'passed' : 'failed'}, {it.turns} agent turns{it.error ? ` — ${it.error}` : ''}</summary>
          <ul aria-label={`Reasons, iteration ${it.iteration + 1} of ${s.name}`}>
            {it.checks.map((v, i) => (
              <li key={i}>
                {v.passed === null ? <Badge>{v.simulated ? 'SIMULATED' : 'not decided'}</Badge> : v.passed ? <Badge tone="good">pass</Badge> : <Badge tone="bad">fail</Badge>}{' '}
                <strong>{v.what}</strong>: {v.reason}
              </li>
            ))}
          </ul>
          {it.voice ? <p className="muted">Turn latencies: {it.voice.latenciesMs.map((ms) => `${ms} ms`).join(', ') || 'none'} · barge-ins: {it.voice.bargeIns}</p> : null}
          {it.conversationId ? <Transcript agentId={agentId} uuid={it.conversationId} since={since} /> : null}
        </details>
      ))}
    </article>
  );
}

/** The conversation's transcript, from the logs (the agent's test conversations, since the run started). */
function Transcript({ agentId, uuid, since }: { agentId: number; uuid: string; since: number }) {
  const logs = useQuery({
    queryKey: ['agent', agentId, 'tests', 'transcripts', since],
    queryFn: () => ok(api.GET('/api/v2/logs', {
      params: { query: { agentId: `camp${agentId}`, channel: 'test', fields: 'uuid,transcript', start: Math.max(0, since - 1), pageSize: 200 } },
    })),
  });
  if (logs.isPending) return <Loading what="Loading the transcript" />;
  if (logs.error) return <ErrorNote error={logs.error} />;
  const entry = (logs.data.logs as Array<{ uuid?: unknown; transcript?: unknown }>).find((l) => l.uuid === uuid);
  return <pre className="transcript" aria-label="Transcript">{typeof entry?.transcript === 'string' ? entry.transcript : 'The conversation is gone.'}</pre>;
}

function Comparison({ agentId, runId }: { agentId: number; runId: string }) {
  const c = useQuery(agentTestQueries.comparison(agentId, runId));
  if (c.isPending) return <Loading what="Comparing with live" />;
  if (c.error) return <ErrorNote error={c.error} />;
  const d = c.data;
  return (
    <section aria-label="Regressions" className="card">
      <h3>Compared with live</h3>
      {!d.baseline ? <p className="muted">The suite never ran on the live configuration: run it on live to compare.</p> : (
        <>
          <p className="muted">Against run {d.baseline.id} on live ({when(d.baseline.createdAt)}).</p>
          {d.regressed.length === 0 ? <Note>No scenario regressed.</Note> : (
            <ul aria-label="Regressed scenarios">
              {d.regressed.map((r) => <li key={r.name}><Badge tone="bad">regressed</Badge> {r.name}: {pct(r.before)} → {pct(r.after)}</li>)}
            </ul>
          )}
          {d.improved.length ? <ul aria-label="Improved scenarios">{d.improved.map((r) => <li key={r.name}><Badge tone="good">improved</Badge> {r.name}: {pct(r.before)} → {pct(r.after)}</li>)}</ul> : null}
          {d.added.length ? <p className="muted">New since: {d.added.join(', ')}</p> : null}
          {d.removed.length ? <p className="muted">Gone since: {d.removed.join(', ')}</p> : null}
        </>
      )}
    </section>
  );
}
