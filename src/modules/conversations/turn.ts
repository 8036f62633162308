// One turn of a conversation: the agent answers what the person just said. Builds the prompt from
// the agent's live configuration (prompt.ts), asks the model chosen for the agent, runs the tools
// it calls that the configuration grants (tools.ts), and records everything: the tool calls, the
// model usage and the reply. Every channel runs its turns here: queued ones (API messages, SMS)
// in a worker (run-turn.ts), spoken and web-chat ones inline.
//
// A queued turn may run more than once (the model failed after a tool ran, the worker died): its
// tools' outside effects still happen at most once per tool call. Two things make it so:
//
// - The turn's progress is saved on its queue row (`resume`) before any tool of a model answer
//   runs and after each one: a retry resumes from the saved transcript, with the very tool calls
//   the model gave, instead of asking the model again from the start. A model asked again would
//   give other calls (other ids, other wording: "text them 'see you at 9'" twice, differently),
//   which no key of the call's own could recognise as the same one.
// - Each call with an outside effect (send_text, queue_follow_up, webhook actions) is recorded in
//   tool_effects under the turn and the call's place in it (`<model answer>.<position>`, not the
//   model's call id, which some servers repeat in every answer): started before the effect, its
//   answer after. A call found recorded hands the model the recorded answer. One found started but
//   not answered (the process died in between) is a task made under an Idempotency-Key of that
//   same turn and place, so making it again finds the first; a webhook action is not sent again.
import crypto from 'node:crypto';
import type { Dispatcher } from 'undici';
import { usageRepo } from '../billing/repository.ts';
import { HttpError } from '../../http/errors.ts';
import type { ConversationChannel, ConversationRow, Db, MessageRow, RoomRow } from '../../db/types.ts';
import type { ChatMessage, ToolCall, ToolSpec } from '../../llm/types.ts';
import { deliverOnce, signatureHeaders } from '../../webhooks/deliver.ts';
import type { AgentSettings } from '../agents/settings.ts';
import type { ContextService } from '../context/service.ts';
import type { KnowledgeService } from '../knowledge/service.ts';
import type { ModelsService } from '../models/service.ts';
import { taskRepo } from '../tasks/repository.ts';
import type { TaskService } from '../tasks/service.ts';
import { buildMessages, PROMPT_LIMITS } from './prompt.ts';
import { automationRepo, conversationRepo, messageRepo, toolEffectRepo, turnRepo } from './repository.ts';
import { recordAgentLine } from './service.ts';
import {
  checkArguments, grantedTools, knowledgeBases, transferDestinations, webhookActions,
  type ToolEffect, type ToolOutcome,
} from './tools.ts';

/** Model requests one turn may make (tool rounds included). */
export const MAX_MODEL_CALLS = 5;
/** What a tool's result may hand back to the model. */
export const MAX_TOOL_RESULT_CHARS = 4000;
/**
 * Texts and follow-ups (send_text and queue_follow_up together) the agent may send in one
 * conversation: a caller ID can be spoofed, and the agent texts whoever it names.
 */
export const MAX_TEXTS_PER_CONVERSATION = 3;
const TEXTING_TOOLS = ['send_text', 'queue_follow_up'] as const;
/** Said when the model gives no words at all. */
const EMPTY_REPLY = '…';

export interface TurnDeps {
  db: Db;
  models: Pick<ModelsService, 'resolve'>;
  knowledge: Pick<KnowledgeService, 'retrieve'>;
  context: Pick<ContextService, 'forPerson'>;
  tasks: Pick<TaskService, 'createForAgent'>;
  /** Outbound HTTP for webhook actions (the SSRF-guarded dispatcher). */
  http: Dispatcher;
  /** The organization's message signing secret (whsec_…), created on first use. */
  messageSecret(orgId: number): Promise<string>;
  now(): number;
}

/**
 * The model loop's state saved on a queued turn's row (conversation_turns.resume): while an
 * automation request is outstanding, and as the turn's progress so a retry resumes from it.
 */
export interface ResumeState {
  messages: ChatMessage[];
  /** The tool call waiting for its answer, and the request it waits on. */
  pending?: { callId: string; requestId: string; action: string };
  /** Tool calls of the same model answer still to run (after the pending one, if any). */
  rest: ToolCall[];
  effects: ToolEffect[];
  modelCalls: number;
  /** Which model answer `rest` is of, and the position of its first call in it (the calls' keys). */
  round?: number;
  position?: number;
  /** The words of that answer. */
  text?: string;
}

export interface TurnInput {
  conversation: ConversationRow;
  room: RoomRow;
  config: AgentSettings;
  /**
   * What the person just said; undefined when the agent speaks first. `id`: its message, already
   * recorded (left out of the history); none for a turn asked early (`gate`), recorded at its commit.
   */
  inbound?: { id?: string; text: string; at: number };
  /** The turn's queue id: automation requests name it so an answer wakes the turn. */
  turnId?: string;
  resume?: ResumeState;
  /** Asynchronous actions are offered (queued turns only: a live call cannot wait for them). */
  allowAsync: boolean;
  /** Status of the recorded reply: 'pending' until a channel has delivered it, else 'success'. */
  replyStatus: MessageRow['status'];
  signal?: AbortSignal;
  onText?: (delta: string) => void;
  /** The model has finished: called before the reply is recorded, so a voice call can speak its last words at once. */
  onTextEnd?: () => void;
  /**
   * Awaited before the turn keeps anything in the conversation (a tool's run and its record, the
   * reply): a voice call's turn asked early (Flux's eager end of turn) runs the model while the
   * caller may still be speaking, and goes no further until that turn is committed. It rejects (and
   * `signal` aborts) when the turn is withdrawn.
   */
  gate?: () => Promise<void>;
  /** An agent test's turn (src/modules/agent-tests): tools answered by the scenario's mocks, never run. */
  test?: TestTurn;
}

/**
 * What an agent test's turn changes (docs/testing-agents.md): every tool call with an outside or
 * asking effect (texts, follow-ups, transfers, webhook actions) is answered by `mock` and recorded
 * in tool_effects as `mocked`, never run; end_conversation and search_knowledge (no effect outside
 * the conversation) run as usual unless the scenario mocks them. The prompt and the tools offered
 * are those of the channel and caller the test stands for (`as`), and the task's context comes
 * from the scenario, not a task row.
 */
export interface TestTurn {
  as: { channel: ConversationChannel; counterpart: string };
  task?: { context: string | null; taskContext: string | null; content: string | null };
  /** The scenario's answer to a checked call; undefined: run it as usual (only for tools without an outside effect). */
  mock(call: ToolCall, args: Record<string, unknown>): string | undefined;
}

/** Built-in tools with no effect outside the conversation: a test runs them unless its scenario mocks them. */
export const INSIDE_TOOLS: ReadonlySet<string> = new Set(['end_conversation', 'search_knowledge']);

export type TurnResult =
  | { kind: 'reply'; text: string; messageId: string; effects: ToolEffect[]; engine: string; simulated: boolean; model: string }
  | { kind: 'waiting'; resume: ResumeState; expiresAt: number };

const clip = (s: string, max: number) => (s.length > max ? `${s.slice(0, max)}…` : s);

/** Where a tool call's effect is recorded: its turn, and its place there (`<model answer>.<position>`). */
interface CallKey { turn: string; call: string }

export function turnRunner(deps: TurnDeps) {
  const { db } = deps;

  async function record(conversation: ConversationRow, m: Pick<MessageRow, 'direction' | 'text' | 'status'> & { data?: unknown }): Promise<string> {
    const id = crypto.randomUUID();
    const at = deps.now();
    await messageRepo.insert(db, {
      id, conversation_id: conversation.id, room_id: conversation.room_id, org_id: conversation.org_id,
      direction: m.direction, text: m.text, source: conversation.channel, status: m.status,
      data: m.data === undefined ? null : JSON.stringify(m.data), at,
    });
    return id;
  }

  /**
   * Runs a call with an outside effect at most once per turn and place (`key`): the recorded answer
   * when it ran already; otherwise it is recorded as started (a texting tool only while the
   * conversation is under MAX_TEXTS_PER_CONVERSATION), run with the Idempotency-Key of its place,
   * and its answer recorded. `repeatable`: the effect may be asked for again after a start whose
   * answer was lost (a task made under the key is found, not made twice); otherwise it is not.
   */
  async function once(input: TurnInput, call: ToolCall, key: CallKey, repeatable: boolean, run: (idempotencyKey: string) => Promise<ToolOutcome>): Promise<ToolOutcome> {
    const { conversation } = input;
    const recorded = await toolEffectRepo.find(db, key.turn, key.call);
    if (recorded && recorded.tool !== call.name) {
      return { refused: true, result: `refused: this step of the turn already ran ${recorded.tool}` };
    }
    if (recorded?.outcome) return JSON.parse(recorded.outcome) as ToolOutcome;
    if (recorded && !repeatable) {
      return { result: `${call.name} was already sent once in this turn, which was then interrupted before its answer came back; it is not sent again, and its answer is unknown` };
    }
    if (!recorded) {
      const texting = (TEXTING_TOOLS as readonly string[]).includes(call.name);
      const started = await db.transaction().execute(async (tx) => {
        await toolEffectRepo.lockConversation(tx, conversation.id);
        if (texting && await toolEffectRepo.countOf(tx, conversation.id, TEXTING_TOOLS) >= MAX_TEXTS_PER_CONVERSATION) return false;
        const now = deps.now();
        return await toolEffectRepo.start(tx, {
          turn_key: key.turn, call_key: key.call, org_id: conversation.org_id, conversation_id: conversation.id,
          tool: call.name, tool_call_id: call.id.slice(0, 200), created_at: now,
        }) ? 'started' : 'raced';
      });
      // Another run of the turn (one whose lease had run out) recorded the call meanwhile: as found.
      if (started === 'raced') return once(input, call, key, repeatable, run);
      if (!started) {
        return { refused: true, result: `refused: this conversation has sent ${MAX_TEXTS_PER_CONVERSATION} texts and follow-ups already, the most one conversation may` };
      }
    }
    let outcome: ToolOutcome;
    try {
      outcome = await run(`tool-${crypto.createHash('sha256').update(`${key.turn}\n${key.call}`).digest('hex').slice(0, 40)}`);
    } catch (err) {
      // A task the checks refuse (a limit, the target) is the model's to hear about, not a failed turn.
      if (!(err instanceof HttpError) || err.statusCode >= 500) throw err;
      outcome = { refused: true, result: `refused: ${err.message}` };
    }
    await toolEffectRepo.finish(db, key.turn, key.call, outcome.refused ? 'refused' : 'done', JSON.stringify(outcome), deps.now());
    return outcome;
  }

  /** Texting tools refused to a caller whose number nobody vouched for, when the agent asks for that. */
  function unverifiedCaller(input: TurnInput): ToolOutcome | undefined {
    if (!input.config.requireVerifiedCallerForTexts || input.conversation.caller_verified !== 0) return undefined;
    return { refused: true, result: 'refused: the caller\'s number was not verified (a caller ID can be forged), and this agent texts verified callers only' };
  }

  /** Runs one granted tool with checked arguments; a refusal is a result like any other. */
  async function runTool(input: TurnInput, tools: ToolSpec[], call: ToolCall, key: CallKey): Promise<ToolOutcome> {
    const { conversation, config } = input;
    const tool = tools.find((t) => t.name === call.name);
    if (!tool) return { refused: true, result: `refused: ${call.name} is not a tool this agent may use` };
    const checked = checkArguments(call, tool);
    if (!checked.ok) return { refused: true, result: `refused: ${checked.message}` };
    const args = checked.args;
    if (input.test) {
      const mocked = input.test.mock(call, args);
      if (mocked !== undefined || !INSIDE_TOOLS.has(call.name)) return mockedTool(input, call, key, mocked);
    }
    switch (call.name) {
      case 'end_conversation':
        return { result: 'ok: the conversation ends after your reply', effect: { kind: 'end', reason: typeof args.reason === 'string' ? args.reason : 'ended by the agent' } };
      case 'transfer_call': {
        const d = transferDestinations(config).find((x) => x.name === args.destination);
        if (!d) return { refused: true, result: 'refused: unknown destination' };
        return { result: `ok: transferring to ${d.name} after your reply`, effect: { kind: 'transfer', destination: d.destination, name: d.name } };
      }
      case 'send_text':
        return unverifiedCaller(input) ?? once(input, call, key, true, async (idempotencyKey) => {
          const task = await deps.tasks.createForAgent(conversation.org_id, conversation.account_id, {
            type: 'text', target: conversation.counterpart, message: String(args.message),
          }, idempotencyKey);
          return { result: JSON.stringify({ ok: true, taskId: task.id }) };
        });
      case 'queue_follow_up':
        return unverifiedCaller(input) ?? once(input, call, key, true, async (idempotencyKey) => {
          // Tasks take scheduledFor in unix seconds (docs/api.md).
          const at = Math.ceil((deps.now() + Number(args.delayMinutes) * 60_000) / 1000);
          const task = await deps.tasks.createForAgent(conversation.org_id, conversation.account_id, {
            type: String(args.type), target: conversation.counterpart, scheduledFor: at,
            ...(args.type === 'text' ? { message: String(args.message) } : { context: String(args.message) }),
          }, idempotencyKey);
          return { result: JSON.stringify({ ok: true, taskId: task.id, scheduledAt: new Date(at * 1000).toISOString() }) };
        });
      case 'search_knowledge': {
        const hits = await deps.knowledge.retrieve(conversation.org_id, knowledgeBases(config), String(args.query), PROMPT_LIMITS.knowledgePassages);
        return { result: hits.length ? JSON.stringify(hits.map((h) => ({ source: h.document, text: clip(h.content, 1000) }))) : 'no passages found' };
      }
      default: {
        const action = webhookActions(config).find((a) => a.name === call.name);
        if (!action) return { refused: true, result: `refused: ${call.name} is not a tool this agent may use` };
        return once(input, call, key, false, (idempotencyKey) => callWebhookAction(input, action, call, args, idempotencyKey));
      }
    }
  }

  /**
   * A test's tool call: answered by its mock, or that it was not mocked, and recorded as `mocked`;
   * nothing leaves. A mocked end_conversation or transfer_call still has its effect in the conversation.
   */
  async function mockedTool(input: TurnInput, call: ToolCall, key: CallKey, mocked: string | undefined): Promise<ToolOutcome> {
    const { conversation } = input;
    const outcome: ToolOutcome = mocked !== undefined
      ? { result: clip(mocked, MAX_TOOL_RESULT_CHARS) }
      : { result: `not mocked in this test: ${call.name} has no mock for these arguments in the scenario, and nothing was done` };
    if (mocked !== undefined && call.name === 'end_conversation') outcome.effect = { kind: 'end', reason: 'ended by the agent' };
    if (mocked !== undefined && call.name === 'transfer_call') {
      const destination = (JSON.parse(call.arguments || '{}') as { destination?: unknown }).destination;
      const d = transferDestinations(input.config).find((x) => x.name === destination);
      if (d) outcome.effect = { kind: 'transfer', destination: d.destination, name: d.name };
    }
    const now = deps.now();
    await toolEffectRepo.mocked(db, {
      turn_key: key.turn, call_key: key.call, org_id: conversation.org_id, conversation_id: conversation.id,
      tool: call.name, tool_call_id: call.id.slice(0, 200), outcome: JSON.stringify(outcome), created_at: now,
    });
    return outcome;
  }

  async function callWebhookAction(input: TurnInput, action: ReturnType<typeof webhookActions>[number], call: ToolCall, args: Record<string, unknown>, idempotencyKey: string): Promise<ToolOutcome> {
    const { conversation } = input;
    const now = deps.now();
    const requestId = action.async ? crypto.randomUUID() : undefined;
    const payload = {
      type: 'agent.action', action: action.name, arguments: args,
      ...(requestId ? { requestId, respondBy: new Date(now + action.timeoutSeconds * 1000).toISOString() } : {}),
      conversation: { uuid: conversation.id, roomId: `${conversation.account_id}:${conversation.room_id}`, channel: conversation.channel, counterpart: conversation.counterpart },
    };
    const body = Buffer.from(JSON.stringify(payload));
    const secret = await deps.messageSecret(conversation.org_id);
    const expiresAt = now + action.timeoutSeconds * 1000;
    if (requestId) {
      if (!input.turnId || !input.allowAsync) return { refused: true, result: `refused: ${action.name} answers later, which this channel cannot wait for` };
      await automationRepo.insert(db, {
        id: requestId, org_id: conversation.org_id, turn_id: input.turnId, conversation_id: conversation.id, tool_call_id: call.id,
        action: action.name, state: 'waiting', response: null, created_at: now, expires_at: expiresAt, answered_at: null,
      });
    }
    const res = await deliverOnce({
      url: action.url, body, contentType: 'application/json',
      // The same key for this tool call whatever attempt of the turn sends it (it is sent once; a
      // receiver may still use it to recognise the call).
      headers: { ...signatureHeaders(secret, requestId ?? crypto.randomUUID(), now / 1000, body), 'idempotency-key': idempotencyKey },
      timeoutMs: Math.min(action.timeoutSeconds, 30) * 1000,
      successStatusCodes: Array.from({ length: 100 }, (_, i) => 200 + i),
    }, deps.http, input.signal);
    if (!res.ok) {
      if (requestId) await automationRepo.expire(db, requestId);
      return { result: `the action failed: ${res.error ?? `status ${res.statusCode}`}` };
    }
    if (requestId) return { result: '', wait: { requestId, expiresAt } };
    return { result: clip(res.responseExcerpt ?? '', MAX_TOOL_RESULT_CHARS) || `ok (status ${res.statusCode})` };
  }

  /** The answer to an automation request, or that none came in time. */
  async function automationResult(pending: NonNullable<ResumeState['pending']>, now: number): Promise<string> {
    const req = await automationRepo.find(db, pending.requestId);
    if (req?.state === 'answered') return clip(req.response ?? 'null', MAX_TOOL_RESULT_CHARS);
    await automationRepo.expire(db, pending.requestId);
    return `no response from ${pending.action} in time (request ${pending.requestId}, checked at ${new Date(now).toISOString()})`;
  }

  return {
    /** Warms the engine that will answer this conversation (a call, as it is answered: its first turn then finds the client loaded). */
    async warm(conversation: ConversationRow, config: TurnInput['config']): Promise<void> {
      (await deps.models.resolve(conversation.org_id, config.agentModel)).engine.warm?.();
    },
    async run(input: TurnInput): Promise<TurnResult> {
      const { conversation, room, config } = input;
      const choice = await deps.models.resolve(conversation.org_id, config.agentModel);
      if (conversation.engine !== (choice.engine.simulated ? 'simulated' : 'model') || conversation.model !== choice.model) {
        await conversationRepo.setEngine(db, conversation.id, { engine: choice.engine.simulated ? 'simulated' : 'model', provider: choice.provider, model: choice.model }, deps.now());
      }
      // A test stands for a channel and caller (its conversation is on the `test` channel).
      const as = input.test?.as ?? { channel: conversation.channel, counterpart: conversation.counterpart };
      const tools = grantedTools({ config, channel: as.channel, counterpart: as.counterpart })
        .filter((t) => input.allowAsync || !webhookActions(config).some((a) => a.name === t.name && a.async));
      // A queued turn's calls are recorded under its queue id; an inline one (a call, the web chat)
      // is not run again by anyone, so its own key per run.
      const turnKey = input.turnId ?? `inline:${crypto.randomUUID()}`;
      let messages: ChatMessage[];
      let effects: ToolEffect[] = [];
      let modelCalls = 0;
      let queue: ToolCall[] = [];
      let round = 0;
      let position = 0;
      let text = '';
      /** Saves the loop's state on the turn's row: a retry goes on from here (see the top of this file). */
      const checkpoint = async () => {
        if (!input.turnId) return;
        const state: ResumeState = { messages, rest: queue, effects, modelCalls, round, position, text };
        await turnRepo.setResume(db, input.turnId, JSON.stringify(state), deps.now());
      };
      if (input.resume) {
        ({ messages, effects, modelCalls } = input.resume);
        round = input.resume.round ?? modelCalls;
        position = input.resume.position ?? 0;
        text = input.resume.text ?? '';
        queue = input.resume.rest;
        const pending = input.resume.pending;
        if (pending) {
          const result = await automationResult(pending, deps.now());
          messages.push({ role: 'tool', toolCallId: pending.callId, content: result });
          await record(conversation, { direction: 'tool', text: `${pending.action}: ${clip(result, 500)}`, status: 'success', data: { name: pending.action, requestId: pending.requestId, result } });
          await checkpoint();
        }
      } else {
        const [notes, knowledge, history, task] = await Promise.all([
          conversation.counterpart.startsWith('web:') || input.test ? '' : deps.context.forPerson(conversation.org_id, conversation.counterpart.toLowerCase()),
          input.inbound ? deps.knowledge.retrieve(conversation.org_id, knowledgeBases(config), input.inbound.text, PROMPT_LIMITS.knowledgePassages) : [],
          config.noConvoHistory ? [] : messageRepo.recentInRoom(db, room.id, input.inbound?.at ?? deps.now() + 1, PROMPT_LIMITS.historyMessages + 1),
          conversation.task_id ? taskRepo.find(db, conversation.org_id, conversation.task_id) : undefined,
        ]);
        const about = input.test ? input.test.task : task ? { context: task.context, taskContext: task.task_context, content: task.content } : undefined;
        messages = buildMessages({
          config, channel: as.channel, counterpart: as.counterpart, now: deps.now(), notes, knowledge,
          history: history.filter((m) => m.id !== input.inbound?.id), inbound: input.inbound?.text,
          ...(about ? { task: about } : {}),
        });
      }
      for (;;) {
        // Tool calls of the last answer still to run (after a resume, those after the one that waited).
        while (queue.length > 0) {
          await input.gate?.();
          const call = queue.shift()!;
          const outcome = await runTool(input, tools, call, { turn: turnKey, call: `${round}.${position}` });
          position++;
          if (outcome.wait) {
            return {
              kind: 'waiting', expiresAt: outcome.wait.expiresAt,
              resume: { messages, pending: { callId: call.id, requestId: outcome.wait.requestId, action: call.name }, rest: queue, effects, modelCalls, round, position, text },
            };
          }
          if (outcome.effect) effects.push(outcome.effect);
          messages.push({ role: 'tool', toolCallId: call.id, content: outcome.result });
          await record(conversation, {
            direction: 'tool', text: `${call.name}: ${clip(outcome.result, 500)}`, status: outcome.refused ? 'failed' : 'success',
            data: { name: call.name, arguments: clip(call.arguments, 2000), result: clip(outcome.result, 2000), refused: outcome.refused === true },
          });
          await checkpoint();
        }
        if (modelCalls >= MAX_MODEL_CALLS || effects.some((e) => e.kind === 'end' || e.kind === 'transfer') && text !== '') break;
        modelCalls++;
        const result = await choice.engine.chat({ model: choice.model, messages, tools, signal: input.signal, onText: input.onText });
        const at = deps.now();
        // The conversation's counts and the organization's usage (docs/billing.md) in one transaction.
        await db.transaction().execute(async (tx) => {
          await conversationRepo.count(tx, conversation.id, at, { calls: 1, tokensIn: result.usage.input, tokensOut: result.usage.output });
          // A staging test chat's tokens are test usage (docs/billing.md, "Usage"), not billed.
          const tokens = result.usage.input + result.usage.output;
          await usageRepo.add(tx, conversation.org_id, at, {
            [conversation.channel === 'test' ? 'testTokens' : 'modelTokens']: tokens,
            // The SIMULATED engine's (no model provider): labelled, of the tokens above.
            ...(choice.engine.simulated && conversation.channel !== 'test' ? { simulatedTokens: tokens } : {}),
          });
        });
        text = result.text.trim();
        if (result.toolCalls.length === 0) break;
        messages.push({ role: 'assistant', content: result.text, toolCalls: result.toolCalls });
        queue = [...result.toolCalls];
        round = modelCalls;
        position = 0;
        // Saved before any of these calls runs: a retry runs these very calls, not the model's next idea.
        await checkpoint();
      }
      input.onTextEnd?.();
      await input.gate?.();
      const reply = text || EMPTY_REPLY;
      const messageId = await recordAgentLine(db, conversation, { text: reply, status: input.replyStatus }, deps.now());
      return { kind: 'reply', text: reply, messageId, effects, engine: choice.provider, simulated: choice.engine.simulated, model: choice.model };
    },
  };
}

export type TurnRunner = ReturnType<typeof turnRunner>;
