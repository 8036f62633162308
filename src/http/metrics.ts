// Prometheus metrics; one registry per process (the platform makes it; buildApp serves it at
// /metrics), so tests can build many in one process.
import client from 'prom-client';

/** The labels of a spoken turn: its path and the engines that heard, thought and spoke. */
export interface VoiceTurnLabels {
  path: string;
  /** The detector that ended the turn (silero, energy); null where Twilio listened. */
  vad: string | null;
  stt: string | null;
  llm: string | null;
  tts: string | null;
}

/** A spoken turn's steps, ms (null: not measurable on its path). */
export interface VoiceTurnSteps {
  endpointMs: number | null;
  sttMs: number | null;
  llmFirstTokenMs: number | null;
  ttsFirstAudioMs: number | null;
  totalMs: number | null;
}

export interface Metrics {
  registry: client.Registry;
  observeRequest(method: string, route: string, status: number, seconds: number): void;
  /** One spoken turn (docs/voice.md, "Every turn's latency"). */
  observeVoiceTurn(labels: VoiceTurnLabels, steps: VoiceTurnSteps): void;
  /** A call whose audio this process carries has started (`direction`: inbound, outbound). */
  callStarted(direction: string): void;
  /** That call has ended after `seconds`, with its conversation's outcome (or `failed` when it could not start). */
  callEnded(direction: string, outcome: string, seconds: number): void;
}

/** Seconds, from a fast endpoint to a slow model. */
const TURN_BUCKETS = [0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 1.5, 2, 3, 5, 8, 13];

export function createMetrics(): Metrics {
  const registry = new client.Registry();
  client.collectDefaultMetrics({ register: registry, prefix: 'callplane_' });
  const duration = new client.Histogram({
    name: 'callplane_http_request_duration_seconds',
    help: 'HTTP request duration by route and status',
    labelNames: ['method', 'route', 'status'],
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [registry],
  });
  const step = (name: string, help: string) => new client.Histogram({
    name, help, labelNames: ['path', 'engine'], buckets: TURN_BUCKETS, registers: [registry],
  });
  const endpoint = step('callplane_voice_endpoint_seconds', 'Spoken turns: end of the caller\'s speech to the end of the turn (the VAD\'s silence window), by path and VAD engine');
  const stt = step('callplane_voice_stt_seconds', 'Spoken turns: end of the turn to the transcript, by path and speech-to-text engine');
  const llm = step('callplane_voice_llm_first_token_seconds', 'Spoken turns: transcript to the model\'s first token, by path and model provider');
  const tts = step('callplane_voice_tts_first_audio_seconds', 'Spoken turns: the model\'s first token to the first audio out, by path and text-to-speech engine');
  const total = new client.Histogram({
    name: 'callplane_voice_turn_seconds',
    help: 'Spoken turns: end of the caller\'s speech to the first audio out (gather: the request to our answer), by path and engines',
    labelNames: ['path', 'stt_engine', 'llm_engine', 'tts_engine'], buckets: TURN_BUCKETS, registers: [registry],
  });
  const callsActive = new client.Gauge({
    name: 'callplane_calls_active', help: 'Calls whose audio this process carries now (SIP), by direction',
    labelNames: ['direction'], registers: [registry],
  });
  const callSeconds = new client.Histogram({
    name: 'callplane_call_duration_seconds', help: 'Calls whose audio this process carried, from the session\'s start to its end, by direction and outcome',
    labelNames: ['direction', 'outcome'], buckets: [5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600], registers: [registry],
  });
  const observe = (h: client.Histogram<'path' | 'engine'>, path: string, engine: string | null, ms: number | null) => {
    if (ms !== null) h.labels(path, engine ?? 'none').observe(ms / 1000);
  };
  return {
    registry,
    observeRequest(method, route, status, seconds) {
      duration.labels(method, route, String(status)).observe(seconds);
    },
    observeVoiceTurn(l, s) {
      observe(endpoint, l.path, l.vad, s.endpointMs);
      observe(stt, l.path, l.stt, s.sttMs);
      observe(llm, l.path, l.llm, s.llmFirstTokenMs);
      observe(tts, l.path, l.tts, s.ttsFirstAudioMs);
      if (s.totalMs !== null) total.labels(l.path, l.stt ?? 'none', l.llm ?? 'none', l.tts ?? 'none').observe(s.totalMs / 1000);
    },
    callStarted(direction) {
      callsActive.labels(direction).inc();
    },
    callEnded(direction, outcome, seconds) {
      callsActive.labels(direction).dec();
      callSeconds.labels(direction, outcome).observe(seconds);
    },
  };
}
