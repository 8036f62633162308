// Text mode (docs/testing-agents.md, "Running"): one scenario iteration as a real conversation on
// the `test` channel. The simulated caller is a model following the scenario's persona (the
// organization's model, or the SIMULATED engine offline); it and the agent talk through the same
// turn runner every channel uses, with the configuration the run froze, and every tool with an
// outside effect answered by the scenario's mocks (TestTurn in conversations/turn.ts). What the
// checks read is observed from what was recorded: the lines, the tool messages, the end.
//
// A ScenarioRunner is what a mode implements: voice mode (a real call over a loopback SIP leg) is
// another implementation of the same interface, chosen by the run's mode.
import type { AccountRow, ConversationRow, Db, MessageRow } from '../../db/types.ts';
import { ModelError, type ChatMessage } from '../../llm/types.ts';
import type { AgentSettings } from '../agents/settings.ts';
import { usageRepo } from '../billing/repository.ts';
import {
  analysisMessages, answerSchema, BadAnswer, checkAnswer, factsOf, factsOfConversation, MAX_TRANSCRIPT_MESSAGES, plainSchema, rulesAnalysis,
} from '../conversations/analysis.ts';
import { conversationRepo, historyRepo, messageRepo } from '../conversations/repository.ts';
import type { ConversationService, Opened } from '../conversations/service.ts';
import { INSIDE_TOOLS, type TestTurn, type TurnRunner } from '../conversations/turn.ts';
import type { ModelChoice, ModelsService } from '../models/service.ts';
import type { Observation } from './checks.ts';
import { argsMatch } from './checks.ts';
import type { Scenario, SuiteSettings } from './document.ts';
import { DEFAULT_MAX_TURNS } from './document.ts';

/** The caller's number the agent sees when the scenario names none. */
export const DEFAULT_CALLER_NUMBER = '+15550100000';
/** What the simulated caller answers when it is done. */
export const END_MARK = '[END]';

export interface ScenarioRun {
  runId: string;
  account: AccountRow;
  config: AgentSettings;
  scenario: Scenario;
  /** The scenario's place in the suite and the iteration (they name its conversation). */
  index: number;
  iteration: number;
  settings: SuiteSettings;
  signal: AbortSignal;
}

export interface ScenarioOutcome {
  conversation: ConversationRow;
  observation: Observation;
  /** The simulated caller was the SIMULATED engine (not a model). */
  simulatedCaller: boolean;
}

/** One mode of running a scenario: text here; voice (a SIP leg) is another. */
export interface ScenarioRunner {
  readonly mode: 'text' | 'voice';
  run(r: ScenarioRun): Promise<ScenarioOutcome>;
}

export interface TextRunnerDeps {
  db: Db;
  models: Pick<ModelsService, 'resolve'>;
  conversations: Pick<ConversationService, 'open' | 'recordInbound' | 'recordOutbound' | 'end'>;
  turns: Pick<TurnRunner, 'run'>;
  now(): number;
}

/** Who the simulated caller is: a persona's instructions and language (a scenario's, or a simulated call's). */
export interface CallerPersona {
  instructions: string;
  language?: string;
}

function callerPrompt(p: CallerPersona, config: AgentSettings): string {
  const language = p.language ?? (config.agentLang === 'multi' ? 'en-US' : config.agentLang);
  return [
    'You are playing a caller in a test of an AI phone agent. Stay in your role; never say you are an AI or a test.',
    `## Who you are and what you want\n${p.instructions}`,
    `Speak ${language}. Say one short line at a time, as a person on the phone would, with no stage directions.`,
    `When what you wanted is settled, or the agent has said goodbye, answer exactly ${END_MARK} and nothing else.`,
  ].join('\n\n');
}

/** The caller model's view: the agent's lines are what it hears (user), its own lines what it said (assistant). */
export function callerMessages(p: CallerPersona, config: AgentSettings, lines: Observation['lines']): ChatMessage[] {
  const out: ChatMessage[] = [{ role: 'system', content: callerPrompt(p, config) }];
  if (lines.length === 0 || lines[0]!.who === 'caller') out.push({ role: 'user', content: '(The call has connected. Say your first line.)' });
  for (const l of lines) out.push({ role: l.who === 'agent' ? 'user' : 'assistant', content: l.text });
  return out;
}

/**
 * The simulated caller's next line, or undefined when it is done (it answered END_MARK, or nothing).
 * `count` adds its tokens to usage as the caller's use says (test tokens in a run).
 */
export async function nextCallerLine(
  choice: ModelChoice, persona: CallerPersona, config: AgentSettings, lines: Observation['lines'], signal: AbortSignal, count: (tokens: number) => Promise<void>,
): Promise<string | undefined> {
  const res = await choice.engine.chat({ model: choice.model, messages: callerMessages(persona, config, lines), temperature: 0.3, signal });
  await count(res.usage.input + res.usage.output);
  const text = res.text.trim();
  if (text.includes(END_MARK)) {
    const rest = text.replace(END_MARK, '').trim();
    return rest === '' ? undefined : rest;
  }
  return text === '' ? undefined : text.slice(0, 2000);
}

/** One conversation between the simulated caller and the agent, on a conversation already opened. */
export interface Conversing {
  opened: Opened;
  config: AgentSettings;
  persona: CallerPersona;
  caller: ModelChoice;
  /** The caller's first line as written; else the caller model says it. */
  opening?: string;
  /** The lines already said (the agent's welcome). */
  lines: Observation['lines'];
  maxTurns: number;
  /** The turn's test part: the channel and caller the conversation stands for, the task's context, the mocks. */
  test: TestTurn;
  signal: AbortSignal;
  /** Adds the caller model's tokens to usage. */
  countCaller: (tokens: number) => Promise<void>;
}

export type ConverseDeps = Pick<TextRunnerDeps, 'db' | 'conversations' | 'turns' | 'now'>;

/**
 * The caller and the agent take turns through the turn runner until the agent ends it (end or
 * transfer), the caller is done, or maxTurns agent turns; `lines` grows as they speak. `said` is
 * the caller's last line (undefined when it was done).
 */
export async function converse(deps: ConverseDeps, c: Conversing): Promise<{ turns: number; ended: boolean; said: string | undefined }> {
  const { db } = deps;
  const { opened: o, lines } = c;
  let said: string | undefined = c.opening ?? await nextCallerLine(c.caller, c.persona, c.config, lines, c.signal, c.countCaller);
  let turns = 0;
  while (said !== undefined && turns < c.maxTurns) {
    c.signal.throwIfAborted();
    const text = said;
    const at = deps.now();
    const inbound = await db.transaction().execute((tx) => deps.conversations.recordInbound(tx, o, { text }, at));
    lines.push({ who: 'caller', text });
    const result = await deps.turns.run({
      conversation: o.conversation, room: o.room, config: c.config, inbound: { id: inbound.id, text, at }, allowAsync: false, replyStatus: 'success', signal: c.signal, test: c.test,
    });
    if (result.kind !== 'reply') throw new Error('the agent\'s turn waited for an asynchronous action, which a simulated caller does not offer');
    turns++;
    lines.push({ who: 'agent', text: result.text });
    if (result.effects.some((e) => e.kind === 'end' || e.kind === 'transfer')) return { turns, ended: true, said };
    if (turns >= c.maxTurns) break;
    said = await nextCallerLine(c.caller, c.persona, c.config, lines, c.signal, c.countCaller);
  }
  return { turns, ended: false, said };
}

/** The scenario's answer to a tool call: the first mock naming the tool whose arguments match. */
export function mockAnswer(s: Scenario, name: string, args: Record<string, unknown>): string | undefined {
  const m = (s.toolMocks ?? []).find((x) => x.tool === name && argsMatch(x.args, args));
  if (!m) return undefined;
  return typeof m.result === 'string' ? m.result : JSON.stringify(m.result);
}

/** The tool calls of a conversation as its tool messages recorded them. */
function toolCallsOf(messages: readonly MessageRow[], mocked: ReadonlySet<string>): Observation['toolCalls'] {
  const out: Observation['toolCalls'] = [];
  for (const m of messages) {
    if (m.direction !== 'tool' || !m.data) continue;
    const d = JSON.parse(m.data) as { name?: string; arguments?: string; result?: string };
    if (!d.name) continue;
    let args: Record<string, unknown> | undefined;
    try {
      const parsed = JSON.parse(d.arguments || '{}') as unknown;
      if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) args = parsed as Record<string, unknown>;
    } catch { /* not JSON: undefined */ }
    out.push({ name: d.name, args, result: d.result ?? '', mocked: mocked.has(d.name) });
  }
  return out;
}

/** The tool calls a test conversation recorded, each saying whether the test answered it (mocked) or it ran. */
export function observedTools(messages: readonly MessageRow[], s: Scenario): Observation['toolCalls'] {
  const mockedTools = new Set<string>();
  // Every tool a test answers instead of running is mocked, not just those with a mock.
  for (const m of messages) if (m.direction === 'tool' && m.data) mockedTools.add(String((JSON.parse(m.data) as { name?: string }).name));
  for (const t of INSIDE_TOOLS) mockedTools.delete(t);
  for (const t of s.toolMocks ?? []) mockedTools.add(t.tool);
  return toolCallsOf(messages, mockedTools);
}

export function textRunner(deps: TextRunnerDeps): ScenarioRunner & {
  analyse(c: ConversationRow, config: AgentSettings, signal: AbortSignal): Promise<Observation['analysis']>;
} {
  const { db } = deps;

  async function countTestTokens(orgId: number, tokens: number): Promise<void> {
    if (tokens > 0) await db.transaction().execute((tx) => usageRepo.add(tx, orgId, deps.now(), { testTokens: tokens }));
  }

  return {
    mode: 'text',

    async run(r: ScenarioRun): Promise<ScenarioOutcome> {
      const { scenario: s, account, config } = r;
      const caller = await deps.models.resolve(account.org_id!, r.settings.callerModel ?? config.agentModel);
      const as = { channel: 'sip' as const, counterpart: s.callerNumber ?? DEFAULT_CALLER_NUMBER };
      const about = s.context || s.variables
        ? { context: s.context ?? null, taskContext: s.variables ? JSON.stringify(s.variables) : null, content: null } : undefined;
      const counterpart = `web:agent-test-${r.runId}-${r.index}-${r.iteration}`;
      const welcome = config.welcomeMessage.trim();
      const o = await db.transaction().execute(async (tx) => {
        const opened = await deps.conversations.open(tx, { agent: account, channel: 'test', direction: 'inbound', counterpart, counterpartKind: 'test', fresh: true }, deps.now());
        if (welcome) await deps.conversations.recordOutbound(tx, opened, welcome, deps.now());
        return opened;
      });
      const lines: Observation['lines'] = welcome ? [{ who: 'agent', text: welcome }] : [];
      const maxTurns = s.maxTurns ?? DEFAULT_MAX_TURNS;
      let talked: Awaited<ReturnType<typeof converse>>;
      try {
        talked = await converse(deps, {
          opened: o, config, persona: s.persona, caller, opening: s.persona.opening, lines, maxTurns, signal: r.signal,
          test: { as, ...(about ? { task: about } : {}), mock: (call, args) => mockAnswer(s, call.name, args) },
          countCaller: (tokens) => countTestTokens(account.org_id!, tokens),
        });
      } catch (err) {
        // A model that failed (or the run stopped): the conversation ends here, saying so.
        await deps.conversations.end(o.conversation.id, 'failed', `agent test stopped: ${err instanceof Error ? err.message.slice(0, 200) : String(err)}`);
        throw err;
      }
      const { turns, ended, said } = talked;
      await deps.conversations.end(o.conversation.id, ended ? 'ended_by_agent' : 'completed', ended ? null : `agent test: ${said === undefined ? 'the simulated caller was done' : `turn limit (${maxTurns}) reached`}`);
      const [messages, conversation] = await Promise.all([messageRepo.ofConversation(db, o.conversation.id), conversationRepo.find(db, o.conversation.id)]);
      return {
        conversation: conversation ?? o.conversation,
        observation: { lines, toolCalls: observedTools(messages, s), ended, turns },
        simulatedCaller: caller.engine.simulated,
      };
    },

    /**
     * The analysis of a test conversation, made here (a test conversation is never queued for one):
     * on the SIMULATED engine the rules answer, otherwise the agent's model, as after any conversation.
     */
    async analyse(c: ConversationRow, config: AgentSettings, signal: AbortSignal): Promise<Observation['analysis']> {
      const decided = factsOf(factsOfConversation(c));
      const messages = await historyRepo.transcripts(db, [c.id], MAX_TRANSCRIPT_MESSAGES, false);
      const choice = await deps.models.resolve(c.org_id, config.postConvoForceThinking ? config.agentThinkingModel : config.agentModel);
      if (choice.engine.simulated) {
        const a = rulesAnalysis(messages, config, decided, c.outcome);
        return { outcome: a.outcome, fields: a.fields };
      }
      const schema = { name: 'conversation_analysis', schema: plainSchema(answerSchema(config, false)) };
      const prompt = analysisMessages(c, config, messages, decided);
      for (const structured of [true, false]) {
        try {
          const res = await choice.engine.chat({ model: choice.model, messages: prompt, temperature: 0, signal, ...(structured ? { responseFormat: schema } : {}) });
          await countTestTokens(c.org_id, res.usage.input + res.usage.output);
          const a = checkAnswer(res.text, config);
          return { outcome: decided.outcome ?? a.outcome, fields: a.fields };
        } catch (err) {
          if (structured && err instanceof ModelError && (err.status === 400 || err.status === 422)) continue;
          if (err instanceof BadAnswer) return { error: `the model's analysis was not valid: ${err.message}` };
          throw err;
        }
      }
      return { error: 'the model refused the analysis request' };
    },
  };
}
