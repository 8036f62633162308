// Voice mode (docs/testing-agents.md, "Voice mode"): one scenario iteration as a real call into the
// agent over a loopback SIP leg. The agent's side is the voice module's (TestCallAnswerer, filled by
// the platform with voice/test-calls.ts: an inbound call's answer and the voice session, with the
// run's frozen configuration and the scenario's tool mocks); the caller's side is here
// (sip-caller.ts): the simulated caller's lines (the text runner's caller model) are spoken by the
// configured voice into the call, and what the agent says is heard through the configured
// recogniser, as a person on the phone would hear it. The conversation is on the `test` channel like
// text mode's; what the checks read is observed from what was recorded (the agent's lines as it
// said them, the caller's as the agent heard them), with each turn's latency measured at the caller
// (from the end of its line to the agent's first sound) and the barge-ins (agent replies cut short).
import type { ConversationRow, Db } from '../../db/types.ts';
import type { PortPool } from '../../media/port-pool.ts';
import { resample } from '../../speech/resample.ts';
import type { SpeechToText, SynthesizeOptions, TextToSpeech } from '../../speech/types.ts';
import type { AgentSettings } from '../agents/settings.ts';
import { usageRepo } from '../billing/repository.ts';
import { conversationRepo, messageRepo } from '../conversations/repository.ts';
import type { ConversationService, Opened } from '../conversations/service.ts';
import type { TestTurn } from '../conversations/turn.ts';
import type { ModelsService } from '../models/service.ts';
import { ModelError } from '../../llm/types.ts';
import type { Observation } from './checks.ts';
import { DEFAULT_MAX_TURNS } from './document.ts';
import { callOverLoopback } from './sip-caller.ts';
import { DEFAULT_CALLER_NUMBER, mockAnswer, nextCallerLine, observedTools, type ScenarioOutcome, type ScenarioRun, type ScenarioRunner } from './text-runner.ts';

/** What the agent's side of a test call is given (the voice module answers it). */
export interface TestCallInput {
  opened: Opened;
  /** The run's frozen configuration. */
  config: AgentSettings;
  test: TestTurn;
}

/** The agent's side, listening for the test's one call. */
export interface TestCallLeg {
  host: string;
  port: number;
  /** The user part to call. */
  target: string;
  /** Settles once the agent's voice session has ended (the conversation's end is recorded). */
  ended: Promise<void>;
  close(): Promise<void>;
}

/** Answers a test call into the agent (the voice module's voice/test-calls.ts, handed in by the platform). */
export interface TestCallAnswerer {
  listen(input: TestCallInput): Promise<TestCallLeg>;
}

export interface VoiceRunnerDeps {
  db: Db;
  models: Pick<ModelsService, 'resolve'>;
  conversations: Pick<ConversationService, 'open' | 'end'>;
  answerer: TestCallAnswerer;
  /** The configured recogniser (what the caller hears the agent through) and voice (what it speaks with). */
  stt: SpeechToText;
  tts: TextToSpeech;
  /** RTP ports for the caller's end. */
  ports: PortPool;
  now(): number;
  /** The longest a test call may last (default 5 minutes). */
  maxCallMs?: number;
  /** How long the caller waits for the agent to speak (default 20 s), and the silence that ends its speech (default 900 ms). */
  waitMs?: number;
  quietMs?: number;
}

/** A voice-mode call that went wrong (not answered, a recogniser or voice that failed): the iteration fails saying so. */
export class VoiceTestError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'VoiceTestError';
  }
}

/** The persona's `voice`: a gender word picks a voice of that gender, anything else is the engine's own voice name. */
function voiceOf(voice: string | undefined): Pick<SynthesizeOptions, 'gender' | 'voice'> {
  if (!voice) return {};
  if (/\bfemale\b/i.test(voice)) return { gender: 'female' };
  if (/\bmale\b/i.test(voice)) return { gender: 'male' };
  return { voice };
}

export function voiceRunner(deps: VoiceRunnerDeps): ScenarioRunner {
  const { db } = deps;
  const maxCallMs = deps.maxCallMs ?? 300_000;
  const waitMs = deps.waitMs ?? 20_000;
  const quietMs = deps.quietMs ?? 900;

  return {
    mode: 'voice',

    async run(r: ScenarioRun): Promise<ScenarioOutcome> {
      const { scenario: s, account, config } = r;
      const caller = await deps.models.resolve(account.org_id!, r.settings.callerModel ?? config.agentModel);
      const callerNumber = s.callerNumber ?? DEFAULT_CALLER_NUMBER;
      const language = s.persona.language ?? (config.agentLang === 'multi' ? 'en-US' : config.agentLang);
      const about = s.context || s.variables
        ? { context: s.context ?? null, taskContext: s.variables ? JSON.stringify(s.variables) : null, content: null } : undefined;
      const counterpart = `web:agent-test-${r.runId}-${r.index}-${r.iteration}`;
      const o = await db.transaction().execute((tx) => deps.conversations.open(tx, { agent: account, channel: 'test', direction: 'inbound', counterpart, counterpartKind: 'test', fresh: true }, deps.now()));
      const test: TestTurn = { as: { channel: 'sip', counterpart: callerNumber }, ...(about ? { task: about } : {}), mock: (call, args) => mockAnswer(s, call.name, args) };
      const talk = async (leg: TestCallLeg): Promise<ScenarioOutcome> => {
        const countCaller = async (tokens: number) => {
          if (tokens > 0) await db.transaction().execute((tx) => usageRepo.add(tx, account.org_id!, deps.now(), { testTokens: tokens }));
        };
        /** What the caller heard and said, as it heard it (its model's view of the call). */
        const heardLines: Observation['lines'] = [];
        const latenciesMs: number[] = [];
        const maxTurns = s.maxTurns ?? DEFAULT_MAX_TURNS;
        const callSignal = AbortSignal.any([r.signal, AbortSignal.timeout(maxCallMs)]);
        const call = await callOverLoopback({ host: leg.host, port: leg.port, target: leg.target, from: callerNumber, maxDurationMs: maxCallMs, signal: callSignal, ports: deps.ports, now: () => deps.now() });
        try {
          let from = 0;
          let spokeAt: number | undefined;
          let turns = 0;
          for (let line = 0; ; line++) {
            // What the agent says (its greeting first, then each answer), heard through the recogniser.
            const speech = await call.hear(from, { waitMs, quietMs, signal: callSignal });
            from = call.frames;
            if (speech) {
              if (spokeAt !== undefined) latenciesMs.push(Math.max(0, speech.startedAt - spokeAt));
              const heard = (await deps.stt.transcribe(speech.pcm, 8000, { language, signal: callSignal })).text.trim();
              heardLines.push({ who: 'agent', text: heard || '(inaudible)' });
            }
            if (spokeAt !== undefined) turns++;
            if (call.ended || turns >= maxTurns) break;
            const said = line === 0 && s.persona.opening ? s.persona.opening : await nextCallerLine(caller, s.persona, config, heardLines, callSignal, countCaller);
            if (said === undefined) break;
            heardLines.push({ who: 'caller', text: said });
            const voice = await deps.tts.synthesize(said, { language, ...voiceOf(s.persona.voice), signal: callSignal });
            spokeAt = await call.say(resample(voice.pcm16, voice.sampleRate, 8000), callSignal);
          }
        } finally {
          await call.hangup();
        }
        // The agent's side records the end once its session is over (the hang-up reaches it).
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([leg.ended, new Promise((resolve) => { timer = setTimeout(resolve, 10_000); })]);
        clearTimeout(timer);
        const [messages, found] = await Promise.all([messageRepo.ofConversation(db, o.conversation.id), conversationRepo.find(db, o.conversation.id)]);
        const conversation: ConversationRow = found ?? o.conversation;
        // The checks read what the agent said as it said it, and the caller's lines as the agent heard them.
        const lines: Observation['lines'] = messages
          .filter((m) => (m.direction === 'inbound' || m.direction === 'outbound') && m.text.trim() !== '')
          .map((m) => ({ who: m.direction === 'outbound' ? 'agent' as const : 'caller' as const, text: m.text }));
        const ended = conversation.outcome === 'ended_by_agent' || conversation.outcome === 'transferred';
        const agentTurns = messages.filter((m) => m.direction === 'outbound' && !(m.data && /"kind"/.test(m.data))).length;
        const bargeIns = messages.filter((m) => m.direction === 'outbound' && m.status === 'interrupted').length;
        return {
          conversation,
          observation: { lines, toolCalls: observedTools(messages, s), ended, turns: agentTurns, latenciesMs, voice: { latenciesMs, bargeIns, heard: heardLines } },
          simulatedCaller: caller.engine.simulated,
        };
      };
      let leg: TestCallLeg | undefined;
      try {
        leg = await deps.answerer.listen({ opened: o, config, test });
        return await talk(leg);
      } catch (err) {
        // The conversation ends saying why, when the agent's session did not (the call never came up).
        await deps.conversations.end(o.conversation.id, 'failed', `agent test (voice) stopped: ${err instanceof Error ? err.message.slice(0, 200) : String(err)}`);
        if (r.signal.aborted || err instanceof ModelError) throw err;
        throw new VoiceTestError(`the test call failed: ${err instanceof Error ? err.message : String(err)}`);
      } finally {
        await leg?.close();
      }
    },
  };
}
