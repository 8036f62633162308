// A call heard by Flux, for the eager end of turn's test (test/modules/voice-flux-eager.test.ts) and
// bench (bench/flux.ts): a real voice session (session.ts, its turn runner on the harness's
// database) over the fake voice transport, its caller heard by the real Flux engine
// (src/speech/deepgram.ts) through the official client against Deepgram's double on loopback
// (test/helpers/fake-deepgram.ts: eager end after 250 ms of quiet, end of turn after 700 ms), the
// model server of the tests (fake-llm.ts) answering, and a voice that answers at once (ShortTts).
// The caller's audio goes in real time (20 ms frames on the clock), so the double's events come
// when Flux's would; the recogniser's events, the transport's audio and the caller's last loud
// frame are stamped with performance.now(). `eager: false` hides Flux's eager ends and resumed
// turns from the session (as if the listener ignored them): the same call, answered at EndOfTurn.
import { performance } from 'node:perf_hooks';
import { voiceSettings } from '../../src/modules/agents/voice-settings.ts';
import { messageRepo } from '../../src/modules/conversations/repository.ts';
import { CAPABILITIES, callOpening } from '../../src/modules/voice/call-policy.ts';
import { turnLatencies } from '../../src/modules/voice/latency.ts';
import { startVoiceSession } from '../../src/modules/voice/session.ts';
import { DeepgramFlux } from '../../src/speech/deepgram.ts';
import type { RecognitionEvent, RecognitionListener, RecognitionStream, StreamingSpeechToText } from '../../src/speech/types.ts';
import { agentOnCall } from './agent-call.ts';
import type { FakeDeepgram } from './fake-deepgram.ts';
import { ScriptedStt, ShortTts, TimedTransport } from './fake-voice-transport.ts';
import type { Harness } from './harness.ts';

const FRAME = 160;

/** A recognition event as it reached the session, stamped. */
export interface TimedEvent { type: RecognitionEvent['type']; t: number }

/** `engine`'s streams, their events stamped as they arrive; without `eager`, Flux's eager ends and resumed turns are kept from the listener. */
function timedEngine(engine: StreamingSpeechToText, events: TimedEvent[], eager: boolean): StreamingSpeechToText {
  return {
    name: engine.name,
    offline: false,
    check: (signal) => engine.check(signal),
    async open(opts) {
      const s = await engine.open(opts);
      const wrapped = new Map<RecognitionListener, RecognitionListener>();
      const stream: RecognitionStream = {
        get state() { return s.state; },
        write: (audio) => s.write(audio),
        keepAlive: () => s.keepAlive(),
        finalize: () => s.finalize(),
        close: () => s.close(),
        on(listener) {
          const w: RecognitionListener = (e) => {
            events.push({ type: e.type, t: performance.now() });
            if (!eager && (e.type === 'eagerEndOfTurn' || e.type === 'turnResumed')) return;
            listener(e);
          };
          wrapped.set(listener, w);
          s.on(w);
        },
        off(listener) {
          const w = wrapped.get(listener);
          if (w) s.off(w);
          wrapped.delete(listener);
        },
      };
      return stream;
    },
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** One part of what the caller does: talk (a loud tone) or keep quiet, for `ms`. */
export type CallerPart = { talk: number } | { quiet: number };

/** A call to an agent with `config` heard by Flux at `deepgram`; `eager`: the session sees Flux's eager ends. */
export async function fluxCall(h: Harness, deepgram: FakeDeepgram, config: Record<string, unknown>, opts: { eager: boolean }) {
  const { db, live, opened, http, turns } = await agentOnCall(h, { welcomeMessage: '', callerResponseTimeout: 60, agentSttEngine: 'deepgramflux', ...config });
  const transport = new TimedTransport();
  const tts = new ShortTts();
  const events: TimedEvent[] = [];
  const engine = timedEngine(new DeepgramFlux({ apiKey: deepgram.apiKey, baseUrl: deepgram.url }), events, opts.eager);
  const settings = voiceSettings(live);
  const log = { warn: (obj: object, msg: string) => { if (process.env.VOICE_DEBUG) console.error(msg, obj); } };
  const session = startVoiceSession({
    turns, stt: new ScriptedStt(), tts, now: Date.now, log, latency: turnLatencies({ db, budgetMs: 60_000, now: Date.now }),
  }, {
    transport, transcript: h.services.conversations.callTranscript(opened), conversation: opened.conversation, room: opened.room,
    config: live, settings, opening: callOpening(settings, { recorded: false }), capabilities: CAPABILITIES.sip,
    streaming: { engine, onChange: (c) => log.warn(c, 'speech changed') },
  });
  const id = opened.conversation.id;
  let sample = 0;
  return {
    transport, tts, events, session, settings,
    /**
     * The caller's audio, in real time: 20 ms frames, each sent when the clock reaches it, never
     * faster (a process too busy to send on time lets the audio slip rather than send a burst the
     * double would hear as a quicker caller). Resolves when all of it has gone, with when the
     * caller's last loud frame ended (the end of their last word) on that clock.
     */
    async speak(parts: CallerPart[]): Promise<number> {
      let lastLoudAt = performance.now();
      let next = lastLoudAt;
      for (const part of parts) {
        const loud = 'talk' in part;
        for (let i = 0; i < (loud ? part.talk : part.quiet) / 20; i++) {
          const f = new Int16Array(FRAME);
          if (loud) for (let j = 0; j < FRAME; j++, sample++) f[j] = Math.round(8000 * Math.sin((2 * Math.PI * 300 * sample) / 8000));
          while (performance.now() < next) await sleep(Math.min(5, next - performance.now()));
          transport.emit('audio', f);
          // This frame's audio ends 20 ms on; more than two frames late, the clock starts again from now.
          next = Math.max(next, performance.now() - 40) + 20;
          if (loud) lastLoudAt = next;
        }
      }
      return lastLoudAt;
    },
    async messages() { return messageRepo.ofConversation(db, id); },
    async latency() { return db.selectFrom('turn_latencies').selectAll().where('conversation_id', '=', id).execute(); },
    async close() {
      transport.end('test over');
      await session.done;
      await http.close();
    },
  };
}
