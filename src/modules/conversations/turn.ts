// One turn of a conversation: the agent answers what the person just said. Builds the prompt from
// the agent's live configuration (prompt.ts), asks the model chosen for the agent, runs the tools
// it calls that the configuration grants (tools.ts), and records everything: the tool calls, the
// model usage and the reply. Every channel runs its turns here: queued ones (API messages, SMS)
// in a worker (run-turn.ts), spoken and web-chat ones inline.
import crypto from 'node:crypto';
import type { Dispatcher } from 'undici';
import type { ConversationRow, Db, MessageRow, RoomRow } from '../../db/types.ts';
import type { ChatMessage, ToolCall, ToolSpec } from '../../llm/types.ts';
import { deliverOnce, signatureHeaders } from '../../webhooks/deliver.ts';
import type { AgentConfig } from '../agents/validation.ts';
import type { ContextService } from '../context/service.ts';
import type { KnowledgeService } from '../knowledge/service.ts';
import type { ModelsService } from '../models/service.ts';
import { taskRepo } from '../tasks/repository.ts';
import type { TaskService } from '../tasks/service.ts';
import { buildMessages, PROMPT_LIMITS } from './prompt.ts';
import { automationRepo, conversationRepo, messageRepo } from './repository.ts';
import { recordAgentLine } from './service.ts';
import {
  checkArguments, grantedTools, knowledgeBases, transferDestinations, webhookActions,
  type ToolEffect, type ToolOutcome,
} from './tools.ts';

/** Model requests one turn may make (tool rounds included). */
export const MAX_MODEL_CALLS = 5;
/** What a tool's result may hand back to the model. */
export const MAX_TOOL_RESULT_CHARS = 4000;
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

/** The model loop's state saved while an automation request is outstanding (conversation_turns.resume). */
export interface ResumeState {
  messages: ChatMessage[];
  /** The tool call waiting for its answer, and the request it waits on. */
  pending: { callId: string; requestId: string; action: string };
  /** Tool calls of the same round still to run after it. */
  rest: ToolCall[];
  effects: ToolEffect[];
  modelCalls: number;
}

export interface TurnInput {
  conversation: ConversationRow;
  room: RoomRow;
  config: AgentConfig;
  /** What the person just said (already recorded); undefined when the agent speaks first. */
  inbound?: { id: string; text: string; at: number };
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
}

export type TurnResult =
  | { kind: 'reply'; text: string; messageId: string; effects: ToolEffect[]; engine: string; simulated: boolean; model: string }
  | { kind: 'waiting'; resume: ResumeState; expiresAt: number };

const clip = (s: string, max: number) => (s.length > max ? `${s.slice(0, max)}…` : s);

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

  /** Runs one granted tool with checked arguments; a refusal is a result like any other. */
  async function runTool(input: TurnInput, tools: ToolSpec[], call: ToolCall): Promise<ToolOutcome> {
    const { conversation, config } = input;
    const tool = tools.find((t) => t.name === call.name);
    if (!tool) return { refused: true, result: `refused: ${call.name} is not a tool this agent may use` };
    const checked = checkArguments(call, tool);
    if (!checked.ok) return { refused: true, result: `refused: ${checked.message}` };
    const args = checked.args;
    switch (call.name) {
      case 'end_conversation':
        return { result: 'ok: the conversation ends after your reply', effect: { kind: 'end', reason: typeof args.reason === 'string' ? args.reason : 'ended by the agent' } };
      case 'transfer_call': {
        const d = transferDestinations(config).find((x) => x.name === args.destination);
        if (!d) return { refused: true, result: 'refused: unknown destination' };
        return { result: `ok: transferring to ${d.name} after your reply`, effect: { kind: 'transfer', destination: d.destination, name: d.name } };
      }
      case 'send_text': {
        const task = await deps.tasks.createForAgent(conversation.org_id, conversation.account_id, {
          type: 'text', target: conversation.counterpart, message: String(args.message),
        });
        return { result: JSON.stringify({ ok: true, taskId: task.id }) };
      }
      case 'queue_follow_up': {
        const at = new Date(deps.now() + Number(args.delayMinutes) * 60_000).toISOString();
        const task = await deps.tasks.createForAgent(conversation.org_id, conversation.account_id, {
          type: String(args.type), target: conversation.counterpart, scheduledFor: at,
          ...(args.type === 'text' ? { message: String(args.message) } : { context: String(args.message) }),
        });
        return { result: JSON.stringify({ ok: true, taskId: task.id, scheduledAt: at }) };
      }
      case 'search_knowledge': {
        const hits = await deps.knowledge.retrieve(conversation.org_id, knowledgeBases(config), String(args.query), PROMPT_LIMITS.knowledgePassages);
        return { result: hits.length ? JSON.stringify(hits.map((h) => ({ source: h.document, text: clip(h.content, 1000) }))) : 'no passages found' };
      }
      default: {
        const action = webhookActions(config).find((a) => a.name === call.name);
        if (!action) return { refused: true, result: `refused: ${call.name} is not a tool this agent may use` };
        return callWebhookAction(input, action, call, args);
      }
    }
  }

  async function callWebhookAction(input: TurnInput, action: ReturnType<typeof webhookActions>[number], call: ToolCall, args: Record<string, unknown>): Promise<ToolOutcome> {
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
      headers: signatureHeaders(secret, requestId ?? crypto.randomUUID(), now / 1000, body),
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
  async function automationResult(pending: ResumeState['pending'], now: number): Promise<string> {
    const req = await automationRepo.find(db, pending.requestId);
    if (req?.state === 'answered') return clip(req.response ?? 'null', MAX_TOOL_RESULT_CHARS);
    await automationRepo.expire(db, pending.requestId);
    return `no response from ${pending.action} in time (request ${pending.requestId}, checked at ${new Date(now).toISOString()})`;
  }

  return {
    async run(input: TurnInput): Promise<TurnResult> {
      const { conversation, room, config } = input;
      const choice = await deps.models.resolve(conversation.org_id, typeof config.agentModel === 'string' ? config.agentModel : undefined);
      if (conversation.engine !== (choice.engine.simulated ? 'simulated' : 'model') || conversation.model !== choice.model) {
        await conversationRepo.setEngine(db, conversation.id, { engine: choice.engine.simulated ? 'simulated' : 'model', provider: choice.provider, model: choice.model }, deps.now());
      }
      const tools = grantedTools({ config, channel: conversation.channel, counterpart: conversation.counterpart })
        .filter((t) => input.allowAsync || !webhookActions(config).some((a) => a.name === t.name && a.async));
      let messages: ChatMessage[];
      let effects: ToolEffect[] = [];
      let modelCalls = 0;
      let queue: ToolCall[] = [];
      if (input.resume) {
        ({ messages, effects, modelCalls } = input.resume);
        const result = await automationResult(input.resume.pending, deps.now());
        messages.push({ role: 'tool', toolCallId: input.resume.pending.callId, content: result });
        await record(conversation, { direction: 'tool', text: `${input.resume.pending.action}: ${clip(result, 500)}`, status: 'success', data: { name: input.resume.pending.action, requestId: input.resume.pending.requestId, result } });
        queue = input.resume.rest;
      } else {
        const [notes, knowledge, history, task] = await Promise.all([
          conversation.counterpart.startsWith('web:') ? '' : deps.context.forPerson(conversation.org_id, conversation.counterpart.toLowerCase()),
          input.inbound ? deps.knowledge.retrieve(conversation.org_id, knowledgeBases(config), input.inbound.text, PROMPT_LIMITS.knowledgePassages) : [],
          config.noConvoHistory === true ? [] : messageRepo.recentInRoom(db, room.id, input.inbound?.at ?? deps.now() + 1, PROMPT_LIMITS.historyMessages + 1),
          conversation.task_id ? taskRepo.find(db, conversation.org_id, conversation.task_id) : undefined,
        ]);
        messages = buildMessages({
          config, channel: conversation.channel, counterpart: conversation.counterpart, now: deps.now(), notes, knowledge,
          history: history.filter((m) => m.id !== input.inbound?.id), inbound: input.inbound?.text,
          ...(task ? { task: { context: task.context, taskContext: task.task_context, content: task.content } } : {}),
        });
      }
      let text = '';
      for (;;) {
        // Tool calls of the last answer still to run (after a resume, those after the one that waited).
        while (queue.length > 0) {
          const call = queue.shift()!;
          const outcome = await runTool(input, tools, call);
          if (outcome.wait) {
            return {
              kind: 'waiting', expiresAt: outcome.wait.expiresAt,
              resume: { messages, pending: { callId: call.id, requestId: outcome.wait.requestId, action: call.name }, rest: queue, effects, modelCalls },
            };
          }
          if (outcome.effect) effects.push(outcome.effect);
          messages.push({ role: 'tool', toolCallId: call.id, content: outcome.result });
          await record(conversation, {
            direction: 'tool', text: `${call.name}: ${clip(outcome.result, 500)}`, status: outcome.refused ? 'failed' : 'success',
            data: { name: call.name, arguments: clip(call.arguments, 2000), result: clip(outcome.result, 2000), refused: outcome.refused === true },
          });
        }
        if (modelCalls >= MAX_MODEL_CALLS || effects.some((e) => e.kind === 'end' || e.kind === 'transfer') && text !== '') break;
        modelCalls++;
        const result = await choice.engine.chat({ model: choice.model, messages, tools, signal: input.signal, onText: input.onText });
        await conversationRepo.count(db, conversation.id, deps.now(), { calls: 1, tokensIn: result.usage.input, tokensOut: result.usage.output });
        text = result.text.trim();
        if (result.toolCalls.length === 0) break;
        messages.push({ role: 'assistant', content: result.text, toolCalls: result.toolCalls });
        queue = [...result.toolCalls];
      }
      input.onTextEnd?.();
      const reply = text || EMPTY_REPLY;
      const messageId = await recordAgentLine(db, conversation, { text: reply, status: input.replyStatus }, deps.now());
      return { kind: 'reply', text: reply, messageId, effects, engine: choice.provider, simulated: choice.engine.simulated, model: choice.model };
    },
  };
}

export type TurnRunner = ReturnType<typeof turnRunner>;
