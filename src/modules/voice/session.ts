// One call's spoken conversation over any voice transport (src/media/voice-transport.ts): the
// caller's audio cut into utterances by the VAD (end of turn after the agent's speakingTimeout),
// each transcribed and answered by the conversation engine on the agent's live configuration, the
// reply spoken sentence by sentence as the model streams it. Barge-in stops what is playing and
// keeps in the transcript only what the caller heard. docs/voice.md, "Voice sessions".
//
// The session is a state machine in explicit phases — opening, listening, thinking (the agent's
// turn runs), speaking (a reply plays), transferring, ending, ended — and decides nothing itself:
// what to say and do after each event (heard, silence, key, a failed or slow turn, a finished
// reply, a failed transfer) is the call policy's (call-policy.ts), with the same limits and
// phrases as every other path. Each reply has a handle: its sentences, what was played, when its
// first audio went out, and whether it finished or was interrupted.
import { setMaxListeners } from 'node:events';
import type { ConversationRow, Db, RoomRow } from '../../db/types.ts';
import type { AudioBed, VoiceTransport } from '../../media/voice-transport.ts';
import { resample } from '../../speech/resample.ts';
import type { SpeechGrammar, SpeechToText, SynthesizeOptions, TextToSpeech } from '../../speech/types.ts';
import { VoiceActivityDetector, type VoiceActivity, type VadOptions } from '../../speech/vad.ts';
import type { VoiceSettings } from '../agents/voice-settings.ts';
import type { AgentSettings } from '../agents/settings.ts';
import type { TurnLatencies, TurnStamps } from './latency.ts';
import {
  decide, freshCounters, transferAnnouncement, VOICE_TURN_TIMEOUT_MS, voicemailDecision,
  type AgentLine, type CallDecision, type CallEvent, type CallOpening, type PathCapabilities,
} from './call-policy.ts';
import { messageRepo } from '../conversations/repository.ts';
import { recordAgentLine, type ConversationService } from '../conversations/service.ts';
import type { TurnRunner } from '../conversations/turn.ts';
import { boundedTurn, turnFailure } from './turn-limit.ts';
import type { VoicemailScreen } from './voicemail.ts';

const RATE = 8000;
/** How long one spoken word lasts, roughly: interruptionWordCount words of the caller make a barge-in. */
const MS_PER_WORD = 300;

export interface VoiceSessionDeps {
  db: Db;
  conversations: Pick<ConversationService, 'recordInbound' | 'end'>;
  turns: Pick<TurnRunner, 'run'> & Partial<Pick<TurnRunner, 'warm'>>;
  stt: SpeechToText;
  tts: TextToSpeech;
  now: () => number;
  log?: { warn(obj: object, msg: string): void };
  /** The call policy's turn limit (VOICE_TURN_TIMEOUT_MS); tests shorten it. */
  turnTimeoutMs?: number;
  /** The process's voice activity detectors (speech/detectors.ts: Silero, or energy); without it, energy. */
  vad?: { create(opts: VadOptions & { onFallback?: (reason: string) => void }): VoiceActivity };
  /** Where each turn's latency goes (latency.ts); without it, nowhere. */
  latency?: Pick<TurnLatencies, 'record'>;
}

export interface VoiceSessionInput {
  transport: VoiceTransport;
  conversation: ConversationRow;
  room: RoomRow;
  /** The agent's live configuration, for its turns (the prompt, the tools). */
  config: AgentSettings;
  /** The same configuration read for the call (agents/voice-settings.ts): everything the session itself uses. */
  settings: VoiceSettings;
  /** How the call opens (call-policy.ts callOpening): a pause, keys, the recording notice, the greeting. */
  opening: CallOpening;
  /** What the path carrying the call can do (call-policy.ts CAPABILITIES). */
  capabilities: PathCapabilities;
  /** Recognition restricted to these (menus, tests); free speech otherwise. */
  grammar?: SpeechGrammar;
  /** The greeting already synthesized (8 kHz PCM16), so it starts the moment the call is up. */
  greetingAudio?: Int16Array;
  /** Background audio (backgroundAudio), once loaded: mixed under the agent from the start or after the greeting. */
  background?: Promise<{ bed: AudioBed; afterGreeting: boolean } | null>;
  /** An outbound call's voicemail screen (voicemail.ts): fed the answering side's frames; the greeting waits for its verdict when its plan says so. */
  voicemail?: VoicemailScreen;
}

export type VoicePhase = 'opening' | 'listening' | 'thinking' | 'speaking' | 'transferring' | 'ending' | 'ended';

/** One reply of the agent as it is spoken. */
export interface ReplyHandle {
  /** Sentences queued, by their mark. */
  readonly sentences: Map<string, string>;
  /** Sentences the caller has heard to their end, in order. */
  readonly played: string[];
  /** deps.now() when its first audio went out to the transport; undefined while nothing has. */
  firstAudioAt?: number;
  state: 'speaking' | 'done' | 'interrupted';
  /** The recorded reply (set once the turn has recorded it). */
  messageId?: string;
  readonly abort: AbortController;
}

export interface VoiceSession {
  /** Resolves when the call has ended and everything is recorded. */
  readonly done: Promise<void>;
  /** Where the call is now. */
  readonly phase: VoicePhase;
  /** The reply being spoken, if any. */
  readonly reply: ReplyHandle | undefined;
}

/** Splits streamed text at sentence ends: returns the complete sentences and what is left. */
export function splitSentences(buffer: string): { sentences: string[]; rest: string } {
  const sentences: string[] = [];
  let rest = buffer;
  for (;;) {
    const m = /^(.*?[.!?…])(\s+)/s.exec(rest);
    if (!m) break;
    if (m[1]!.trim()) sentences.push(m[1]!.trim());
    rest = rest.slice(m[0].length);
  }
  return { sentences, rest };
}

/** `text` spoken by `tts`, as the 8 kHz PCM16 calls carry. */
export async function synthesize8k(tts: TextToSpeech, text: string, opts: SynthesizeOptions): Promise<Int16Array> {
  const speech = await tts.synthesize(text, opts);
  return resample(speech.pcm16, speech.sampleRate, RATE);
}

type Ending = 'no_response' | 'ended_by_agent' | 'transferred' | 'hung_up' | 'failed' | 'voicemail';

export function startVoiceSession(deps: VoiceSessionDeps, input: VoiceSessionInput): VoiceSession {
  const { transport, conversation, room, config, settings, opening, capabilities } = input;
  const { language, gender } = settings;
  const turnLimitMs = deps.turnTimeoutMs ?? VOICE_TURN_TIMEOUT_MS;
  transport.setMaxListeners(200);
  const vadOpts = {
    sampleRate: RATE, speakingTimeoutMs: settings.speakingTimeoutMs,
    onFallback: (reason: string) => deps.log?.warn({ conversation: conversation.id, reason }, 'voice session: the Silero VAD fell back to the energy detector for this call'),
  };
  const vad: VoiceActivity = deps.vad ? deps.vad.create(vadOpts) : new VoiceActivityDetector(vadOpts);
  const path = transport.kind === 'twilio-media-stream' ? 'stream' as const : 'sip' as const;
  /** The stamps of the utterance whose turn is being decided (a key press has none). */
  let heardStamps: TurnStamps | undefined;
  const bargeInMs = settings.interruptionWords * MS_PER_WORD;

  let phase: VoicePhase = 'opening';
  let counters = freshCounters();
  /** The outcome our own hang-up or transfer is ending the call with (the transport's `ended` follows it). */
  let closing: { outcome: Ending; detail: string | null } | undefined;
  let heardMs = 0; // caller audio pushed so far, ms
  let callerSpeechStart: number | undefined;
  let silenceTimer: NodeJS.Timeout | undefined;
  let markSeq = 0;
  let reply: ReplyHandle | undefined;
  let chain: Promise<void> = Promise.resolve();
  let resolveDone!: () => void;
  const done = new Promise<void>((r) => { resolveDone = r; });
  const ended = () => phase === 'ended';
  const warn = (err: unknown, msg: string) => deps.log?.warn({ conversation: conversation.id, err: err instanceof Error ? err.message : String(err) }, msg);
  /** Runs `step` after everything before it; a step that fails is logged and does not break the chain. */
  const enqueue = (step: () => Promise<void>) => {
    chain = chain.then(step).catch((err: unknown) => warn(err, 'voice session: a step failed'));
  };

  /** Resolves once the mark's audio has been played, or the call has ended. */
  const waitPlayed = (mark: string, signal?: AbortSignal) => new Promise<boolean>((resolve) => {
    const settle = (played: boolean) => {
      transport.off('played', onPlayed);
      transport.off('ended', onEnded);
      signal?.removeEventListener('abort', onEnded);
      resolve(played);
    };
    const onPlayed = (m: string) => { if (m === mark) settle(true); };
    const onEnded = () => settle(false);
    transport.on('played', onPlayed);
    transport.on('ended', onEnded);
    signal?.addEventListener('abort', onEnded);
  });

  /** Queues audio with a fresh mark. */
  function play(pcm: Int16Array): string {
    const mark = `m${++markSeq}`;
    transport.play(pcm, mark);
    return mark;
  }

  /** Synthesizes one sentence and queues it; resolves with its mark. */
  async function say(text: string, signal?: AbortSignal): Promise<string | undefined> {
    if (ended() || signal?.aborted) return undefined;
    const pcm = await synthesize8k(deps.tts, text, { language, gender, signal });
    if (ended() || signal?.aborted) return undefined;
    return play(pcm);
  }

  /** A line the call says (not the model's): recorded by the one writer, then spoken to its end. */
  async function sayLine(line: AgentLine, audio?: Int16Array): Promise<void> {
    if (ended()) return;
    if (phase === 'listening' || phase === 'thinking') phase = 'speaking';
    clearTimeout(silenceTimer);
    await deps.db.transaction().execute((tx) => recordAgentLine(tx, conversation, line, deps.now()));
    let mark: string | undefined;
    try {
      mark = audio && audio.length > 0 ? play(audio) : await say(line.text);
    } catch (err) {
      // Recorded but not heard: the call goes on (the policy's next step still runs).
      warn(err, `voice session: "${line.kind}" could not be synthesized`);
    }
    if (mark) await waitPlayed(mark);
  }

  function listen(): void {
    clearTimeout(silenceTimer);
    if (ended()) return;
    phase = 'listening';
    silenceTimer = setTimeout(() => enqueue(() => onEvent({ kind: 'silence' })), settings.callerResponseTimeoutMs);
  }

  /** Asks the policy what follows `event`, and does it. */
  async function onEvent(event: CallEvent): Promise<void> {
    if (ended()) return;
    // A silence timer that fired while the caller started speaking, or a reply began, is stale.
    if (event.kind === 'silence' && phase !== 'listening') return;
    const next = decide(settings, counters, event, capabilities);
    counters = next.counters;
    await render(next.decision);
  }

  /** Renders one decision of the policy as audio and signalling. */
  async function render(decision: CallDecision): Promise<void> {
    if (ended()) return;
    switch (decision.next) {
      case 'answer':
        return answer(decision.text);
      case 'listen':
        if (decision.say) await sayLine(decision.say);
        return listen();
      case 'hangup':
        phase = 'ending';
        clearTimeout(silenceTimer);
        if (decision.say) await sayLine(decision.say);
        return hangup(decision.outcome, decision.detail);
      case 'transfer':
        return transfer(decision.destination, decision.name, decision.attended);
    }
  }

  async function hangup(outcome: Exclude<Ending, 'hung_up' | 'transferred'>, detail: string | null): Promise<void> {
    if (ended()) return;
    phase = 'ending';
    closing = { outcome, detail };
    await transport.hangup(outcome).catch((err: Error) => warn(err, 'voice session: ending the call failed'));
    await stop(outcome, detail);
  }

  async function transfer(destination: string, name: string, attended: boolean): Promise<void> {
    phase = 'transferring';
    clearTimeout(silenceTimer);
    const detail = `${name} (${destination})`.slice(0, 500);
    closing = { outcome: 'transferred', detail };
    try {
      // Attended (attendedTransfers): the destination hears who is coming before it is joined.
      const announce = attended ? await announcement(name) : undefined;
      await transport.transfer(destination, announce ? { announce, name } : {});
    } catch (err) {
      // The destination did not take the call: the caller is still with the agent.
      closing = undefined;
      warn(err, 'voice session: the transfer failed');
      if (ended()) return;
      return onEvent({ kind: 'transferFailed', reason: (err as Error).message });
    }
    await stop('transferred', detail);
  }

  /** What the destination of an attended transfer hears before it is joined to the caller. */
  async function announcement(name: string): Promise<Int16Array> {
    try {
      return await synthesize8k(deps.tts, transferAnnouncement(language, name), { language, gender });
    } catch (err) {
      warn(err, 'voice session: the transfer announcement could not be synthesized');
      return new Int16Array(RATE / 2); // joined after half a second of silence rather than not at all
    }
  }

  async function stop(outcome: Ending, detail: string | null): Promise<void> {
    if (ended()) return;
    phase = 'ended';
    clearTimeout(silenceTimer);
    // The detector stops (a Silero one drops the windows still waiting for the model).
    vad.flush();
    transport.background?.(null);
    reply?.abort.abort();
    await deps.conversations.end(conversation.id, outcome, detail);
    resolveDone();
  }

  /**
   * The agent's turn on what the caller said, bounded by the policy's turn limit (the model is
   * aborted past it), spoken sentence by sentence as it streams; then the policy's decision.
   */
  async function answer(text: string): Promise<void> {
    if (ended()) return;
    const stamps = heardStamps;
    heardStamps = undefined;
    phase = 'thinking';
    clearTimeout(silenceTimer);
    const at = deps.now();
    const inbound = await deps.db.transaction().execute((tx) => deps.conversations.recordInbound(tx, { room, conversation, opened: false }, { text }, at));
    const abort = new AbortController();
    // One listener per sentence queued (their marks), which a long reply can exceed ten of.
    setMaxListeners(200, abort.signal);
    const current: ReplyHandle = { sentences: new Map(), played: [], state: 'speaking', abort };
    reply = current;
    let buffer = '';
    let queue: Promise<void> = Promise.resolve();
    /** Resolves once the last sentence queued so far has been played (listened for as it is queued, so no mark is missed). */
    let lastHeard: Promise<boolean> | undefined;
    const speak = (sentence: string) => {
      queue = queue.then(async () => {
        const mark = await say(sentence, abort.signal).catch(() => undefined);
        if (!mark) return;
        if (current.firstAudioAt === undefined) {
          current.firstAudioAt = deps.now();
          if (phase === 'thinking') phase = 'speaking';
        }
        current.sentences.set(mark, sentence);
        const heard = waitPlayed(mark, abort.signal);
        lastHeard = heard;
        void heard.then((played) => { if (played && current.state !== 'interrupted') current.played.push(sentence); });
      });
    };
    let event: CallEvent;
    let llm: string | null = null;
    try {
      const result = await boundedTurn(deps.turns, {
        conversation, room, config, inbound: { id: inbound.id, text, at }, allowAsync: false, replyStatus: 'success',
        onText: (delta) => {
          if (stamps && stamps.firstTokenAt === undefined && delta !== '') stamps.firstTokenAt = deps.now();
          const split = splitSentences(buffer + delta);
          buffer = split.rest;
          split.sentences.forEach(speak);
        },
        // The last words go to synthesis as the stream ends, not after the reply is recorded.
        onTextEnd: () => {
          if (buffer.trim()) speak(buffer.trim());
          buffer = '';
        },
      }, turnLimitMs, abort);
      if (result.kind !== 'reply') throw new Error('the turn waits for an automation answer, which a call cannot');
      current.messageId = result.messageId;
      llm = result.simulated ? 'simulated' : result.engine;
      if (buffer.trim()) speak(buffer.trim());
      buffer = '';
      event = { kind: 'replied', effects: result.effects };
    } catch (err) {
      if (current.state === 'interrupted') event = { kind: 'replied', effects: [] };
      else {
        event = turnFailure(err);
        warn(err, event.kind === 'turnTooSlow' ? 'voice session: the turn took too long' : 'voice session: the turn failed');
        // Whatever of the failed reply was queued is dropped: the apology follows at once.
        abort.abort();
        transport.clear();
      }
    }
    if (event.kind === 'replied') {
      await queue;
      // The first audio is out (or none will be): the turn's latency, recorded while the reply plays.
      if (stamps && current.messageId && deps.latency) {
        await deps.latency.record(conversation, current.messageId, { path, vad: vad.engine, stt: deps.stt.name, llm, tts: deps.tts.name }, { ...stamps, firstAudioAt: current.firstAudioAt });
      }
      // Until the reply has been heard to its end, or the caller cut it short (barge-in aborts).
      if (lastHeard && current.state !== 'interrupted') await lastHeard;
      if (current.state === 'interrupted') {
        // Only what the caller heard stays in the transcript (and in the model's history); its
        // effects (an end, a transfer) are dropped: the caller is talking.
        if (current.messageId) await messageRepo.interrupt(deps.db, current.messageId, current.played.join(' ') || '…');
        event = { kind: 'replied', effects: [] };
      } else current.state = 'done';
    }
    if (reply === current) reply = undefined;
    if (phase === 'thinking' || phase === 'speaking') phase = 'listening';
    await onEvent(event);
  }

  function bargeIn(): void {
    const current = reply;
    if (!current || current.state !== 'speaking') return;
    current.state = 'interrupted';
    transport.clear();
    current.abort.abort();
  }

  // The model's client loads while the greeting plays, not in the first turn.
  deps.turns.warm?.(conversation, config).catch((err: unknown) => warn(err, 'voice session: warming the model engine failed'));

  // The detector's events (the energy detector's as the audio is pushed; Silero's once its model has answered).
  vad.on('speechStart', (ev) => {
    if (ended()) return;
    callerSpeechStart = ev.atMs;
    if (phase === 'listening') clearTimeout(silenceTimer);
  });
  vad.on('speechEnd', (ev) => {
    if (ended()) return;
    callerSpeechStart = undefined;
    const pcm = ev.pcm16;
    // The caller stopped speaking where the last voiced frame ends: that far behind the audio heard so far.
    const turnEndedAt = deps.now();
    const speechEndedAt = turnEndedAt - Math.max(0, heardMs - ev.speechEndMs);
    enqueue(async () => {
      if (ended()) return;
      const heard = await deps.stt.transcribe(pcm, RATE, { language, grammar: input.grammar }).catch((err: Error) => {
        warn(err, 'voice session: recognition failed');
        return { text: '' };
      });
      // Nothing intelligible (a cough, the line): keep listening, it is not a silence either.
      if (heard.text.trim()) {
        heardStamps = { speechEndedAt, turnEndedAt, transcriptAt: deps.now() };
        await onEvent({ kind: 'heard', text: heard.text.trim() });
        heardStamps = undefined;
      } else if (phase === 'listening') listen();
    });
  });

  transport.on('audio', (frame) => {
    if (ended()) return;
    heardMs += (frame.length / RATE) * 1000;
    vad.push(frame);
    // Barge-in: the caller has been talking long enough over a reply that has been heard long
    // enough — counted from its first audio, not from when the turn started (model time is not speaking).
    const current = reply;
    if (capabilities.bargeIn && callerSpeechStart !== undefined && current?.state === 'speaking' && current.firstAudioAt !== undefined
      && heardMs - callerSpeechStart >= bargeInMs && deps.now() - current.firstAudioAt >= settings.interruptionMinimumSpeakingMs) bargeIn();
  });
  transport.on('dtmf', (digit) => { if (capabilities.keys) enqueue(() => onEvent({ kind: 'key', digit })); });
  transport.on('ended', () => { void stop(closing?.outcome ?? 'hung_up', closing?.detail ?? null); });

  // Background audio plays from the start, or from the end of the greeting, whenever it has loaded.
  let greeted = false;
  let bedAfterGreeting: AudioBed | undefined;
  if (capabilities.backgroundAudio) {
    void input.background?.then((b) => {
      if (!b || ended()) return;
      if (b.afterGreeting && !greeted) bedAfterGreeting = b.bed;
      else transport.background?.(b.bed);
    }, () => {});
  }

  // Voicemail (outbound calls): the screen hears the answering side from the first frame. When its
  // plan holds the greeting, the opening waits for who answered and renders the policy's decision
  // on a machine (hang up, or the message after the beep) instead of greeting it.
  const screen = input.voicemail;
  if (screen) transport.on('audio', (frame) => { if (!ended()) screen.push(frame); });
  const callEnded = new Promise<undefined>((resolve) => transport.once('ended', () => resolve(undefined)));
  /** True when the call ended on the screen's verdict (a machine), false when it goes on. */
  async function screened(s: VoicemailScreen): Promise<boolean> {
    const answeredBy = await Promise.race([s.verdict, callEnded]);
    if (answeredBy === undefined || ended()) return true;
    const decision = voicemailDecision(s.plan, answeredBy);
    if (decision.next === 'go-on') return false;
    phase = 'ending';
    if (decision.next === 'leave-message') {
      await Promise.race([s.greetingEnd, callEnded]);
      if (ended()) return true;
      s.messageStarts();
      await sayLine(decision.say);
    }
    await hangup(decision.outcome, decision.detail);
    return true;
  }

  // The opening (the policy's): keys, a pause, the recording notice, then the greeting
  // (synthesized before the call was up when it could be).
  enqueue(async () => {
    const digits = opening.digits.replace(/[^0-9*#A-D]/g, '');
    if (digits) await transport.sendDigits(digits).catch((err: unknown) => warn(err, 'voice session: the keys on answer could not be sent'));
    const held = screen?.plan.holdGreeting === true;
    if (held && await screened(screen!)) return;
    // A greeting held for the screen has listened already: no pause on top.
    if (opening.pauseMs > 0 && !held) transport.play(new Int16Array(Math.round((opening.pauseMs / 1000) * RATE)));
    if (opening.notice) await sayLine(opening.notice);
    if (opening.greeting) await sayLine(opening.greeting, input.greetingAudio);
    greeted = true;
    if (bedAfterGreeting && !ended()) transport.background?.(bedAfterGreeting);
    listen();
  });

  return {
    done,
    get phase() { return phase; },
    get reply() { return reply; },
  };
}
