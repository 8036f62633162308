// Which voice speaks a call, and what happens when it fails. The agent's agentTtsEngine picks it
// (agents/voice-settings.ts): none is the process's configured voice (CALLPLANE_TTS: espeak-ng or
// an OpenAI-compatible server), exactly as before; a streamed engine the process has a key for
// (ElevenLabs, Cartesia, Deepgram Aura: SpeechEngines.voices) speaks the call's lines through its
// one-shot synthesis and the model's replies as they stream (reply-player.ts byStream); an engine
// the process does not have is replaced by the configured voice, and the call's state says so.
//
// A provider that refuses, times out or drops never leaves a silent line: the speaker falls back to
// the configured voice for the rest of the call, the line or sentence that failed is spoken again
// in it, and the change (from, to, why) goes to the call's `state.speech` (call-state.ts).
// The call's own lines go through the greeting cache (greeting-cache.ts) when the process has one.
// A voice that streams one synthesis at a time (an OpenAI-compatible server, whose answer is read
// as it arrives) speaks each reply sentence as its audio comes (`piecesOf`), resampled to 8 kHz
// piece by piece (StreamResampler), instead of after the sentence's last byte.
import type { VoiceSettings } from '../agents/voice-settings.ts';
import { ESPEAK } from '../../speech/espeak.ts';
import type { StreamedVoice, StreamedVoices } from '../../speech/registry.ts';
import { StreamResampler } from '../../speech/resample.ts';
import type { SynthesisStream, TextToSpeech } from '../../speech/types.ts';
import type { SpeechKeySource } from '../speech-providers/service.ts';
import type { SpeechChange, VoiceNote } from './call-state.ts';
import type { GreetingCache } from './greeting-cache.ts';
import { synthesize8k } from './reply-player.ts';
import { SpeechMeter, vendorOf } from './speech-meter.ts';

const RATE = 8000;
const FORMAT = 'pcm16/8000';
/** A streamed sentence's audio is played in pieces of at least this many samples (10 ms; the last one may be shorter): what has come is played, but a server's tiny writes are not each a piece. */
const MIN_PIECE = 80;

/** The key each streamed engine's process setting is named after. */
const KEY_SETTING: Readonly<Record<string, string>> = {
  elevenlabs: 'CALLPLANE_ELEVENLABS_API_KEY', cartesia: 'CALLPLANE_CARTESIA_API_KEY', deepgram: 'CALLPLANE_DEEPGRAM_API_KEY',
};

/** The engine names (TextToSpeech.name) of agentTtsEngine's offline and OpenAI-compatible values. */
const ENGINE_NAMES: Readonly<Record<'espeak' | 'openai', string>> = { espeak: ESPEAK, openai: 'openai' };

export interface SpeakerDeps {
  /** The process's configured voice (CALLPLANE_TTS), and every call's fallback. */
  tts: TextToSpeech;
  /** The streamed voices this process has keys for. */
  voices?: StreamedVoices;
  /** The call lines already synthesized; without it, each call synthesizes its own. */
  greetings?: GreetingCache;
}

/** Whose key the streamed voice in `voices` uses (org-speech.ts), or why the organization's could not be used. */
export interface VoiceKeys {
  source?: SpeechKeySource;
  refused?: string;
  /**
   * Whose key it is when it is not the process's (`organization <id>`): the greeting cache keeps
   * what one organization's key made apart from every other's, so another organization naming the
   * same voice id (a voice cloned in that account) never hears it from the cache.
   */
  owner?: string;
}

/** What the call's state says of its voice (state.speech, beside stt and vad). */
export type SpeakerNote = VoiceNote;

interface Choice {
  engine: TextToSpeech;
  streamed?: StreamedVoice;
  /** The engine's own voice id; undefined: the engine's default for the language and gender. */
  voice?: string;
  substituted?: string;
  keySource?: SpeechKeySource;
  /** Whose key made the audio (VoiceKeys.owner); the process's when absent. */
  keyOwner?: string;
}

/** The voice a call with `settings` starts with on a process with `deps`' engines (`keys`: whose key its streamed voice uses). */
export function chooseVoice(deps: SpeakerDeps, settings: Pick<VoiceSettings, 'ttsEngine' | 'engineVoice'>, keys: VoiceKeys = {}): Choice {
  const asked = settings.ttsEngine;
  if (asked === null) return { engine: deps.tts };
  if (asked === 'elevenlabs' || asked === 'cartesia' || asked === 'deepgram') {
    const streamed = deps.voices?.[asked];
    if (streamed) return { engine: streamed, streamed, voice: settings.engineVoice, keySource: keys.source ?? 'process', ...(keys.owner ? { keyOwner: keys.owner } : {}) };
    if (keys.refused) return { engine: deps.tts, substituted: `${keys.refused}: the configured voice (${deps.tts.name}) speaks` };
    return { engine: deps.tts, substituted: `${asked} has no key on this process (${KEY_SETTING[asked]}) nor of the organization: the configured voice (${deps.tts.name}) speaks` };
  }
  if (ENGINE_NAMES[asked] === deps.tts.name) return { engine: deps.tts, voice: settings.engineVoice };
  return { engine: deps.tts, substituted: `this process speaks with ${deps.tts.name} (CALLPLANE_TTS), not ${ENGINE_NAMES[asked]}` };
}

/** A call's voice: its lines as 8 kHz audio, its replies' streams, and its fallback. */
export class CallSpeaker {
  private current: Choice;
  private readonly changes: SpeechChange[] = [];
  /** The characters this call's remote voices were given (recorded for billing when the call ends). */
  readonly meter = new SpeechMeter();
  /** Told of every change (start-call.ts writes it into the call's state). */
  onChange: ((note: SpeakerNote) => void) | undefined;

  constructor(
    private readonly deps: SpeakerDeps,
    private readonly settings: Pick<VoiceSettings, 'ttsEngine' | 'engineVoice' | 'language' | 'gender'>,
    private readonly now: () => number,
    keys: VoiceKeys = {},
  ) {
    this.current = chooseVoice(deps, settings, keys);
  }

  /** The engine speaking now. */
  get name(): string { return this.current.engine.name; }
  /** Whether replies are spoken as the model streams them. */
  get streaming(): boolean { return this.current.streamed !== undefined; }

  note(): SpeakerNote {
    const { language, gender, ttsEngine } = this.settings;
    return {
      tts: this.current.engine.name,
      voice: this.current.voice ?? `default ${gender} ${language}`,
      streamed: this.streaming,
      offline: this.current.engine.offline,
      ...(ttsEngine ? { requested: ttsEngine } : {}),
      ...(this.current.keySource ? { keySource: this.current.keySource } : {}),
      ...(this.current.substituted && this.changes.length === 0 ? { substituted: this.current.substituted } : {}),
      ...(this.changes.length ? { changes: [...this.changes] } : {}),
    };
  }

  /**
   * `text` as the call's 8 kHz audio in the call's voice; `line` (a line of the call, not a
   * model's sentence) goes through the greeting cache. A failure of a provider's voice (not an
   * abort) falls back to the configured voice, which says it instead.
   */
  async audio(text: string, opts: { signal?: AbortSignal; line?: boolean } = {}): Promise<Int16Array> {
    const { signal } = opts;
    const cache = opts.line ? this.deps.greetings : undefined;
    const once = (c: Choice) => {
      const make = () => this.synthesize(c, text, signal);
      return cache ? cache.through(this.keyOf(c, text), make) : make();
    };
    const used = this.current;
    try {
      return await once(used);
    } catch (err) {
      if (signal?.aborted || used.engine === this.deps.tts) throw err;
      this.fellBack(used, err);
      return once(this.current);
    }
  }

  /** A reply's stream in the call's voice (8 kHz PCM16 chunks), or undefined when the voice is not a streamed one (now). */
  openStream(signal: AbortSignal): SynthesisStream | undefined {
    const used = this.current;
    if (!used.streamed) return undefined;
    const { language, gender } = this.settings;
    try {
      const stream = used.streamed.openStream({ language, gender, ...(used.voice ? { voice: used.voice } : {}), sampleRate: RATE, encoding: 'pcm', signal });
      return this.meter.synthesizing(stream, vendorOf(used.engine));
    } catch (err) {
      this.fellBack(used, err);
      return undefined;
    }
  }

  /**
   * One sentence of a reply as 8 kHz pieces while the voice's server sends it, when the voice now
   * streams one synthesis (synthesizeStream: OpenAI-compatible speech) and is not a streamed engine
   * (those take the whole reply: openStream); undefined otherwise (synthesize it whole). A failure
   * (not an abort) falls back to the configured voice, which says the sentence again, whole.
   */
  piecesOf(text: string, signal: AbortSignal): AsyncIterable<Int16Array> | undefined {
    const used = this.current;
    if (used.streamed || used.engine.offline || !used.engine.synthesizeStream) return undefined;
    return this.pieces(used, text, signal);
  }

  private async *pieces(used: Choice, text: string, signal: AbortSignal): AsyncGenerator<Int16Array> {
    const { language, gender } = this.settings;
    const vendor = vendorOf(used.engine);
    if (vendor) this.meter.add(vendor, 'characters', text.length);
    let resampler: StreamResampler | undefined;
    let pending: Int16Array[] = [];
    let pendingLength = 0;
    const take = (): Int16Array => {
      const piece = pending.length === 1 ? pending[0]! : new Int16Array(pendingLength);
      if (pending.length > 1) {
        let at = 0;
        for (const p of pending) {
          piece.set(p, at);
          at += p.length;
        }
      }
      pending = [];
      pendingLength = 0;
      return piece;
    };
    try {
      for await (const chunk of used.engine.synthesizeStream!(text, { language, gender, ...(used.voice ? { voice: used.voice } : {}), signal })) {
        resampler ??= new StreamResampler(chunk.sampleRate, RATE);
        const out = resampler.push(chunk.pcm16);
        if (out.length === 0) continue;
        pending.push(out);
        pendingLength += out.length;
        if (pendingLength >= MIN_PIECE) yield take();
      }
      const rest = resampler?.end();
      if (rest?.length) {
        pending.push(rest);
        pendingLength += rest.length;
      }
      if (pendingLength > 0) yield take();
    } catch (err) {
      if (signal.aborted) return;
      this.fellBack(used, err);
      yield await this.audio(text, { signal });
    }
  }

  /** A reply's stream failed (refused, too slow, dropped): the configured voice speaks from now on. */
  streamFailed(err: unknown): void {
    this.failed(err);
  }

  /** The voice failed in a way its caller saw (a greeting past its wait): the configured voice speaks from now on. */
  failed(err: unknown): void {
    this.fellBack(this.current, err);
  }

  private fellBack(from: Choice, err: unknown): void {
    if (this.current !== from || from.engine === this.deps.tts) return;
    const reason = err instanceof Error ? err.message : String(err);
    this.current = { engine: this.deps.tts };
    this.changes.push({ at: this.now(), from: from.engine.name, to: this.deps.tts.name, reason: reason.slice(0, 300) });
    this.onChange?.(this.note());
  }

  private keyOf(c: Choice, text: string) {
    return { text, engine: c.engine.name, voice: c.voice ?? this.settings.gender, language: this.settings.language, format: FORMAT, keyOwner: c.keyOwner ?? 'process' };
  }

  private synthesize(c: Choice, text: string, signal: AbortSignal | undefined): Promise<Int16Array> {
    const { language, gender } = this.settings;
    const vendor = vendorOf(c.engine);
    if (vendor) this.meter.add(vendor, 'characters', text.length);
    return synthesize8k(c.engine, text, { language, gender, ...(c.voice ? { voice: c.voice } : {}), signal });
  }
}

/** The voice of one call with `settings`, chosen now. */
export function callSpeaker(deps: SpeakerDeps, settings: ConstructorParameters<typeof CallSpeaker>[1], now: () => number, keys?: VoiceKeys): CallSpeaker {
  return new CallSpeaker(deps, settings, now, keys);
}
