// What will actually hear and speak on the agent's calls, and why: the engine the form names runs
// when the organization has an enabled key for its vendor (GET /api/v2/speech/providers) or the
// process has one (GET /api/v2/voices says which voice engines it can speak with; Deepgram's key
// serves its recognisers too); otherwise the configured recogniser or voice takes its place, as
// each call's conversation says (state.speech). docs/voice.md, "Which engine".
import { useQuery } from '@tanstack/react-query';
import { api, ok } from '../../api.ts';
import { voiceQueries, type TtsEngine } from '../../queries/voices.ts';
import { useSession } from '../../session.tsx';
import { Badge } from '../../ui/parts.tsx';

const REMOTE_TTS: readonly string[] = ['elevenlabs', 'cartesia', 'deepgram'];

export function SpeechTruth({ agentId, tts, stt }: { agentId: number; tts: string; stt: string }) {
  const { orgId, target } = useSession();
  const own = useQuery({
    queryKey: ['speech-providers', orgId],
    queryFn: () => ok(api.GET('/api/v2/speech/providers', { params: { query: target } })),
    staleTime: 60_000,
  });
  const ttsList = useQuery({ ...voiceQueries.list((tts || 'espeak') as TtsEngine), enabled: tts !== '' });
  const deepgram = useQuery({ ...voiceQueries.list('deepgram'), enabled: stt === 'deepgram' || stt === 'deepgramflux' });
  const orgHas = (vendor: string) => (own.data?.providers ?? []).some((p) => p.vendor === vendor && p.enabled);

  let hears: { runs: boolean | null; text: string };
  if (stt === 'deepgram' || stt === 'deepgramflux') {
    const process = deepgram.data?.engines.find((e) => e.engine === 'deepgram')?.available;
    if (orgHas('deepgram')) hears = { runs: true, text: `${stt === 'deepgram' ? 'Deepgram live' : 'Deepgram Flux'} hears, with the organization's own Deepgram key.` };
    else if (process) hears = { runs: true, text: `${stt === 'deepgram' ? 'Deepgram live' : 'Deepgram Flux'} hears, with this service's Deepgram key.` };
    else if (deepgram.isPending || own.isPending) hears = { runs: null, text: 'Checking which recogniser runs…' };
    else hears = { runs: false, text: 'Neither the organization nor this service has a Deepgram key: the configured recogniser (CALLPLANE_STT, pocketsphinx unless set) hears instead.' };
  } else if (stt === 'google') {
    hears = { runs: null, text: 'Google hears only if this service has Google credentials (GOOGLE_APPLICATION_CREDENTIALS; an organization\'s Google key is not used by calls yet), which this page cannot see; otherwise the configured recogniser. Each call\'s conversation says which heard.' };
  } else if (stt === 'openai') {
    hears = { runs: null, text: 'The OpenAI-compatible recogniser hears when this service is set for it (CALLPLANE_STT=openai), which this page cannot see; otherwise the configured recogniser. Each call\'s conversation says which heard.' };
  } else {
    hears = { runs: null, text: 'The configured recogniser hears.' };
  }

  let speaks: { runs: boolean | null; text: string };
  if (!tts) speaks = { runs: true, text: 'The configured voice (CALLPLANE_TTS, espeak-ng unless set) speaks.' };
  else if (tts === 'espeak') speaks = { runs: true, text: 'espeak-ng speaks, on this machine.' };
  else {
    const process = ttsList.data?.engines.find((e) => e.engine === tts)?.available;
    if (REMOTE_TTS.includes(tts) && orgHas(tts)) speaks = { runs: true, text: `${tts} speaks, with the organization's own key.` };
    else if (process) speaks = { runs: true, text: `${tts} speaks, with this service's key.` };
    else if (ttsList.isPending || own.isPending) speaks = { runs: null, text: 'Checking which voice speaks…' };
    else speaks = { runs: false, text: `Neither the organization nor this service has a ${tts} key: the configured voice speaks instead.` };
  }
  const badge = (runs: boolean | null) => (runs === true ? <Badge tone="good">Runs</Badge> : runs === false ? <Badge tone="warn">Replaced</Badge> : <Badge>Depends</Badge>);
  return (
    <div className="note" role="status" aria-label="What will run on calls" data-testid="speech-truth" data-agent={agentId}>
      <p><strong>On calls:</strong></p>
      <p>{badge(hears.runs)} Hearing: {hears.text}</p>
      <p>{badge(speaks.runs)} Speaking: {speaks.text}</p>
    </div>
  );
}
