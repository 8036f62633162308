// The job of an analysis after a conversation (docs/conversations.md, "After the conversation"):
// the facts decide what they can (nobody said a word: no model is asked); on the SIMULATED engine
// the rules answer; otherwise the agent's model is asked for one JSON object of the answer's
// schema (`response_format: json_schema`; a provider that refuses structured outputs is asked
// again without it, and its text parsed as JSON), which is checked, and asked again with the
// reason when it fails the check, up to MAX_INVALID_ANSWERS answers in all.
//
// Exactly once: the validated answer is recorded on the job's row (conversation_analyses.answer)
// before anything is done with it, and the `conversation.analyzed` event is queued in the
// transaction that settles the row. A later attempt (the worker died before the settle, the lease
// ran out) finds the answer and only settles: the model is never asked twice for a conversation
// it has answered. A model that fails (unreachable, 5xx after the client's own retries) is
// retried on the queue's backoff; after the last attempt the analysis is recorded as failed, with
// the reason, and the event says so.
import type { Transaction } from 'kysely';
import type { AnalysisRow, ConversationRow, DB, Db } from '../../db/types.ts';
import { ModelError, type ChatMessage } from '../../llm/types.ts';
import type { HandlerContext, Outcome } from '../../queue/runner.ts';
import { accountRepo } from '../accounts/repository.ts';
import { DEFAULT_SETTINGS, type AgentSettings } from '../agents/settings.ts';
import { usageRepo } from '../billing/repository.ts';
import type { ModelChoice, ModelsService } from '../models/service.ts';
import {
  analysisMessages, answerSchema, BadAnswer, checkAnswer, factsAnswer, factsOf, factsOfConversation, MAX_INVALID_ANSWERS, MAX_TRANSCRIPT_MESSAGES,
  plainSchema, rulesAnalysis, type AnalysisAnswer,
} from './analysis.ts';
import { recordAnalysisEvent } from './events.ts';
import { normalizePhone } from '../../lib/phone.ts';
import { doNotCallRepo } from '../compliance/repository.ts';
import { analysisRepo, conversationRepo, historyRepo } from './repository.ts';
import type { ConversationService } from './service.ts';

export interface AnalysisHandlerDeps {
  db: Db;
  models: Pick<ModelsService, 'resolve'>;
  conversations: Pick<ConversationService, 'liveConfig'>;
  wakeDeliveries: () => void;
  now(): number;
  log?: { warn(obj: object, msg: string): void };
}

type AnalysisOutcome = Outcome<AnalysisRow>;

/** What one run decided: an answer and who gave it, or that the model's answers kept failing the check. */
type Analysed =
  | { kind: 'answer'; answer: AnalysisAnswer; engine: NonNullable<AnalysisRow['engine']>; provider: string | null; model: string | null }
  | { kind: 'invalid'; reason: string };

/** The model's text handed back with the reason it failed the check, at most. */
const MAX_ECHOED_ANSWER_CHARS = 4000;

/**
 * Why the analysis failed, as the organization may read it: an organization's own provider's error
 * in full; a deployment provider's only by its status (its text may name internal addresses).
 */
function why(err: unknown, choice: ModelChoice | undefined): string {
  // Anything but the model (the database away, a fault of ours) is ours to read in the logs, not the organization's.
  if (!(err instanceof ModelError)) return 'an internal error (in the service\'s logs)';
  if (choice?.own) return err.message.slice(0, 1000);
  return `model provider '${err.provider}' failed${err.status !== undefined ? ` with status ${err.status}` : ''}`;
}

export function createAnalysisHandler(deps: AnalysisHandlerDeps) {
  const { db } = deps;

  /** Asks the model until an answer passes the check (or MAX_INVALID_ANSWERS have failed it, over all attempts). */
  async function askModel(row: AnalysisRow, c: ConversationRow, config: AgentSettings, choice: ModelChoice, prompt: ChatMessage[], knownOutcome: string | undefined, signal: AbortSignal): Promise<Analysed> {
    const schema = { name: 'conversation_analysis', schema: plainSchema(answerSchema(config, false)) };
    let structured = true;
    let invalid = row.invalid_answers;
    let messages = prompt;
    for (;;) {
      let r;
      try {
        r = await choice.engine.chat({ model: choice.model, messages, temperature: 0, signal, ...(structured ? { responseFormat: schema } : {}) });
      } catch (err) {
        // A provider without structured outputs refuses the request: ask again for plain JSON.
        if (structured && err instanceof ModelError && (err.status === 400 || err.status === 422)) {
          structured = false;
          continue;
        }
        throw err;
      }
      let answer: AnalysisAnswer | undefined;
      let bad: BadAnswer | undefined;
      try {
        answer = checkAnswer(r.text, config);
      } catch (err) {
        if (!(err instanceof BadAnswer)) throw err;
        bad = err;
      }
      const at = deps.now();
      // The analysis's usage, and the organization's (docs/billing.md, "Usage"), as a turn records its own.
      await db.transaction().execute(async (tx) => {
        await analysisRepo.counted(tx, row.id, { tokensIn: r.usage.input, tokensOut: r.usage.output, invalid: bad !== undefined }, at);
        await usageRepo.add(tx, c.org_id, at, { modelTokens: r.usage.input + r.usage.output });
      });
      if (answer) {
        // A fact outranks the model's reading of it.
        if (knownOutcome) answer.outcome = knownOutcome;
        return { kind: 'answer', answer, engine: 'model', provider: choice.provider, model: choice.model };
      }
      invalid++;
      if (invalid >= MAX_INVALID_ANSWERS) {
        return { kind: 'invalid', reason: `the model's answer failed the check ${invalid} times; the last time: ${bad!.message}`.slice(0, 1000) };
      }
      const echoed = r.text.length > MAX_ECHOED_ANSWER_CHARS ? `${r.text.slice(0, MAX_ECHOED_ANSWER_CHARS)}…` : r.text;
      messages = [...prompt, { role: 'assistant', content: echoed },
        { role: 'user', content: `That answer is not valid (${bad!.message}). Answer again with only one JSON object of the schema.` }];
    }
  }

  async function analyse(row: AnalysisRow, c: ConversationRow, signal: AbortSignal, chosen: { choice?: ModelChoice }): Promise<Analysed> {
    const agent = await accountRepo.findById(db, c.account_id);
    const config = agent ? await deps.conversations.liveConfig(agent) : DEFAULT_SETTINGS;
    const facts = factsOfConversation(c);
    const decided = factsOf(facts);
    if (decided.final) return { kind: 'answer', answer: factsAnswer(decided.outcome!, facts, config), engine: 'facts', provider: null, model: null };
    const messages = await historyRepo.transcripts(db, [c.id], MAX_TRANSCRIPT_MESSAGES, false);
    // The contract's postConvoForceThinking: post-conversation work on the agent's thinking model.
    const named = config.postConvoForceThinking ? config.agentThinkingModel : config.agentModel;
    // Without an agent, the organization's default model (no agent names one).
    const choice = await deps.models.resolve(c.org_id, agent ? named : undefined);
    chosen.choice = choice;
    if (choice.engine.simulated) {
      return { kind: 'answer', answer: rulesAnalysis(messages, config, decided, c.outcome), engine: 'simulated', provider: choice.provider, model: choice.model };
    }
    return askModel(row, c, config, choice, analysisMessages(c, config, messages, decided), decided.outcome, signal);
  }

  /**
   * A spoken (or written) request not to be called again — the outcome `do-not-call`, from the
   * model or the SIMULATED rules — puts the person's number on the organization's list, with this
   * conversation as evidence, in the settle's transaction (a retried settle adds nothing twice).
   */
  async function optOut(tx: Transaction<DB>, c: ConversationRow, written: AnalysisRow): Promise<void> {
    if (written.answer === null || (JSON.parse(written.answer) as AnalysisAnswer).outcome !== 'do-not-call') return;
    const phone = normalizePhone(c.counterpart);
    if (!phone.ok) return;
    await doNotCallRepo.add(tx, [{ owner_id: c.org_id, number: phone.e164, source: 'call-analysis', evidence: c.id, note: null, created_at: deps.now() }]);
  }

  /** Settles the row and, in the same transaction, queues the `conversation.analyzed` event. */
  function settle(c: ConversationRow, state: 'finished' | 'failed', error: string | null): AnalysisOutcome {
    return {
      kind: 'complete', state, set: { last_error: error },
      after: async (tx: Transaction<DB>, written: AnalysisRow) => {
        await optOut(tx, c, written);
        await recordAnalysisEvent(tx, c, written, deps.now());
      },
      settled: deps.wakeDeliveries,
    };
  }

  return async (row: AnalysisRow, ctx: HandlerContext): Promise<AnalysisOutcome> => {
    const c = await conversationRepo.find(db, row.id);
    if (!c) return { kind: 'complete', state: 'canceled', set: { last_error: 'the conversation was deleted' } };
    // Answered by an earlier attempt whose settle never committed: only the settle is left.
    if (row.answer !== null) return settle(c, 'finished', null);
    const chosen: { choice?: ModelChoice } = {};
    let result: Analysed;
    try {
      result = await analyse(row, c, ctx.signal, chosen);
    } catch (err) {
      if (ctx.signal.aborted) throw err;
      const reason = why(err, chosen.choice);
      if (!(err instanceof ModelError)) deps.log?.warn({ conversation: c.id, err }, 'the analysis of a conversation failed');
      // The queue retries it with backoff; the reason is what the row shows meanwhile.
      if (row.attempt < row.max_attempts) throw new Error(reason, { cause: err });
      deps.log?.warn({ conversation: c.id, err: reason }, 'the analysis of a conversation failed for good');
      return settle(c, 'failed', `${reason} (after ${row.attempt} attempts)`);
    }
    if (result.kind === 'invalid') {
      deps.log?.warn({ conversation: c.id, err: result.reason }, 'the analysis of a conversation failed: the model\'s answers were not valid');
      return settle(c, 'failed', result.reason);
    }
    // Recorded before anything is done with it: a retry from here on reuses it.
    await analysisRepo.saveAnswer(db, row.id, { engine: result.engine, provider: result.provider, model: result.model, answer: JSON.stringify(result.answer) }, deps.now());
    return settle(c, 'finished', null);
  };
}
