// The agent's voice: which engine speaks (agentTtsEngine) and which of its voices (agentVoice),
// picked from GET /api/v2/voices?engine=… with each voice's sample playable in the page (the
// provider hosts it; nothing plays until asked). An engine this process cannot speak with is said
// plainly: a call to the agent gets the configured voice, and its conversation says so.
import { useQuery } from '@tanstack/react-query';
import { voiceQueries, type TtsEngine } from '../../queries/voices.ts';
import { Badge, Button, ErrorNote, Loading, Note, Table } from '../../ui/parts.tsx';

type Voices = Awaited<ReturnType<NonNullable<ReturnType<typeof voiceQueries.list>['queryFn']>>>;
type Voice = Voices['voices'][number];

export const TTS_ENGINES: readonly { value: string; label: string }[] = [
  { value: '', label: 'The configured voice (CALLPLANE_TTS)' },
  { value: 'espeak', label: 'espeak-ng (offline)' },
  { value: 'openai', label: 'OpenAI-compatible' },
  { value: 'elevenlabs', label: 'ElevenLabs (streamed)' },
  { value: 'cartesia', label: 'Cartesia (streamed)' },
  { value: 'deepgram', label: 'Deepgram Aura (streamed)' },
];
export const STT_ENGINES: readonly { value: string; label: string }[] = [
  { value: 'deepgram', label: 'Deepgram (live)' },
  { value: 'deepgramflux', label: 'Deepgram Flux' },
  { value: 'google', label: 'Google Speech-to-Text' },
  { value: 'openai', label: 'OpenAI-compatible' },
];

/** The voices of `engine` ('' : the configured voice, named by a catalog voice such as en-US Female). */
export function VoicePicker({ engine, value, onPick }: { engine: string; value: string; onPick: (id: string) => void }) {
  if (!engine) return <p className="muted">The configured voice speaks, in the catalog voice chosen above. Choose an engine to pick one of its own voices.</p>;
  return <EngineVoices engine={engine as TtsEngine} value={value} onPick={onPick} />;
}

function EngineVoices({ engine, value, onPick }: { engine: TtsEngine; value: string; onPick: (id: string) => void }) {
  const list = useQuery(voiceQueries.list(engine));
  if (list.isPending) return <Loading what="Loading the voices" />;
  if (list.error) return <ErrorNote error={list.error} />;
  const about = list.data.engines.find((e) => e.engine === engine);
  return (
    <div className="voice-picker">
      {about && !about.available
        ? <p className="error">This process cannot speak with {engine} (no key, or another configured voice): calls to this agent get the configured voice instead, and each conversation says so.</p>
        : null}
      {about?.error ? <Note>The provider&apos;s list could not be read now ({about.error}); the last list read is shown.</Note> : null}
      <Table<Voice> caption={`Voices of ${engine}`} rows={list.data.voices} rowKey={(v) => v.id} empty={`${engine} lists no voice.`}
        columns={[
          { key: 'name', label: 'Name', cell: (v) => <>{v.name}{v.id === value ? <> <Badge tone="good">chosen</Badge></> : null}</> },
          { key: 'language', label: 'Language', cell: (v) => v.language ?? 'any (the agent\'s)' },
          { key: 'gender', label: 'Gender', cell: (v) => v.gender ?? '—' },
          { key: 'preview', label: 'Sample', cell: (v) => (v.previewUrl
            ? <audio controls preload="none" src={v.previewUrl} aria-label={`Sample of ${v.name}`} />
            : <span className="muted">none</span>) },
          { key: 'use', label: 'Use', cell: (v) => (
            <Button onClick={() => onPick(v.id)} disabled={v.id === value} aria-label={`Use voice ${v.name}`}>Use</Button>
          ) },
        ]} />
    </div>
  );
}
