// One call's spoken conversation over any voice transport (src/media/voice-transport.ts): the
// caller's audio cut into utterances by the VAD (end of turn after the agent's speakingTimeout),
// each transcribed and answered by the conversation engine on the agent's live configuration, the
// reply spoken sentence by sentence as the model streams it. Barge-in stops what is playing and
// keeps in the transcript only what the caller heard. docs/voice.md, "Voice sessions".
import crypto from 'node:crypto';
import { setMaxListeners } from 'node:events';
import type { ConversationRow, Db, RoomRow } from '../../db/types.ts';
import type { AudioBed, VoiceTransport } from '../../media/voice-transport.ts';
import { resample } from '../../speech/resample.ts';
import type { SpeechGrammar, SpeechToText, SynthesizeOptions, TextToSpeech } from '../../speech/types.ts';
import { VoiceActivityDetector } from '../../speech/vad.ts';
import { DEFAULT_WAIT_TO_GREET_SECONDS } from '../../providers/index.ts';
import type { AgentConfig } from '../agents/validation.ts';
import { messageRepo } from './repository.ts';
import { transferAnnouncement } from './voice-twiml.ts';
import type { ConversationService } from './service.ts';
import type { TurnRunner } from './turn.ts';

const RATE = 8000;
/** Longest pause waitOnAnswer may put before the greeting. */
const MAX_PAUSE_MS = 10_000;
const TRANSFER_FAILED = 'Sorry, I could not transfer your call. How else can I help?';
/** How long one spoken word lasts, roughly: interruptionWordCount words of the caller make a barge-in. */
const MS_PER_WORD = 300;

export interface VoiceSessionDeps {
  db: Db;
  conversations: Pick<ConversationService, 'recordInbound' | 'end'>;
  turns: Pick<TurnRunner, 'run'>;
  stt: SpeechToText;
  tts: TextToSpeech;
  now: () => number;
  log?: { warn(obj: object, msg: string): void };
}

export interface VoiceSessionInput {
  transport: VoiceTransport;
  conversation: ConversationRow;
  room: RoomRow;
  /** The agent's live configuration. */
  config: AgentConfig;
  /** Recognition restricted to these (menus, tests); free speech otherwise. */
  grammar?: SpeechGrammar;
  /** What the agent says first (a task's greeting); default the live welcomeMessage, '' for nothing. */
  greeting?: string;
  /** The greeting already synthesized (8 kHz PCM16), so it starts the moment the call is up. */
  greetingAudio?: Int16Array;
  /** Let the callee speak first (a task's waitToGreet): a pause before the greeting when waitOnAnswer sets none. */
  waitToGreet?: boolean;
  /** Background audio (backgroundAudio), once loaded: mixed under the agent from the start or after the greeting. */
  background?: Promise<{ bed: AudioBed; afterGreeting: boolean } | null>;
  /** Said before the greeting (the recording notice), and kept in the transcript as `recording_notice`. */
  announce?: string;
}

export interface VoiceSession {
  /** Resolves when the call has ended and everything is recorded. */
  readonly done: Promise<void>;
}

const num = (v: unknown, d: number) => (typeof v === 'number' && Number.isFinite(v) ? v : d);
const str = (v: unknown) => (typeof v === 'string' ? v : '');

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

/** A voice call's conversation state: its transport and which engines heard and spoke (`offline` when both ran here). */
export function voiceState(transport: string, speech: { stt: SpeechToText; tts: TextToSpeech }): Record<string, unknown> {
  return { transport, speech: { stt: speech.stt.name, tts: speech.tts.name, offline: speech.stt.offline && speech.tts.offline } };
}

/** The language and voice gender the agent speaks and listens in (agentLang, agentVoice). */
export function voiceLanguage(config: AgentConfig): { language: string; gender: 'male' | 'female' } {
  const language = str(config.agentLang) && config.agentLang !== 'multi' ? str(config.agentLang) : 'en-US';
  const gender = /male$/i.test(str(config.agentVoice)) && !/female$/i.test(str(config.agentVoice)) ? 'male' : 'female';
  return { language, gender };
}

export function startVoiceSession(deps: VoiceSessionDeps, input: VoiceSessionInput): VoiceSession {
  const { transport, conversation, room, config } = input;
  const { language, gender } = voiceLanguage(config);
  transport.setMaxListeners(200);
  const vad = new VoiceActivityDetector({ sampleRate: RATE, speakingTimeoutMs: num(config.speakingTimeout, 1200) });
  const bargeInMs = num(config.interruptionWordCount, 3) * MS_PER_WORD;
  const minSpeakingMs = num(config.interruptionMinimumSpeakingTime, 3) * 1000;
  const silenceMs = num(config.callerResponseTimeout, 13) * 1000;
  const maxPrompts = num(config.callerResponseTimeoutHangupCounter, 3);

  let ended = false;
  /** The outcome our own hang-up or transfer is ending the call with (the transport's `ended` follows it). */
  let closing: 'no_response' | 'ended_by_agent' | 'transferred' | 'failed' | undefined;
  let heardMs = 0; // caller audio pushed so far, ms
  let callerSpeechStart: number | undefined;
  let noResponse = 0;
  let silenceTimer: NodeJS.Timeout | undefined;
  let markSeq = 0;
  /** The reply being spoken: its sentences, which were played, and how to stop it. */
  let speaking: { sentences: Map<string, string>; played: string[]; startedAt: number; abort: AbortController; messageId?: string; cut: boolean } | undefined;
  let chain: Promise<void> = Promise.resolve();
  /**
   * Runs `step` after the steps before it. A step that fails is logged and the next still runs: a
   * rejection left on the chain would skip every later step (the call would go deaf) and, unhandled,
   * end the whole process.
   */
  const then = (step: () => Promise<void>) => {
    chain = chain.then(step).catch((err: Error) => deps.log?.warn({ conversation: conversation.id, err: err.message }, 'voice session: a step failed'));
  };
  let resolveDone!: () => void;
  const done = new Promise<void>((r) => { resolveDone = r; });

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

  /** Synthesizes one sentence and queues it; resolves with its mark. */
  async function say(text: string, signal?: AbortSignal): Promise<string | undefined> {
    if (ended || signal?.aborted) return undefined;
    const pcm = await synthesize8k(deps.tts, text, { language, gender, signal });
    if (ended || signal?.aborted) return undefined;
    const mark = `m${++markSeq}`;
    transport.play(pcm, mark);
    return mark;
  }

  function armSilence(): void {
    clearTimeout(silenceTimer);
    if (ended) return;
    silenceTimer = setTimeout(() => { then(onSilence); }, silenceMs);
  }

  /** A prompt of our own; a speech engine that fails (not installed, its provider down) leaves it unsaid, the call goes on. */
  function prompt(text: string): Promise<string | undefined> {
    return say(text).catch((err: Error) => {
      deps.log?.warn({ conversation: conversation.id, err: err.message }, 'voice session: a prompt could not be synthesized');
      return undefined;
    });
  }

  async function onSilence(): Promise<void> {
    if (ended || speaking) return;
    if (noResponse >= maxPrompts) {
      const mark = await prompt('I have not heard from you, so I will end the call now. Goodbye.');
      if (mark) await waitPlayed(mark);
      await finish('no_response');
      return;
    }
    noResponse++;
    const mark = await prompt('Are you still there?');
    if (mark) await waitPlayed(mark);
    armSilence();
  }

  async function finish(outcome: 'no_response' | 'ended_by_agent' | 'transferred' | 'hung_up' | 'failed', transferTo?: { destination: string; name?: string }): Promise<void> {
    if (ended) return;
    if (outcome !== 'hung_up') closing = outcome;
    if (transferTo) {
      try {
        // Attended (attendedTransfers): the destination hears who is coming before it is joined.
        const announce = config.attendedTransfers === true ? await announcement(transferTo.name) : undefined;
        await transport.transfer(transferTo.destination, announce ? { announce, name: transferTo.name } : {});
      } catch (err) {
        // The destination did not take the call: the caller is still with the agent.
        closing = undefined;
        deps.log?.warn({ conversation: conversation.id, err: (err as Error).message }, 'voice session: the transfer failed');
        if (ended) return;
        await recordSaid(TRANSFER_FAILED, 'transfer_failed');
        const mark = await prompt(TRANSFER_FAILED);
        if (mark) await waitPlayed(mark);
        armSilence();
        return;
      }
    } else if (outcome !== 'hung_up') {
      await transport.hangup(outcome).catch((err: Error) => {
        deps.log?.warn({ conversation: conversation.id, err: err.message }, 'voice session: ending the call failed');
      });
    }
    await stop(outcome);
  }

  /** What the destination of an attended transfer hears before it is joined to the caller. */
  async function announcement(name: string | undefined): Promise<Int16Array | undefined> {
    const text = transferAnnouncement(name);
    try {
      return await synthesize8k(deps.tts, text, { language, gender });
    } catch (err) {
      deps.log?.warn({ conversation: conversation.id, err: (err as Error).message }, 'voice session: the transfer announcement could not be synthesized');
      return new Int16Array(RATE / 2); // joined after half a second of silence rather than not at all
    }
  }

  /** Something the call says that the turn runner does not record (the greeting, apologies). */
  async function recordSaid(text: string, kind: string): Promise<void> {
    await messageRepo.insert(deps.db, {
      id: crypto.randomUUID(), conversation_id: conversation.id, room_id: room.id, org_id: conversation.org_id, direction: 'outbound',
      text, source: conversation.channel, status: 'success', data: JSON.stringify({ kind }), at: deps.now(),
    });
  }

  async function stop(outcome: 'no_response' | 'ended_by_agent' | 'transferred' | 'hung_up' | 'failed'): Promise<void> {
    if (ended) return;
    ended = true;
    clearTimeout(silenceTimer);
    transport.background?.(null);
    speaking?.abort.abort();
    await deps.conversations.end(conversation.id, outcome, null);
    resolveDone();
  }

  /** The caller said something (an utterance's text, or keys pressed): the agent answers. */
  async function answer(text: string): Promise<void> {
    if (ended) return;
    noResponse = 0;
    clearTimeout(silenceTimer);
    const at = deps.now();
    const inbound = await deps.db.transaction().execute((tx) => deps.conversations.recordInbound(tx, { room, conversation, opened: false }, { text }, at));
    const abort = new AbortController();
    // One listener per sentence queued (their marks), which a long reply can exceed ten of.
    setMaxListeners(200, abort.signal);
    const current = { sentences: new Map<string, string>(), played: [] as string[], startedAt: performance.now(), abort, cut: false } as NonNullable<typeof speaking>;
    speaking = current;
    let buffer = '';
    let queue: Promise<void> = Promise.resolve();
    const speak = (sentence: string) => {
      queue = queue.then(async () => {
        const mark = await say(sentence, abort.signal).catch(() => undefined);
        if (!mark) return;
        current.sentences.set(mark, sentence);
        void waitPlayed(mark, abort.signal).then((played) => { if (played && !current.cut) current.played.push(sentence); });
      });
    };
    let effects: Array<{ kind: string; destination?: string; name?: string }> = [];
    try {
      const result = await deps.turns.run({
        conversation, room, config, inbound: { id: inbound.id, text, at }, allowAsync: false, replyStatus: 'success', signal: abort.signal,
        onText: (delta) => {
          const split = splitSentences(buffer + delta);
          buffer = split.rest;
          split.sentences.forEach(speak);
        },
        // The last words go to synthesis as the stream ends, not after the reply is recorded.
        onTextEnd: () => {
          if (buffer.trim()) speak(buffer.trim());
          buffer = '';
        },
      });
      if (result.kind === 'reply') {
        current.messageId = result.messageId;
        effects = result.effects;
      }
      if (buffer.trim()) speak(buffer.trim());
      buffer = '';
    } catch (err) {
      if (!abort.signal.aborted) {
        deps.log?.warn({ conversation: conversation.id, err: (err as Error).message }, 'voice session: the turn failed');
        speak('Sorry, I could not answer that. Could you say it again?');
      }
    }
    await queue;
    const marks = [...current.sentences.keys()];
    // Until the reply has been heard to its end, or the caller cut it short (barge-in aborts).
    if (marks.length > 0 && !current.cut) await waitPlayed(marks[marks.length - 1]!, abort.signal);
    if (current.cut && current.messageId) {
      // Only what the caller heard stays in the transcript (and in the model's history).
      await messageRepo.interrupt(deps.db, current.messageId, current.played.join(' ') || '…');
    }
    if (speaking === current) speaking = undefined;
    const end = effects.find((e) => e.kind === 'end');
    const transfer = effects.find((e) => e.kind === 'transfer');
    if (!current.cut && transfer?.destination) await finish('transferred', { destination: transfer.destination, name: transfer.name });
    else if (!current.cut && end) await finish('ended_by_agent');
    else armSilence();
  }

  function bargeIn(): void {
    const current = speaking;
    if (!current || current.cut) return;
    current.cut = true;
    transport.clear();
    current.abort.abort();
  }

  transport.on('audio', (frame) => {
    if (ended) return;
    heardMs += (frame.length / RATE) * 1000;
    for (const ev of vad.push(frame)) {
      if (ev.type === 'speechStart') {
        callerSpeechStart = ev.atMs;
        clearTimeout(silenceTimer);
      } else {
        callerSpeechStart = undefined;
        const pcm = ev.pcm16;
        then(async () => {
          if (ended) return;
          const heard = await deps.stt.transcribe(pcm, RATE, { language, grammar: input.grammar }).catch((err: Error) => {
            deps.log?.warn({ conversation: conversation.id, err: err.message }, 'voice session: recognition failed');
            return { text: '' };
          });
          if (heard.text.trim()) await answer(heard.text.trim());
          else armSilence();
        });
      }
    }
    // Barge-in: the caller has been talking long enough over an agent that has spoken long enough.
    if (callerSpeechStart !== undefined && speaking && !speaking.cut
      && heardMs - callerSpeechStart >= bargeInMs && performance.now() - speaking.startedAt >= minSpeakingMs) bargeIn();
  });
  transport.on('dtmf', (digit) => { then(() => answer(`[DTMF ${digit}]`)); });
  transport.on('ended', () => { void stop(closing ?? 'hung_up'); });

  // Background audio plays from the start, or from the end of the greeting, whenever it has loaded.
  let greeted = false;
  let bedAfterGreeting: AudioBed | undefined;
  void input.background?.then((b) => {
    if (!b || ended) return;
    if (b.afterGreeting && !greeted) bedAfterGreeting = b.bed;
    else transport.background?.(b.bed);
  }, () => {});

  // The start: a pause, digits, then the greeting (synthesized before the call was up when it could be).
  chain = chain.then(async () => {
    const wait = Math.min(num(config.waitOnAnswer, 0), MAX_PAUSE_MS) || (input.waitToGreet ? DEFAULT_WAIT_TO_GREET_SECONDS * 1000 : 0);
    if (wait > 0) transport.play(new Int16Array(Math.round((wait / 1000) * RATE)));
    const dtmf = str(config.postAnswerDtmf).replace(/[^0-9*#A-D]/g, '');
    if (dtmf) await transport.sendDigits(dtmf).catch(() => {});
    if (input.announce?.trim()) {
      await recordSaid(input.announce.trim(), 'recording_notice');
      const notice = await prompt(input.announce.trim());
      if (notice) await waitPlayed(notice);
    }
    const welcome = (input.greeting ?? str(config.welcomeMessage)).trim();
    if (welcome) {
      await recordSaid(welcome, 'welcome');
      let mark: string | undefined;
      if (input.greetingAudio && input.greetingAudio.length > 0) transport.play(input.greetingAudio, mark = `m${++markSeq}`);
      else mark = await prompt(welcome);
      if (mark) await waitPlayed(mark);
    }
    greeted = true;
    if (bedAfterGreeting && !ended) transport.background?.(bedAfterGreeting);
    armSilence();
  }).catch((err: Error) => deps.log?.warn({ conversation: conversation.id, err: err.message }, 'voice session: the start failed'));

  return { done };
}
