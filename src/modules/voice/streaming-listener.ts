// The caller heard by a streaming recogniser (Deepgram live or Flux: src/speech/deepgram.ts), a
// Listener of the voice session (listener.ts) chosen by the agent's agentSttEngine when the process
// has that engine (start-call.ts). The stream opens when the call is answered and gets every frame
// as it comes (linear16 at 8 kHz, the transport's own samples); the recogniser's end of turn
// (live's speech_final or UtteranceEnd, Flux's EndOfTurn) ends the caller's turn instead of our
// VAD's silence timer. Flux's EagerEndOfTurn is passed on as a tentative turn (the session asks the
// model early and holds its reply) and its TurnResumed withdraws it. Our VAD still runs on the
// same frames: its speech start is a barge-in when it comes before the recogniser's ("whichever is
// first"), and it keeps the utterance under way.
//
// A recogniser that refuses, does not open in time or fails mid-call (its second dropped socket, no
// result in time, an error from the server) never leaves a silent line: from then on the call is
// heard as today's listener hears it — our VAD's utterances, the configured batch recogniser —
// and the utterance under way when it failed is transcribed whole (less what the recogniser had
// already heard), so that turn is not lost. The switch is reported once (`onChange`): the
// conversation's state.speech records it. docs/voice.md, "Deepgram".
import { pcm16ToBytes } from '../../media/pcm.ts';
import type { RecognitionEvent, RecognitionStream, StreamingSpeechToText } from '../../speech/types.ts';
import { EnergyLevels, vadOptions, type SpeechEnd } from '../../speech/vad.ts';
import {
  callerVad, transcribeInTurn,
  type Listener, type ListenerDeps, type UtteranceListenerOptions, type UtteranceStamps,
} from './listener.ts';
import type { SpeechChange } from './call-state.ts';

const RATE = 8000;
/** Frames kept while the stream opens (its own open bound is 5 s): 6 s of them. */
const MAX_PENDING_FRAMES = 300;
/**
 * How long an utterance of our VAD waits for the recogniser to open a turn before it is taken for a
 * sound without words: the recogniser's events trail the audio by its network and processing time.
 */
const UNHEARD_GRACE_MS = 1000;

export interface StreamingListenerOptions extends UtteranceListenerOptions {
  /** The streaming recogniser (speech/registry.ts sttFor's `streaming`). */
  engine: StreamingSpeechToText;
  /** The recogniser failed: the batch one hears from now on. */
  onChange: (change: SpeechChange) => void;
}

export function streamingListener(deps: ListenerDeps, o: StreamingListenerOptions): Listener {
  const { engine } = o;
  let mode: 'opening' | 'streaming' | 'fallback' = 'opening';
  let stopped = false;
  let stream: RecognitionStream | undefined;
  let pending: Buffer[] = [];
  const abort = new AbortController();

  // The turn as reported to the session: speechStart said (from whichever came first), and where in the audio.
  let speakingSinceMs: number | undefined;
  /** The recogniser has a turn open (startOfTurn without its endOfTurn yet). */
  let streamTurnOpen = false;
  /** Where the recogniser's last turn ended, in the audio (ms): what came before it has been heard. */
  let streamHeardToMs = 0;
  /** Where the last voiced frame ended (ms of audio, by energy): the end of the caller's speech for a streamed turn. */
  let lastVoicedMs = 0;
  const levels = new EnergyLevels(vadOptions({ sampleRate: RATE }));
  /** An utterance of our VAD that ended while the recogniser's turn was open: transcribed if the recogniser fails before ending it. */
  let unclaimed: { ev: SpeechEnd; stamps: UtteranceStamps } | undefined;
  /** An utterance of our VAD the recogniser has not opened a turn for (yet): unheard after the grace, unless a turn opens. */
  let wordless: { ev: SpeechEnd; stamps: UtteranceStamps; timer: NodeJS.Timeout } | undefined;
  const clearWordless = () => {
    if (wordless) clearTimeout(wordless.timer);
    const w = wordless;
    wordless = undefined;
    return w;
  };

  const speechStart = (atMs: number) => {
    if (speakingSinceMs !== undefined) return;
    speakingSinceMs = atMs;
    o.to.speechStart();
  };

  const vad = callerVad(deps, o, {
    start: (atMs) => {
      if (mode === 'fallback') o.to.speechStart();
      else speechStart(atMs);
    },
    end: (ev, stamps) => {
      if (mode === 'fallback') return transcribeRest(ev, stamps);
      if (streamTurnOpen) {
        unclaimed = { ev, stamps };
        return;
      }
      // A sound our VAD took for speech and the recogniser heard no words in (or ended already):
      // unless the recogniser opens a turn for it within the grace (its events trail the audio).
      if (speakingSinceMs !== undefined && ev.startMs >= streamHeardToMs) {
        clearWordless();
        wordless = {
          ev, stamps,
          timer: setTimeout(() => {
            wordless = undefined;
            if (streamTurnOpen || stopped || mode === 'fallback') return;
            speakingSinceMs = undefined;
            o.inTurn(async () => { if (!stopped) o.to.unheard(); });
          }, UNHEARD_GRACE_MS),
        };
      }
    },
  });

  /** An utterance of our VAD, after the fall back: transcribed from where the recogniser stopped hearing. */
  function transcribeRest(ev: SpeechEnd, stamps: UtteranceStamps): void {
    const skipMs = Math.max(0, streamHeardToMs - ev.startMs);
    if (skipMs >= ev.endMs - ev.startMs) return;
    transcribeInTurn(deps, o, vad.engine, ev.pcm16.subarray(Math.round((skipMs * RATE) / 1000)), stamps, () => stopped);
  }

  function fallBack(reason: string): void {
    if (mode === 'fallback' || stopped) return;
    mode = 'fallback';
    pending = [];
    const s = stream;
    stream = undefined;
    s?.off(onEvent);
    void s?.close();
    o.warn(new Error(reason), `voice session: ${engine.name} failed; ${deps.stt.name} hears the rest of the call`);
    o.onChange({ at: deps.now(), from: engine.name, to: deps.stt.name, reason: reason.slice(0, 500) });
    streamTurnOpen = false;
    speakingSinceMs = undefined;
    // A reply asked early for the turn under way is not that turn's any more: the batch recogniser hears it again.
    o.to.withdrawn?.();
    // The turn under way: an utterance our VAD already ended is transcribed now; one still going on is, when it ends.
    const left = unclaimed ?? clearWordless();
    unclaimed = undefined;
    clearWordless();
    if (left) transcribeRest(left.ev, left.stamps);
  }

  function onEvent(e: RecognitionEvent): void {
    if (stopped || mode === 'fallback') return;
    switch (e.type) {
      case 'startOfTurn': {
        streamTurnOpen = true;
        // A turn for the utterance our VAD ended a moment ago: it is this turn, not a sound without words.
        const late = clearWordless();
        if (late) unclaimed = late;
        speechStart(vad.heardMs);
        return;
      }
      case 'endOfTurn': {
        streamTurnOpen = false;
        unclaimed = undefined;
        clearWordless();
        streamHeardToMs = vad.heardMs;
        const turnEndedAt = deps.now();
        const since = speakingSinceMs ?? vad.heardMs;
        speakingSinceMs = undefined;
        // The caller stopped speaking at the turn's last voiced frame: that far behind the audio heard so far.
        const speechEndedAt = turnEndedAt - Math.max(0, vad.heardMs - Math.max(lastVoicedMs, since));
        const text = e.text.trim();
        o.inTurn(async () => {
          if (stopped) return;
          if (!text) return o.to.unheard();
          await o.to.heard({ text, stamps: { speechEndedAt, turnEndedAt, transcriptAt: deps.now() }, engines: { vad: engine.name, stt: engine.name } });
        });
        return;
      }
      case 'eagerEndOfTurn': {
        // Flux thinks the turn is over: the session may ask the model now, and plays nothing before endOfTurn.
        const text = e.text.trim();
        if (text) o.to.tentative?.({ text });
        return;
      }
      case 'turnResumed':
        o.to.withdrawn?.();
        return;
      case 'reconnected':
        o.warn(new Error(`${e.resentBytes} bytes resent, ${e.droppedBytes} dropped`), `voice session: ${engine.name}'s connection dropped and was replaced`);
        return;
      case 'error':
        return fallBack(e.error.message);
      case 'closed':
        // Closed without an error, and not by us: nothing hears the call any more.
        return fallBack(`${engine.name}'s stream closed`);
      default:
        // interim words, live's own events: not used here.
    }
  }

  function write(s: RecognitionStream, audio: Buffer): void {
    try {
      s.write(audio);
    } catch (err) {
      fallBack((err as Error).message);
    }
  }

  const keywords = o.grammar?.kind === 'phrases' ? o.grammar.phrases : undefined;
  engine.open({ language: o.language, encoding: 'linear16', sampleRate: RATE, keywords, signal: abort.signal }).then((s) => {
    if (stopped || mode === 'fallback') {
      void s.close();
      return;
    }
    stream = s;
    mode = 'streaming';
    s.on(onEvent);
    for (const audio of pending.splice(0)) write(s, audio);
  }, (err: unknown) => {
    fallBack(err instanceof Error ? err.message : String(err));
  });

  return {
    get engines() {
      return mode === 'fallback' ? { vad: vad.engine, stt: deps.stt.name } : { vad: engine.name, stt: engine.name };
    },
    hear(frame) {
      if (stopped) return;
      vad.hear(frame);
      if (levels.voiced(levels.observe(frame), speakingSinceMs !== undefined)) lastVoicedMs = vad.heardMs;
      if (mode === 'fallback') return;
      const audio = pcm16ToBytes(frame);
      if (stream) write(stream, audio);
      else if (pending.push(audio) > MAX_PENDING_FRAMES) pending.shift();
    },
    speakingMs() {
      if (mode === 'fallback') return vad.speakingMs();
      return speakingSinceMs === undefined ? undefined : vad.heardMs - speakingSinceMs;
    },
    stop() {
      if (stopped) return;
      stopped = true;
      clearWordless();
      vad.stop();
      pending = [];
      const s = stream;
      stream = undefined;
      s?.off(onEvent);
      // The stream's close is bounded (CloseStream, the server's last results, its close) and never rejects.
      if (s) void s.close();
      else abort.abort();
    },
  };
}
