// One call's spoken conversation over any voice transport (src/media/voice-transport.ts), as a
// state machine in explicit phases — opening, listening, thinking (the agent's turn runs),
// speaking (a reply or a line plays), transferring, ending, ended. It decides nothing itself: what
// to say and do after each event (heard, silence, key, a failed or slow turn, a finished reply, a
// failed transfer) is the call policy's (call-policy.ts), and the session renders it. Its parts:
// the listener (listener.ts: the caller's audio into turns), the reply player (reply-player.ts:
// the agent's reply spoken sentence by sentence as the model streams it, barge-in), the opening
// (opening.ts: keys, pause, notice, greeting, voicemail screen) and the call's transcript, a port
// (CallTranscript below) the conversations module implements. A listener that knows a turn's end
// early (Flux) gets the reply asked for then and held (reply-player.ts askEarly): the heard turn
// commits it, a resumed one withdraws it. docs/voice.md, "Voice sessions".
import type { ConversationOutcome, ConversationRow, RoomRow } from '../../db/types.ts';
import type { VoiceTransport } from '../../media/voice-transport.ts';
import type { SpeechGrammar, StreamingSpeechToText } from '../../speech/types.ts';
import type { VoiceSettings } from '../agents/voice-settings.ts';
import type { AgentSettings } from '../agents/settings.ts';
import type { TestTurn, TurnRunner } from '../conversations/turn.ts';
import type { TurnLatencies, TurnStamps } from './latency.ts';
import {
  decide, freshCounters, phrasesFor, transferAnnouncement, VOICE_TURN_TIMEOUT_MS,
  type AgentLine, type CallDecision, type CallEvent, type PathCapabilities,
} from './call-policy.ts';
import { utteranceListener, type HeardTurn, type ListenerDeps, type UtteranceListenerOptions } from './listener.ts';
import { prepareOpening, type OpeningInput } from './opening.ts';
import type { SpeechChange } from './call-state.ts';
import { streamingListener } from './streaming-listener.ts';
import { answerTurn, askEarly, CallVoice, type EarlyTurn, type PlayedReply, type ReplyHandle, type ReplyRecord, type ReplyTurns } from './reply-player.ts';
import { callSpeaker, type CallSpeaker, type SpeakerDeps } from './speaker.ts';

type Ending = Extract<ConversationOutcome, 'no_response' | 'ended_by_agent' | 'transferred' | 'hung_up' | 'failed' | 'voicemail'>;

/** What a call records as it goes (implemented by the conversations module: ConversationService.callTranscript). */
export interface CallTranscript extends ReplyRecord {
  /** A line the call itself says (not the model's: those the turn records). */
  said(line: AgentLine, at: number): Promise<void>;
  /** The call is over (the first outcome stands). */
  end(outcome: Ending, detail: string | null): Promise<void>;
}

export interface VoiceSessionDeps extends ListenerDeps, SpeakerDeps {
  turns: Pick<TurnRunner, 'run'> & Partial<Pick<TurnRunner, 'warm'>>;
  log?: { warn(obj: object, msg: string): void };
  /** The call policy's turn limit (VOICE_TURN_TIMEOUT_MS); tests shorten it. */
  turnTimeoutMs?: number;
  /** Where each turn's latency goes (latency.ts); without it, nowhere. */
  latency?: Pick<TurnLatencies, 'record'>;
}

export interface VoiceSessionInput extends OpeningInput {
  transport: VoiceTransport;
  /** Where what is said and how the call ends are recorded. */
  transcript: CallTranscript;
  conversation: ConversationRow;
  room: RoomRow;
  /** The agent's live configuration, for its turns (the prompt, the tools). */
  config: AgentSettings;
  /** The same configuration read for the call (agents/voice-settings.ts): everything the session itself uses. */
  settings: VoiceSettings;
  /** What the path carrying the call can do (call-policy.ts CAPABILITIES). */
  capabilities: PathCapabilities;
  /** Recognition restricted to these (menus, tests); free speech otherwise. */
  grammar?: SpeechGrammar;
  /** The call's voice (speaker.ts), when the call's start chose it already; else the session chooses it from `settings`. */
  speaker?: CallSpeaker;
  /**
   * The streaming recogniser that hears the caller (the agent's agentSttEngine, when the process
   * has it: streaming-listener.ts); without it, our VAD and the batch recogniser (listener.ts).
   */
  streaming?: { engine: StreamingSpeechToText; onChange: (change: SpeechChange) => void };
  /** An agent test's call (voice mode, src/modules/agent-tests): its turns' tools answered by the scenario's mocks. */
  test?: TestTurn;
}

export type VoicePhase = 'opening' | 'listening' | 'thinking' | 'speaking' | 'transferring' | 'ending' | 'ended';

export interface VoiceSession {
  /** Resolves when the call has ended and everything is recorded. */
  readonly done: Promise<void>;
  /** Where the call is now. */
  readonly phase: VoicePhase;
  /** The reply being spoken, if any. */
  readonly reply: ReplyHandle | undefined;
  /**
   * Ends the call politely because the process is stopping: the reply being spoken (or thought)
   * is cut, the agent says its closing line (Phrases.shutdownGoodbye) and hangs up, `ended_by_agent`.
   * Resolves when the call has ended.
   */
  wrapUp(): Promise<void>;
}

export function startVoiceSession(deps: VoiceSessionDeps, input: VoiceSessionInput): VoiceSession {
  const { transport, transcript, conversation, room, config, settings, capabilities } = input;
  const { language } = settings;
  transport.setMaxListeners(200);
  const path = transport.kind === 'twilio-media-stream' ? 'stream' as const : 'sip' as const;

  let phase: VoicePhase = 'opening';
  let counters = freshCounters();
  /** The outcome our own hang-up or transfer is ending the call with (the transport's `ended` follows it). */
  let closing: { outcome: Ending; detail: string | null } | undefined;
  let silenceTimer: NodeJS.Timeout | undefined;
  let reply: PlayedReply | undefined;
  let chain: Promise<void> = Promise.resolve();
  let resolveDone!: () => void;
  const done = new Promise<void>((r) => { resolveDone = r; });
  const ended = () => phase === 'ended';
  const warn = (err: unknown, msg: string) => deps.log?.warn({ conversation: conversation.id, err: err instanceof Error ? err.message : String(err) }, msg);
  /** Runs `step` after everything before it; a step that fails is logged and does not break the chain. */
  const enqueue = (step: () => Promise<void>) => {
    chain = chain.then(step).catch((err: unknown) => warn(err, 'voice session: a step failed'));
  };
  const speaker = input.speaker ?? callSpeaker(deps, settings, deps.now);
  const voice = new CallVoice(transport, (text, signal, line) => speaker.audio(text, { signal, line }), ended, speaker);
  /** The engines that heard the turn being answered (a streamed turn, or the batch recogniser's after a fall back). */
  let heardBy: HeardTurn['engines'] | undefined;
  /** The reply asked early on a tentative turn (Flux's eager end), held until the turn is heard or withdrawn. */
  let early: EarlyTurn | undefined;
  const withdrawEarly = () => {
    early?.withdraw();
    early = undefined;
  };
  const speaking = () => { if (phase === 'thinking') phase = 'speaking'; };
  const listenerOptions: UtteranceListenerOptions = {
    language, grammar: input.grammar, speakingTimeoutMs: settings.speakingTimeoutMs, inTurn: enqueue, warn,
    onFallback: (reason) => deps.log?.warn({ conversation: conversation.id, reason }, 'voice session: the Silero VAD fell back to the energy detector for this call'),
    to: {
      speechStart: () => { if (phase === 'listening') clearTimeout(silenceTimer); },
      // Only while listening: the reply is asked for now and held; the turn heard commits it (answer below).
      tentative: (turn) => {
        withdrawEarly();
        if (phase === 'listening') early = askEarly(replies, turn.text, speaking);
      },
      withdrawn: withdrawEarly,
      heard: (turn) => {
        heardBy = turn.engines;
        return onEvent({ kind: 'heard', text: turn.text }, { ...turn.stamps });
      },
      unheard: () => {
        withdrawEarly();
        if (phase === 'listening') listen();
      },
    },
  };
  const listener = input.streaming
    ? streamingListener(deps, { ...listenerOptions, engine: input.streaming.engine, onChange: input.streaming.onChange })
    : utteranceListener(deps, listenerOptions);

  const replies: ReplyTurns = {
    voice, turns: deps.turns, record: transcript, conversation, room, config, limitMs: deps.turnTimeoutMs ?? VOICE_TURN_TIMEOUT_MS, now: deps.now, warn,
    latency: deps.latency, labels: () => ({ path, ...(heardBy ?? listener.engines), tts: speaker.name }),
    ...(input.test ? { test: input.test } : {}),
  };

  /** A line the call says (not the model's): recorded, then spoken to its end. */
  async function sayLine(line: AgentLine, audio?: Int16Array): Promise<void> {
    if (ended()) return;
    if (phase === 'listening' || phase === 'thinking') phase = 'speaking';
    clearTimeout(silenceTimer);
    await transcript.said(line, deps.now());
    let mark: string | undefined;
    try {
      mark = audio && audio.length > 0 ? voice.play(audio) : await voice.say(line.text);
    } catch (err) {
      // Recorded but not heard: the call goes on (the policy's next step still runs).
      warn(err, `voice session: "${line.kind}" could not be synthesized`);
    }
    if (mark) await voice.heard(mark);
  }

  function listen(): void {
    clearTimeout(silenceTimer);
    if (ended()) return;
    phase = 'listening';
    silenceTimer = setTimeout(() => enqueue(() => onEvent({ kind: 'silence' })), settings.callerResponseTimeoutMs);
  }

  /** Asks the policy what follows `event` (`stamps`: a heard turn's latency so far), and does it. */
  async function onEvent(event: CallEvent, stamps?: TurnStamps): Promise<void> {
    if (ended()) return;
    // A silence timer that fired while the caller started speaking, or a reply began, is stale.
    if (event.kind === 'silence' && phase !== 'listening') return;
    const next = decide(settings, counters, event, capabilities);
    counters = next.counters;
    await render(next.decision, stamps);
  }

  /** Renders one decision of the policy as audio and signalling. */
  async function render(decision: CallDecision, stamps: TurnStamps | undefined): Promise<void> {
    if (ended()) return;
    switch (decision.next) {
      case 'answer':
        return answer(decision.text, stamps);
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
      // Attended (attendedTransfers): the destination hears who is coming before it is joined (after
      // half a second of silence when that cannot be synthesized, rather than not at all).
      const announce = attended ? await voice.synthesize(transferAnnouncement(language, name)).catch((err: unknown) => {
        warn(err, 'voice session: the transfer announcement could not be synthesized');
        return new Int16Array(4000);
      }) : undefined;
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

  async function stop(outcome: Ending, detail: string | null): Promise<void> {
    if (ended()) return;
    phase = 'ended';
    clearTimeout(silenceTimer);
    listener.stop();
    withdrawEarly();
    transport.background?.(null);
    reply?.handle.abort.abort();
    await transcript.end(outcome, detail);
    resolveDone();
  }

  /** The agent's reply to what the caller said (reply-player.ts), then the policy's decision on how it went. */
  async function answer(text: string, stamps: TurnStamps | undefined): Promise<void> {
    if (ended()) return;
    phase = 'thinking';
    clearTimeout(silenceTimer);
    // A reply asked early for these very words plays at once; one for other words is dropped.
    const asked = early;
    early = undefined;
    if (asked && asked.text !== text) asked.withdraw();
    const playing = (r: PlayedReply) => { reply = r; };
    const event = asked?.text === text ? await asked.commit(stamps, playing) : await answerTurn(replies, text, stamps, playing, speaking);
    reply = undefined;
    if (phase === 'thinking' || phase === 'speaking') phase = 'listening';
    await onEvent(event);
  }

  // The model's client loads while the greeting plays, not in the first turn.
  deps.turns.warm?.(conversation, config).catch((err: unknown) => warn(err, 'voice session: warming the model engine failed'));

  transport.on('audio', (frame) => {
    if (ended()) return;
    listener.hear(frame);
    if (capabilities.bargeIn) reply?.bargeIn(listener.speakingMs(), settings);
  });
  transport.on('dtmf', (digit) => { if (capabilities.keys) enqueue(() => onEvent({ kind: 'key', digit })); });
  transport.on('ended', () => { void stop(closing?.outcome ?? 'hung_up', closing?.detail ?? null); });

  const opening = prepareOpening({
    transport, ended, warn, say: sayLine, hangup,
    ending: () => { phase = 'ending'; },
  }, { ...input, background: capabilities.backgroundAudio ? input.background : undefined });
  enqueue(async () => { if (await opening.run()) listen(); });

  return {
    done,
    get phase() { return phase; },
    get reply() { return reply?.handle; },
    wrapUp() {
      if (ended()) return done;
      withdrawEarly();
      reply?.handle.abort.abort();
      enqueue(() => render({
        next: 'hangup', say: { text: phrasesFor(language).shutdownGoodbye, kind: 'shutdown' },
        outcome: 'ended_by_agent', detail: 'the process carrying the call stopped (CALLPLANE_DRAIN_SECONDS passed)',
      }, undefined));
      return done;
    },
  };
}
