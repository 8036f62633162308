// A call task's call on the SIMULATED carrier as a real conversation (docs/tasks.md, "Simulated
// calls"): when the simulated call "answers", a simulated caller (the text runner's, following a
// default persona or the task's context as its persona) talks with the agent through the one turn
// runner, and the conversation is recorded like a call's — transcript, analysis, the live feed —
// on the `simulated` channel, so it is never mistaken for a real call. Tools with an effect outside
// the conversation are never run (answered "SIMULATED call: … not run", recorded as `mocked`).
// Bounded: SIMULATED_CALL_MAX_TURNS agent turns and SIMULATED_CALL_MAX_MS.
//
// The task queue reaches this through its port (TaskHandlerDeps.simulatedCall, tasks/run-task.ts),
// which the platform fills; the simulated carrier runs it in place of the answered call's time.
import type { AccountRow, ConversationRow, Db, TaskRow } from '../../db/types.ts';
import { accountRepo } from '../accounts/repository.ts';
import type { AgentSettings } from '../agents/settings.ts';
import { usageRepo } from '../billing/repository.ts';
import { conversationRepo } from '../conversations/repository.ts';
import { normaliseAddress, type ConversationService } from '../conversations/service.ts';
import { INSIDE_TOOLS, type TurnRunner } from '../conversations/turn.ts';
import type { ModelsService } from '../models/service.ts';
import { converse, type CallerPersona } from './text-runner.ts';

/** The agent's turns a simulated call may take. */
export const SIMULATED_CALL_MAX_TURNS = 6;
/** How long a simulated call's conversation may take. */
export const SIMULATED_CALL_MAX_MS = 120_000;

export const DEFAULT_PERSONA = [
  'You answer your phone: the agent is calling you. You are friendly but busy.',
  'Listen to what the agent wants, answer its questions briefly and plausibly (make up the details a person would know about themselves),',
  'and say goodbye once the agent is done.',
].join(' ');

/** The simulated caller's persona: the task's context (what the call is about) when it has one, else the default. */
export function personaOf(task: Pick<TaskRow, 'context' | 'task_context'>): { persona: CallerPersona; from: 'default' | 'task context' } {
  const about = [task.context?.trim(), task.task_context?.trim()].filter((x): x is string => Boolean(x));
  if (about.length === 0) return { persona: { instructions: DEFAULT_PERSONA }, from: 'default' };
  return {
    persona: {
      instructions: [
        'You are the person this call is for. The agent calling you was told the following about the call (its notes, not your lines):',
        about.join('\n').slice(0, 4000),
        'Answer as that person would, briefly; make up plausible details where needed; say goodbye once it is settled.',
      ].join('\n'),
    },
    from: 'task context',
  };
}

/** What a simulated call's conversation was: it goes into the task's result (`conversation`). */
export interface SimulatedCallSummary {
  conversationId: string;
  roomId: string;
  /** The agent's turns. */
  turns: number;
  outcome: ConversationRow['outcome'];
  /** Whose persona the simulated caller followed. */
  persona: 'default' | 'task context';
  /** The caller was the SIMULATED model engine (no model provider), which echoes the agent. */
  simulatedCaller: boolean;
  note: string;
  /** The conversation stopped on an error (a model that failed): said here, the call still "completed". */
  error?: string;
}

export interface SimulatedCallDeps {
  db: Db;
  models: Pick<ModelsService, 'resolve'>;
  conversations: Pick<ConversationService, 'open' | 'recordInbound' | 'recordOutbound' | 'end' | 'liveConfig'>;
  turns: Pick<TurnRunner, 'run'>;
  now(): number;
  /** Overrides for tests. */
  maxTurns?: number;
  maxMs?: number;
}

export type SimulatedCallTask = Pick<TaskRow, 'id' | 'org_id' | 'account_id' | 'target' | 'context' | 'task_context' | 'content' | 'greeting' | 'wait_to_greet'>;

const NOTE = 'SIMULATED: no real call was placed; a simulated caller answered and talked with the agent';

export function simulatedCalls(deps: SimulatedCallDeps) {
  const { db } = deps;
  const maxTurns = deps.maxTurns ?? SIMULATED_CALL_MAX_TURNS;
  const maxMs = deps.maxMs ?? SIMULATED_CALL_MAX_MS;

  const summary = (c: ConversationRow, turns: number, from: SimulatedCallSummary['persona'], simulatedCaller: boolean, error?: string): SimulatedCallSummary => ({
    conversationId: c.id, roomId: `${c.account_id}:${c.room_id}`, turns, outcome: c.outcome, persona: from, simulatedCaller, note: NOTE, ...(error ? { error } : {}),
  });

  /** Usage of the caller model: model tokens like the agent's (and labelled simulated on the SIMULATED engine). */
  async function countCaller(orgId: number, tokens: number, simulated: boolean): Promise<void> {
    if (tokens <= 0) return;
    await db.transaction().execute((tx) => usageRepo.add(tx, orgId, deps.now(), { modelTokens: tokens, ...(simulated ? { simulatedTokens: tokens } : {}) }));
  }

  return {
    /**
     * Runs the task's simulated call as a conversation and answers what it was. An earlier attempt's
     * conversation (the worker died during it) is ended as failed, and one that ended whole is
     * answered again rather than talked twice.
     */
    async run(task: SimulatedCallTask, signal: AbortSignal): Promise<SimulatedCallSummary> {
      const earlier = await conversationRepo.ofTask(db, task.org_id, task.id);
      const { persona, from } = personaOf(task);
      const whole = earlier.find((c) => c.ended_at !== null && c.outcome !== 'failed');
      if (whole) return summary(whole, whole.messages_in, from, whole.engine === 'simulated', undefined);
      for (const c of earlier) if (c.ended_at === null) await deps.conversations.end(c.id, 'failed', 'SIMULATED call: the worker running it stopped; the task\'s next attempt talks again');
      const agent: AccountRow | undefined = await accountRepo.findById(db, task.account_id);
      if (!agent || agent.org_id !== task.org_id) throw new Error('the task\'s agent is gone');
      const config: AgentSettings = await deps.conversations.liveConfig(agent);
      const caller = await deps.models.resolve(task.org_id, config.agentModel);
      const target = task.target ?? '';
      const { address, kind } = normaliseAddress(target);
      // The agent speaks first unless the task waits for the callee: the task's greeting, else its welcome message.
      const greeting = task.wait_to_greet ? '' : (task.greeting ?? config.welcomeMessage).trim();
      const o = await db.transaction().execute(async (tx) => {
        const opened = await deps.conversations.open(tx, {
          agent, channel: 'simulated', direction: 'outbound', counterpart: address, counterpartKind: kind, taskId: task.id, carrierRef: `sim_call_${task.id}`, fresh: true,
        }, deps.now());
        await conversationRepo.setState(tx, opened.conversation.id, JSON.stringify({
          simulated: { carrier: 'simulated', caller: from === 'default' ? 'the default persona' : 'the task\'s context as its persona', maxTurns, maxSeconds: maxMs / 1000 },
        }), deps.now());
        if (greeting) await deps.conversations.recordOutbound(tx, opened, greeting, deps.now());
        return opened;
      });
      const lines: Array<{ who: 'agent' | 'caller'; text: string }> = greeting ? [{ who: 'agent', text: greeting }] : [];
      const timeUp = AbortSignal.timeout(maxMs);
      const both = AbortSignal.any([signal, timeUp]);
      const ended = async (outcome: NonNullable<ConversationRow['outcome']>, detail: string | null, turns: number, error?: string) => {
        await deps.conversations.end(o.conversation.id, outcome, detail);
        const c = await conversationRepo.find(db, o.conversation.id);
        return summary(c ?? o.conversation, turns, from, caller.engine.simulated, error);
      };
      try {
        const talked = await converse(deps, {
          opened: o, config, persona, caller, lines, maxTurns, signal: both,
          // Nothing leaves a simulated call: every tool with an outside effect is answered, not run.
          test: {
            as: { channel: 'simulated', counterpart: address },
            task: { context: task.context, taskContext: task.task_context, content: task.content },
            mock: (call) => (INSIDE_TOOLS.has(call.name) ? undefined : `SIMULATED call: ${call.name} was not run, and nothing left callplane (a simulated call has no outside effects)`),
          },
          countCaller: (tokens) => countCaller(task.org_id, tokens, caller.engine.simulated),
        });
        const detail = talked.ended ? null
          : `SIMULATED call: ${talked.said === undefined ? 'the simulated caller was done' : `turn limit (${maxTurns}) reached`}`;
        return await ended(talked.ended ? 'ended_by_agent' : 'completed', detail, talked.turns);
      } catch (err) {
        const turns = lines.filter((l) => l.who === 'agent').length - (greeting ? 1 : 0);
        if (signal.aborted) {
          await deps.conversations.end(o.conversation.id, 'failed', 'SIMULATED call: stopped with its task');
          throw err;
        }
        if (timeUp.aborted) return ended('completed', `SIMULATED call: time limit (${maxMs / 1000} s) reached`, turns);
        const message = err instanceof Error ? err.message.slice(0, 300) : String(err);
        return ended('failed', `SIMULATED call: the conversation stopped: ${message}`, turns, message);
      }
    },
  };
}

export type SimulatedCalls = ReturnType<typeof simulatedCalls>;
