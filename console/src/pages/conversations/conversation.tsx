// One conversation (GET /api/v2/conversation/{roomId}/{uuid}): what it was, the analysis after it,
// the voicemail facts, the transcript, each spoken turn's latency, which speech engines heard and
// spoke it (a substitution or a change mid-call said plainly), the call's recording played in
// the page (GET …/recording, fetched with the console's header as a Blob), and the agent's answer
// times over the last day (GET /api/v2/agent/{agentId}/latency).
import { useQuery } from '@tanstack/react-query';
import { type ReactNode } from 'react';
import { when } from '../../api.ts';
import { agentQueries } from '../../queries/agents.ts';
import { conversationQueries, type Conversation } from '../../queries/conversations.ts';
import { Link } from '../../router.tsx';
import { useSession } from '../../session.tsx';
import { useBlobUrl } from '../../ui/blob-url.ts';
import { Badge, ErrorNote, Loading, Page, Section, Table } from '../../ui/parts.tsx';
import { useAccountName } from '../../ui/names.tsx';
import { OutcomeBadge, Transcript, roomPath, whoSaid, type PageProps } from './parts.tsx';

type Conv = Conversation;
type ConvLine = Conv['conversation'][number];
type Latency = NonNullable<ConvLine['latency']>;

const ms = (v: number | null | undefined) => v === null || v === undefined ? 'not seen' : `${v} ms`;

function Facts({ rows }: { rows: [string, ReactNode][] }) {
  return <dl className="kv">{rows.map(([k, v]) => <div key={k} style={{ display: 'contents' }}><dt>{k}</dt><dd>{v}</dd></div>)}</dl>;
}

/** The call's recording, fetched with the console's header and played from a blob: URL. */
function Recording({ roomId, uuid }: { roomId: string; uuid: string }) {
  const acting = useSession();
  const rec = useQuery(conversationQueries.recording(acting, roomId, uuid));
  const audio = useBlobUrl<HTMLAudioElement>(rec.data, 'src');
  return (
    <Section title="Recording">
      {rec.isPending ? <Loading what="Loading the recording" /> : rec.error ? <ErrorNote error={rec.error} />
        : rec.data === null ? <p className="muted">This call was not recorded, or its recording is past the retention.</p> : (
          <>
            <audio ref={audio} className="conv-audio" controls preload="metadata" aria-label="Call recording">
              Your browser cannot play WAV audio.
            </audio>
            <p className="muted">Stereo: the caller on the left, the agent on the right ({Math.round(rec.data.size / 1024)} KB).</p>
          </>
        )}
    </Section>
  );
}

type Speech = NonNullable<Conv['speech']>;

/** Which engines heard and spoke the call (state.speech): a substituted voice and each change mid-call said plainly. */
function SpeechEngines({ speech }: { speech: Speech }) {
  const changes = [
    ...(speech.changes ?? []).map((ch) => ({ ...ch, what: 'The recogniser' })),
    ...(speech.ttsChanges ?? []).map((ch) => ({ ...ch, what: 'The voice' })),
  ].sort((a, b) => a.at - b.at);
  const ran = speech.offline ? 'both on this machine' : 'not both on this machine';
  return (
    <Section title="Speech engines">
      <Facts rows={[
        ['Heard by', speech.stt || 'not recorded'],
        ['Spoken by', `${speech.tts || 'not recorded'}${speech.voice ? ` (voice ${speech.voice})` : ''}${speech.streamed ? ', replies streamed' : ''}`],
        ['Where', ran],
        ...(speech.vad ? [['Speech detector', speech.vad] as [string, ReactNode]] : []),
      ]} />
      {speech.ttsSubstituted ? (
        <p data-speech="substituted">
          <Badge tone="warn">Voice substituted</Badge>{' '}
          The agent asks for {speech.ttsRequested ?? 'another engine'}, but {speech.tts} spoke this call: {speech.ttsSubstituted}.
        </p>
      ) : null}
      {speech.sttSubstituted ? (
        <p data-speech="stt-substituted">
          <Badge tone="warn">Recogniser substituted</Badge>{' '}
          The agent asks for {speech.sttRequested ?? 'another engine'}, but {speech.stt} heard this call: {speech.sttSubstituted}.
        </p>
      ) : null}
      {changes.length > 0 ? (
        <ul aria-label="Engine changes during the call">
          {changes.map((ch, i) => (
            <li key={i}><Badge tone="warn">Changed</Badge> {when(ch.at)}: {ch.what} changed from {ch.from} to {ch.to}: {ch.reason || 'no reason given'}.</li>
          ))}
        </ul>
      ) : null}
    </Section>
  );
}

function AgentLatency({ agentId }: { agentId: number }) {
  const summary = useQuery(agentQueries.latency(agentId));
  const agentName = useAccountName(agentId);
  const steps: [string, string][] = [['endpointMs', 'End of speech to end of turn'], ['sttMs', 'Speech to text'], ['llmFirstTokenMs', 'Model\'s first token'], ['ttsFirstAudioMs', 'First audio out'], ['totalMs', 'Total']];
  return (
    <Section title={`${agentName}: answer times, last 24 hours`}>
      {summary.isPending ? <Loading /> : summary.error ? <ErrorNote error={summary.error} /> : (
        <>
          <p className="muted">{summary.data.turns} spoken {summary.data.turns === 1 ? 'turn' : 'turns'}{summary.data.truncated ? ' (the newest 50,000 read)' : ''}.</p>
          <Table caption="Agent answer times" rowKey={(r) => r[0]} rows={summary.data.turns > 0 ? steps : []} empty="No spoken turn in the last 24 hours."
            columns={[
              { key: 'step', label: 'Step', cell: (r) => r[1] },
              { key: 'p50', label: 'Median (p50)', cell: (r) => ms(summary.data.steps[r[0] as keyof typeof summary.data.steps].p50) },
              { key: 'p95', label: '95th percentile', cell: (r) => ms(summary.data.steps[r[0] as keyof typeof summary.data.steps].p95) },
              { key: 'n', label: 'Turns', cell: (r) => summary.data.steps[r[0] as keyof typeof summary.data.steps].count },
            ]} />
        </>
      )}
    </Section>
  );
}

function Analysis({ c, rows }: { c: Conv; rows: [string, ReactNode][] }) {
  if (c.analysisStatus === undefined) return <p className="muted">The analysis runs once the conversation has ended.</p>;
  if (c.analysisStatus === 'pending') return <p role="status" className="muted">The analysis is running…</p>;
  if (c.analysisStatus === 'failed') return <p className="error">The analysis failed: {c.analysisError ?? 'no reason given'}</p>;
  return (
    <>
      <Facts rows={rows} />
      <p className="muted">Answered by {c.analysisEngine === 'model' ? 'the agent\'s model' : c.analysisEngine === 'simulated' ? 'the SIMULATED engine (no language model configured)' : 'the facts alone (nobody spoke)'}.</p>
    </>
  );
}

export default function ConversationPage({ params }: PageProps) {
  const roomId = params.roomId!;
  const uuid = params.uuid!;
  const acting = useSession();
  const conv = useQuery(conversationQueries.one(acting, roomId, uuid));
  const agentId = Number(roomId.split(':')[0]);
  if (conv.isPending) return <Page title="Conversation"><Loading /></Page>;
  if (conv.error) return <Page title="Conversation"><ErrorNote error={conv.error} /></Page>;
  const c = conv.data;
  const spoken = c.conversation.filter((l) => l.latency);
  const isCall = c.eventType === 'call';
  const analysisRows: [string, ReactNode][] = [];
  if (c.summary) analysisRows.push(['Summary', c.summary]);
  if (c.agentOutcome) analysisRows.push(['Outcome', c.agentOutcome]);
  if (c.aiLeadRating !== undefined) analysisRows.push(['Lead rating', `${c.aiLeadRating} of 5${c.aiLeadRatingReason ? `: ${c.aiLeadRatingReason}` : ''}`]);
  for (const [k, v] of Object.entries(c.extracted ?? {})) analysisRows.push([k, v === null ? 'not said' : typeof v === 'string' ? v : JSON.stringify(v)]);
  return (
    <Page title={`${isCall ? 'Call' : 'Conversation'} of ${when(c.startedAt)}`} actions={<><Link to={roomPath(roomId)}>The room</Link><Link to="/conversations">The inbox</Link></>}>
      <Section title="About" actions={<OutcomeBadge outcome={c.outcome} />}>
        <Facts rows={[
          ['Channel', `${c.channel} (${c.direction})`],
          ['Started', when(c.startedAt)],
          ['Ended', c.endedAt === null ? 'still in progress' : when(c.endedAt)],
          ...(c.duration !== undefined ? [['Duration', `${c.duration} s`] as [string, ReactNode]] : []),
          ...(c.missedCall ? [['Missed', 'nobody said a word'] as [string, ReactNode]] : []),
          ...(c.answeredBy ? [['Answered by', `${c.answeredBy}${c.answeredByAt ? ` (decided ${when(c.answeredByAt)})` : ''}`] as [string, ReactNode]] : []),
          ...(c.voicemailRecording ? [['Voicemail', 'the agent left a message (in the recording below)'] as [string, ReactNode]] : []),
        ]} />
      </Section>
      <Section title="Analysis">
        <Analysis c={c} rows={analysisRows} />
      </Section>
      <Section title={`Transcript (${c.conversation.length} lines${c.truncated ? ', cut' : ''})`}>
        <Transcript lines={c.conversation} channel={c.channel} label="Transcript" />
      </Section>
      {isCall ? (
        <Section title="Each turn's latency">
          <div className="conv-wide"><Table caption="Latency of each spoken turn" rows={spoken} rowKey={(l) => l.uuid} empty="No spoken turn has its latency recorded."
            columns={[
              { key: 'reply', label: 'Reply', cell: (l: ConvLine) => `${whoSaid(l.direction, c.channel)}: ${l.message.length > 60 ? `${l.message.slice(0, 60)}…` : l.message}` },
              { key: 'path', label: 'Path', cell: (l: ConvLine) => (l.latency as Latency).path },
              { key: 'endpoint', label: 'End of turn', cell: (l: ConvLine) => ms((l.latency as Latency).endpointMs) },
              { key: 'stt', label: 'Speech to text', cell: (l: ConvLine) => ms((l.latency as Latency).sttMs) },
              { key: 'llm', label: 'First token', cell: (l: ConvLine) => ms((l.latency as Latency).llmFirstTokenMs) },
              { key: 'tts', label: 'First audio', cell: (l: ConvLine) => ms((l.latency as Latency).ttsFirstAudioMs) },
              { key: 'total', label: 'Total', cell: (l: ConvLine) => ms((l.latency as Latency).totalMs) },
              { key: 'engines', label: 'Engines', cell: (l: ConvLine) => { const e = (l.latency as Latency).engines; return [e.stt, e.llm, e.tts].map((x) => x ?? '—').join(' / '); } },
            ]} /></div>
        </Section>
      ) : null}
      {isCall && c.speech ? <SpeechEngines speech={c.speech} /> : null}
      {isCall && c.endedAt !== null && (c.channel === 'sip' || c.voicemailRecording) ? <Recording roomId={roomId} uuid={uuid} /> : null}
      {isCall ? <AgentLatency agentId={agentId} /> : null}
    </Page>
  );
}
