// One agent: its staging settings (a form for the common fields, its voice picked from the engine's
// list with samples (voices.tsx), and a JSON editor for the rest),
// publish and revert, its versions (rename, a side-by-side diff of any two, restore), the
// organization's knowledge bases and their documents, and a test chat with the staging
// configuration (POST /api/v2/agent/{agentId}/testMessage).
import { Fragment, lazy, Suspense, useMemo, useRef, useState, type FormEvent } from 'react';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import type { components, paths } from '../../../../sdk/schema.d.ts';
import { api, CallplaneError, ok, when } from '../../api.ts';
import { agentQueries, agentSaved, agentVersionsChanged, versionRenamed } from '../../queries/agents.ts';
import { Link } from '../../router.tsx';
import { useSession } from '../../session.tsx';
import { Badge, Button, ErrorNote, Field, Loading, Note, Page, Section, Select, Table, TextArea } from '../../ui/parts.tsx';
import { foldUnchanged, lineDiff, pretty, type Row as DiffRow } from './diff.ts';
import Knowledge from './knowledge.tsx';
import { STT_ENGINES, TTS_ENGINES, VoicePicker } from './voices.tsx';
import { SpeechTruth } from './truth.tsx';
import { CATALOG_VOICES } from './catalog-voices.ts';
import './agents.css';

/** What the shell hands a page (pages/index.ts's PageProps; not imported, to keep the page out of an import circle). */
interface PageProps { params: Record<string, string>; query: URLSearchParams }

/** An agent configuration as the API answers it (the generated client types it from the server's field table). */
type Config = components['schemas']['AgentSettings'];
/** A partial change, as POST /api/v2/agent takes it. */
type AgentChange = paths['/api/v2/agent']['post']['requestBody']['content']['application/json'];
type Live = paths['/api/v2/agent/{agentId}']['get']['responses'][200]['content']['application/json']['sponsorship'];
const TABS = [['settings', 'Staging settings'], ['versions', 'Versions'], ['knowledge', 'Knowledge bases'], ['chat', 'Test chat'], ['talk', 'Test call'], ['tests', 'Tests']] as const;
/** The spoken test call (talk.tsx): loaded with its tab only. */
const TalkPanel = lazy(() => import('./talk.tsx'));
/** The Tests tab (tests.tsx), loaded when first opened. */
const Tests = lazy(() => import('./tests.tsx'));

export default function AgentPage({ params, query }: PageProps) {
  const id = Number(String(params.agentId).replace(/^camp/, ''));
  const tab = query.get('tab') ?? 'settings';
  const agent = useQuery(agentQueries.settings(id));
  const live = agent.data?.sponsorship;
  const staging = live?.staging;
  const title = live?.title ?? '';
  return (
    <Page title={`Agent ${title}`} actions={<Link to="/agents">All agents</Link>}>
      <nav aria-label="Agent sections" className="tabs">
        {TABS.map(([key, label]) => (
          <Link key={key} to={`/agents/${id}?tab=${key}`} aria-current={tab === key ? 'page' : undefined}>{label}</Link>
        ))}
      </nav>
      {agent.isPending ? <Loading /> : agent.error ? <ErrorNote error={agent.error} /> : (
        <>
          <Publishing id={id} staging={staging!} live={live!} />
          {tab === 'settings' ? <Settings id={id} staging={staging!} /> : null}
          {tab === 'versions' ? <Versions id={id} staging={staging!} live={live!} /> : null}
          {tab === 'knowledge' ? <Knowledge agentId={id} staging={staging!} /> : null}
          {tab === 'chat' ? <Chat id={id} /> : null}
          {tab === 'talk' ? <Suspense fallback={<Loading />}><TalkPanel id={id} /></Suspense> : null}
          {tab === 'tests' ? <Suspense fallback={<Loading />}><Tests agentId={id} /></Suspense> : null}
        </>
      )}
    </Page>
  );
}

/** The live configuration as stored (the answer adds id and accountId and, on the live side, staging and publishedAt). */
function liveOnly(live: Live): Config {
  const { id: _id, accountId: _acc, staging: _s, publishedAt: _p, ...rest } = live;
  return rest;
}

function Publishing({ id, staging, live }: { id: number; staging: Config; live: Live }) {
  const client = useQueryClient();
  const target = { targetAccountId: id };
  const changed = () => void agentVersionsChanged(client, id);
  const publish = useMutation({ mutationFn: () => ok(api.POST('/api/v2/agent/publish', { params: { query: target } })), onSuccess: changed });
  const revert = useMutation({ mutationFn: () => ok(api.POST('/api/v2/agent/revert', { params: { query: target } })), onSuccess: changed });
  const differs = pretty(staging) !== pretty(liveOnly(live));
  return (
    <Section title="Staging and live">
      <p>
        {differs ? <Badge tone="warn">Staging has unpublished changes</Badge> : <Badge tone="good">Staging is live</Badge>}{' '}
        <span className="muted">Last published: {when(live.publishedAt)}</span>
      </p>
      <div className="actions">
        <Button kind="primary" disabled={publish.isPending} onClick={() => publish.mutate()}>Publish staging</Button>
        <Button disabled={revert.isPending || !differs} onClick={() => revert.mutate()}>Revert staging to live</Button>
      </div>
      {publish.data ? <Note>Published. The live configuration it replaced is kept as version {publish.data.previousVersionId}.</Note> : null}
      {revert.isSuccess ? <Note>Staging is the live configuration again.</Note> : null}
      <ErrorNote error={publish.error ?? revert.error} />
    </Section>
  );
}

const FORM_FIELDS = ['title', 'description', 'agentTtsEngine', 'agentVoice', 'agentSttEngine', 'agentLang', 'agentModel', 'welcomeMessage', 'agentInstructions'] as const;
type FormField = typeof FORM_FIELDS[number];
/** The form's strings; agentTtsEngine null (the configured voice) is ''. */
const formOf = (c: Config): Record<FormField, string> => ({
  title: c.title, description: c.description, agentTtsEngine: c.agentTtsEngine ?? '', agentVoice: c.agentVoice, agentSttEngine: c.agentSttEngine,
  agentLang: c.agentLang, agentModel: c.agentModel, welcomeMessage: c.welcomeMessage, agentInstructions: c.agentInstructions,
});
const fieldValue = (f: FormField, v: string) => (f === 'agentTtsEngine' && v === '' ? null : v);
/** Whether what the user typed is a JSON object: its fields are the server's to check (a 400 names the one that is wrong). */
const isChange = (v: unknown): v is AgentChange => !!v && typeof v === 'object' && !Array.isArray(v);

function Settings({ id, staging }: { id: number; staging: Config }) {
  const client = useQueryClient();
  const { target } = useSession();
  const initial = useMemo(() => formOf(staging), [staging]);
  const [form, setForm] = useState(initial);
  const [json, setJson] = useState(() => pretty(staging));
  const [jsonError, setJsonError] = useState<string | null>(null);
  // Staging read again (saved here, published, restored): the forms show it. Adjusted while
  // rendering, as React advises for state that follows a prop, not in an effect after a stale render.
  const [shown, setShown] = useState(staging);
  if (shown !== staging) {
    setShown(staging);
    setForm(initial);
    setJson(pretty(staging));
  }
  const models = useQuery(agentQueries.models(id, !!target.targetAccountId));
  const saved = () => void agentSaved(client, id);
  const save = useMutation({
    mutationFn: (body: AgentChange) => ok(api.POST('/api/v2/agent', { params: { query: { targetAccountId: id } }, body })),
    onSuccess: saved,
  });
  const saveJson = useMutation({
    mutationFn: (body: AgentChange) => ok(api.POST('/api/v2/agent', { params: { query: { targetAccountId: id } }, body })),
    onSuccess: saved,
  });
  const set = (f: FormField) => (e: { target: { value: string } }) => setForm({ ...form, [f]: e.target.value });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    // Only what changed: a partial update keeps the rest.
    const body = Object.fromEntries(FORM_FIELDS.filter((f) => form[f] !== initial[f]).map((f) => [f, fieldValue(f, form[f])]));
    save.mutate(body);
  };
  const submitJson = (e: FormEvent) => {
    e.preventDefault();
    setJsonError(null);
    let body: unknown;
    try { body = JSON.parse(json); } catch (err) { setJsonError(`The JSON does not parse: ${(err as Error).message}`); return; }
    if (!isChange(body)) { setJsonError('The configuration must be a JSON object'); return; }
    saveJson.mutate(body);
  };
  const modelIds = Object.keys((models.data ?? {}) as Record<string, unknown>).filter((k) => k !== 'success' && k !== 'message');
  const modelOptions = modelIds.includes(form.agentModel) || !form.agentModel ? modelIds : [form.agentModel, ...modelIds];
  return (
    <>
      <div className="grid-2 agent-settings">
        <Section title="Staging settings">
          <form onSubmit={submit} aria-label="Staging settings">
            <Field label="Name (title)" value={form.title} onChange={set('title')} />
            <Field label="Description" value={form.description} onChange={set('description')} />
            <Select label="Voice engine" value={form.agentTtsEngine} onChange={set('agentTtsEngine')} options={TTS_ENGINES} />
            {form.agentTtsEngine === ''
              ? <Select label="Voice" value={form.agentVoice} onChange={set('agentVoice')}
                options={[...(CATALOG_VOICES.some((v) => v.id === form.agentVoice) ? [] : [{ value: form.agentVoice, label: `${form.agentVoice} (not a catalog voice)` }]),
                  ...CATALOG_VOICES.map((v) => ({ value: v.id, label: `${v.id} (${v.lang}, ${v.gender})` }))]} />
              : <Field label="Voice" value={form.agentVoice} onChange={set('agentVoice')} hint="One of the engine's voice ids: pick one below" />}
            <VoicePicker engine={form.agentTtsEngine} value={form.agentVoice} onPick={(v) => setForm({ ...form, agentVoice: v })} />
            <Select label="Speech recognition engine" value={form.agentSttEngine} onChange={set('agentSttEngine')} options={STT_ENGINES} />
            <SpeechTruth agentId={id} tts={form.agentTtsEngine} stt={form.agentSttEngine} />
            <Field label="Language" value={form.agentLang} onChange={set('agentLang')} hint="multi, or a BCP-47 tag such as en-US" />
            {modelOptions.length > 0
              ? <Select label="Model" value={form.agentModel} onChange={set('agentModel')} options={modelOptions} />
              : <Field label="Model" value={form.agentModel} onChange={set('agentModel')} />}
            <ModelTruth agentId={id} model={form.agentModel} />
            <TextArea label="Greeting (welcome message)" value={form.welcomeMessage} onChange={set('welcomeMessage')} rows={2} />
            <TextArea label="Prompt (instructions)" value={form.agentInstructions} onChange={set('agentInstructions')} rows={10} />
            <div className="actions"><Button kind="primary" type="submit" disabled={save.isPending}>Save staging</Button></div>
            {save.isSuccess && !save.isPending ? <Note>Staging saved.</Note> : null}
            <ErrorNote error={save.error} />
          </form>
        </Section>
        <Section title="Staging configuration as JSON">
          <form onSubmit={submitJson} aria-label="Staging configuration as JSON">
            <TextArea label="Configuration (JSON)" value={json} onChange={(e) => setJson(e.target.value)} rows={24} spellCheck={false}
              hint="Every field of the agent (docs/agents.md); fields left out keep their value." />
            <div className="actions">
              <Button kind="primary" type="submit" disabled={saveJson.isPending}>Save JSON to staging</Button>
              <Button onClick={() => { setJson(pretty(staging)); setJsonError(null); }}>Reset to staging</Button>
            </div>
            {saveJson.isSuccess && !saveJson.isPending ? <Note>Staging saved.</Note> : null}
            <ErrorNote error={jsonError ?? saveJson.error} />
          </form>
        </Section>
      </div>
      <WebChat id={id} />
    </>
  );
}

/** A version by its number (the oldest is 1) and date, then its title: `Version 3, 29/11/2026 12:40 (Before the new greeting)`. */
const versionName = (n: number, v: { createdAt: number; title: string }) => `Version ${n}, ${when(v.createdAt)}${v.title ? ` (${v.title})` : ''}`;

type VersionRow = paths['/api/v2/agent/{agentId}/versions']['get']['responses'][200]['content']['application/json']['versions'][number];

function Versions({ id, staging, live }: { id: number; staging: Config; live: Live }) {
  const client = useQueryClient();
  const versions = useQuery(agentQueries.versions(id));
  const rows = versions.data?.versions ?? [];
  const changed = () => void agentVersionsChanged(client, id);
  const restore = useMutation({
    mutationFn: (v: { versionId: number; target: 'staging' | 'default' }) => ok(api.POST('/api/v2/agent/{agentId}/versions/{versionId}/restore', {
      params: { path: { agentId: `camp${id}`, versionId: String(v.versionId) } }, body: { target: v.target },
    })),
    onSuccess: changed,
  });
  const store = useMutation({
    mutationFn: (title: string) => ok(api.POST('/api/v2/agent/{agentId}/versions', { params: { path: { agentId: `camp${id}` } }, body: { title, source: 'staging' } })),
    onSuccess: changed,
  });
  const [newTitle, setNewTitle] = useState('');
  const sources: { value: string; label: string; config: Config | Record<string, never> }[] = [
    { value: 'staging', label: 'Staging', config: staging },
    { value: 'live', label: 'Live', config: liveOnly(live) },
    ...rows.map((v, i) => ({ value: String(v.versionId), label: versionName(rows.length - i, v), config: v.snapshot ?? {} })),
  ];
  const [left, setLeft] = useState('');
  const [right, setRight] = useState('staging');
  const leftValue = left || (rows[0] ? String(rows[0].versionId) : 'live');
  return (
    <>
      <Section title="Versions">
        <form className="inline-form" onSubmit={(e) => { e.preventDefault(); store.mutate(newTitle); }} aria-label="Store staging as a version">
          <Field label="New version's title" value={newTitle} onChange={(e) => setNewTitle(e.target.value)} />
          <Button type="submit" disabled={store.isPending}>Store staging as a version</Button>
        </form>
        <ErrorNote error={store.error} />
        {versions.isPending ? <Loading /> : versions.error ? <ErrorNote error={versions.error} /> : (
          <Table<VersionRow> caption="Versions, newest first" rows={rows} rowKey={(v) => v.versionId} empty="No versions yet: publishing stores the replaced live configuration as one."
            columns={[
              { key: 'id', label: 'Version', cell: (v) => `Version ${rows.length - rows.indexOf(v)}` },
              { key: 'title', label: 'Title', cell: (v) => <VersionTitle id={id} v={v} /> },
              { key: 'at', label: 'Stored', cell: (v) => when(v.createdAt) },
              { key: 'actions', label: 'Actions', cell: (v) => (
                <div className="actions">
                  <Button disabled={restore.isPending} onClick={() => restore.mutate({ versionId: v.versionId, target: 'staging' })}
                    aria-label={`Restore to staging version ${v.title}`}>
                    Restore to staging
                  </Button>
                  <Button onClick={() => { setLeft(String(v.versionId)); setRight('staging'); }} aria-label={`Compare with staging version ${v.title}`}>
                    Compare with staging
                  </Button>
                </div>
              ) },
            ]} />
        )}
        {restore.isSuccess ? <Note>Restored to staging. Publish to make it live.</Note> : null}
        <ErrorNote error={restore.error} />
      </Section>
      <Section title="Compare">
        <div className="inline-form">
          <Select label="Left" value={leftValue} onChange={(e) => setLeft(e.target.value)} options={sources} />
          <Select label="Right" value={right} onChange={(e) => setRight(e.target.value)} options={sources} />
        </div>
        <Diff left={sources.find((s) => s.value === leftValue)?.config ?? {}} right={sources.find((s) => s.value === right)?.config ?? {}}
          leftLabel={sources.find((s) => s.value === leftValue)?.label ?? ''} rightLabel={sources.find((s) => s.value === right)?.label ?? ''} />
      </Section>
    </>
  );
}

function VersionTitle({ id, v }: { id: number; v: VersionRow }) {
  const client = useQueryClient();
  const [editing, setEditing] = useState(false);
  const [title, setTitle] = useState(v.title);
  const rename = useMutation({
    mutationFn: () => ok(api.PUT('/api/v2/agent/{agentId}/versions/{versionId}/title', {
      params: { path: { agentId: `camp${id}`, versionId: String(v.versionId) } }, body: { title },
    })),
    onSuccess: () => { setEditing(false); void versionRenamed(client, id); },
  });
  if (!editing) return <>{v.title} <Button onClick={() => { setTitle(v.title); setEditing(true); }} aria-label={`Rename ${v.title}`}>Rename</Button></>;
  return (
    <form className="inline-form" onSubmit={(e) => { e.preventDefault(); rename.mutate(); }}>
      <Field label={`Title of version ${v.versionId}`} value={title} onChange={(e) => setTitle(e.target.value)} />
      <Button kind="primary" type="submit" disabled={rename.isPending}>Save title</Button>
      <Button onClick={() => setEditing(false)}>Cancel</Button>
      <ErrorNote error={rename.error} />
    </form>
  );
}

function Diff({ left, right, leftLabel, rightLabel }: { left: object; right: object; leftLabel: string; rightLabel: string }) {
  const rows = useMemo(() => lineDiff(pretty(left), pretty(right)), [left, right]);
  const chunks = useMemo(() => foldUnchanged(rows), [rows]);
  // Folds opened by the reader, by the row they start at.
  const [open, setOpen] = useState<ReadonlySet<number>>(new Set());
  const changes = rows.filter((r) => r.left?.kind !== 'same').length;
  const mark = (k: string) => (k === 'del' ? '− ' : k === 'ins' ? '+ ' : '  ');
  return (
    <figure className="diff-view" aria-label={`Differences between ${leftLabel} and ${rightLabel}`}>
      <figcaption>{changes === 0 ? 'No differences.' : `${changes} changed line${changes === 1 ? '' : 's'}: removed lines are marked −, added lines +.`}</figcaption>
      <div className="diff" role="table" aria-label={`${leftLabel} beside ${rightLabel}`}>
        <div role="rowgroup" className="diff-head">
          <div role="row" className="diff-row"><span role="columnheader">{leftLabel}</span><span role="columnheader">{rightLabel}</span></div>
        </div>
        <div role="rowgroup">
          {chunks.map((c) => (c.kind === 'fold' && !open.has(c.from)
            ? (
              <div role="row" className="diff-row diff-fold" key={`f${c.from}`}>
                <span role="cell">
                  <Button onClick={() => setOpen(new Set([...open, c.from]))}>Show {c.rows.length} unchanged lines</Button>
                </span>
              </div>
            )
            : <Fragment key={`r${c.from}`}>{c.rows.map((r, i) => <DiffLine key={c.from + i} r={r} mark={mark} />)}</Fragment>))}
        </div>
      </div>
    </figure>
  );
}

function DiffLine({ r, mark }: { r: DiffRow; mark: (k: string) => string }) {
  return (
    <div role="row" className="diff-row">
      <pre role="cell" className={r.left?.kind ?? 'gap'}>{r.left ? mark(r.left.kind) + r.left.text : ''}</pre>
      <pre role="cell" className={r.right?.kind ?? 'gap'}>{r.right ? mark(r.right.kind) + r.right.text : ''}</pre>
    </div>
  );
}

interface Line { from: 'you' | 'agent'; text: string }

function Chat({ id }: { id: number }) {
  const newSession = () => `console-${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
  const [session, setSession] = useState(newSession);
  const [lines, setLines] = useState<Line[]>([]);
  const [text, setText] = useState('');
  const [ended, setEnded] = useState(false);
  const [engine, setEngine] = useState('');
  const form = useRef<HTMLFormElement>(null);
  const send = useMutation({
    mutationFn: (t: string) => ok(api.POST('/api/v2/agent/{agentId}/testMessage', { params: { path: { agentId: `camp${id}` } }, body: { text: t, session } })),
    onSuccess: (r) => {
      setLines((ls) => [...ls.slice(0, -1), ...(r.welcome ? [{ from: 'agent' as const, text: r.welcome }] : []), ls[ls.length - 1]!, { from: 'agent', text: r.reply }]);
      setEnded(r.ended);
      setEngine(r.simulated ? 'the simulated engine (no model provider is configured)' : `${r.engine} ${r.model}`);
      form.current?.querySelector('input')?.focus();
    },
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    const t = text.trim();
    if (!t) return;
    setLines((ls) => [...ls, { from: 'you', text: t }]);
    setText('');
    send.mutate(t);
  };
  return (
    <Section title="Test chat with staging" actions={<Button onClick={() => { setSession(newSession()); setLines([]); setEnded(false); send.reset(); }}>New conversation</Button>}>
      <p className="muted">Messages go to the staging configuration, unpublished changes included. The conversation is recorded like any other.</p>
      <ol className="transcript" aria-label="Test conversation" aria-live="polite">
        {lines.map((l, i) => (
          <li key={i} className={l.from === 'agent' ? 'outbound' : 'inbound'}>
            <p className="who">{l.from === 'agent' ? 'Agent' : 'You'}</p>
            <p className="said">{l.text}</p>
          </li>
        ))}
      </ol>
      {send.isPending ? <Loading what="The agent is answering" /> : null}
      {ended ? <Note>The agent ended the conversation. Start a new one to go on.</Note> : null}
      {engine ? <p className="muted">Answered by {engine}.</p> : null}
      <form ref={form} className="inline-form" onSubmit={submit} aria-label="Send a test message">
        <Field label="Message" value={text} onChange={(e) => setText(e.target.value)} maxLength={2000} disabled={ended} />
        <Button kind="primary" type="submit" disabled={send.isPending || ended}>Send</Button>
      </form>
      <ErrorNote error={send.error} />
    </Section>
  );
}

/** Which model will answer replies: GET /api/v2/models/answering (SIMULATED when no provider is configured). */
function ModelTruth({ agentId, model }: { agentId: number; model: string }) {
  const q = useQuery({
    queryKey: ['agent', agentId, 'answering', model],
    queryFn: () => ok(api.GET('/api/v2/models/answering', { params: { query: { model, targetAccountId: agentId } } })),
    enabled: model !== '',
    staleTime: 30_000,
  });
  if (!model || q.isPending) return null;
  if (q.error) return <ErrorNote error={q.error} />;
  const a = q.data;
  if (a.simulated) {
    return <p className="note" role="status" data-testid="model-truth"><Badge tone="warn">SIMULATED</Badge> No language model is configured: replies will be SIMULATED (a fixed text that says so), whichever model is chosen here. Configure a provider (CALLPLANE_LLM_API_KEY, or the organization&apos;s own in the API) for real replies.</p>;
  }
  if (a.substituted) return <p className="note" role="status" data-testid="model-truth">{model} is not served here: {a.model} on {a.provider} answers instead.</p>;
  return <p className="muted" data-testid="model-truth">Replies come from {a.model} on {a.provider}.</p>;
}

/** The agent's web chat address: its slug (GET/POST /api/v2/agentUrl), the page at /a/<slug>. */
function WebChat({ id }: { id: number }) {
  const client = useQueryClient();
  const key = ['agent', id, 'url'] as const;
  const current = useQuery({
    queryKey: key,
    queryFn: async () => {
      try { return (await ok(api.GET('/api/v2/agentUrl', { params: { query: { targetUsername: `camp${id}` } } }))).slug; } catch (err) {
        if (err instanceof CallplaneError && err.status === 404) return null;
        throw err;
      }
    },
  });
  const [slug, setSlug] = useState('');
  const save = useMutation({
    mutationFn: () => ok(api.POST('/api/v2/agentUrl', { body: { targetUsername: `camp${id}`, slug: slug.trim() } })),
    onSuccess: () => { setSlug(''); void client.invalidateQueries({ queryKey: key }); },
  });
  const submit = (e: FormEvent) => { e.preventDefault(); save.mutate(); };
  const address = current.data ? `${window.location.origin}/a/${current.data}` : null;
  return (
    <Section title="Web chat address">
      {current.isPending ? <Loading /> : current.error ? <ErrorNote error={current.error} /> : address
        ? <p>Anyone with the address can chat with the live configuration: <a href={address} target="_blank" rel="noopener noreferrer" data-testid="web-chat-address">{address}</a></p>
        : <p className="muted">No address yet: choose one to give the agent a public chat page.</p>}
      <form className="inline-form" onSubmit={submit} aria-label="Web chat address">
        <Field label={current.data ? 'New address name' : 'Address name'} value={slug} onChange={(e) => setSlug(e.target.value)}
          hint="3–40 of a–z and 0–9, single hyphens between; the old address stops working when replaced" />
        <Button kind="primary" type="submit" disabled={save.isPending}>Save address</Button>
        <ErrorNote error={save.error} />
      </form>
    </Section>
  );
}
