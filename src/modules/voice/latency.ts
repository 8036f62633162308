// Every spoken turn's latency (docs/voice.md, "Every turn's latency"): recorded with the reply
// (turn_latencies, migration 0031), observed in the Prometheus histograms at /metrics, logged with
// its breakdown when slower than the budget (CALLPLANE_TURN_LATENCY_BUDGET_MS), shown beside each
// agent line of a transcript, and summarised per agent (GET /api/v2/agent/{agentId}/latency).
import type { ConversationRow, Db, TurnLatencyRow } from '../../db/types.ts';
import type { Scope } from '../../http/auth.ts';
import { Invalid, NotFound } from '../../http/errors.ts';
import type { VoiceTurnLabels, VoiceTurnSteps } from '../../http/metrics.ts';
import { accountIdOf, agentIdOf } from '../agents/service.ts';
import { latencyRepo } from '../conversations/repository.ts';

export type VoicePath = 'sip' | 'stream' | 'gather';

/** What a path measured of one turn: wall-clock stamps (ms), each undefined when it cannot see it. */
export interface TurnStamps {
  /** The caller stopped speaking (the VAD's last voiced frame). */
  speechEndedAt?: number;
  /** The VAD ended the turn (speakingTimeout of silence later). */
  turnEndedAt?: number;
  /** The transcript was ready (gather: Twilio's request arrived with it). */
  transcriptAt?: number;
  /** The model's first token. */
  firstTokenAt?: number;
  /** The first audio of the reply went out (gather: never ours). */
  firstAudioAt?: number;
  /** Gather: our answer (the TwiML with the reply) was ready. */
  answeredAt?: number;
}

export interface TurnLatency extends VoiceTurnSteps {
  path: VoicePath;
}

const span = (from: number | undefined, to: number | undefined) => (from === undefined || to === undefined ? null : Math.max(0, Math.round(to - from)));

/** The steps of a turn from its stamps. Total: end of speech to first audio (gather: the request to our answer). */
export function turnSteps(path: VoicePath, t: TurnStamps): VoiceTurnSteps {
  if (path === 'gather') {
    return {
      endpointMs: null, sttMs: null, ttsFirstAudioMs: null,
      llmFirstTokenMs: span(t.transcriptAt, t.firstTokenAt),
      totalMs: span(t.transcriptAt, t.answeredAt),
    };
  }
  return {
    endpointMs: span(t.speechEndedAt, t.turnEndedAt),
    sttMs: span(t.turnEndedAt, t.transcriptAt),
    llmFirstTokenMs: span(t.transcriptAt, t.firstTokenAt),
    ttsFirstAudioMs: span(t.firstTokenAt, t.firstAudioAt),
    totalMs: span(t.speechEndedAt, t.firstAudioAt),
  };
}

export interface TurnLatencyDeps {
  db: Db;
  metrics?: { observeVoiceTurn(labels: VoiceTurnLabels, steps: VoiceTurnSteps): void };
  /** A turn slower than this from its end (the VAD's decision; gather: the request) to its first audio is logged with its breakdown, ms. */
  budgetMs: number;
  log?: { warn(obj: object, msg: string): void };
  now(): number;
}

/** Records spoken turns' latencies (built once per process; the voice paths share it). */
export function turnLatencies(deps: TurnLatencyDeps) {
  return {
    /** Records one turn whose reply is `messageId`; never throws (a failure is logged). */
    async record(conversation: ConversationRow, messageId: string, labels: VoiceTurnLabels & { path: VoicePath }, stamps: TurnStamps): Promise<VoiceTurnSteps> {
      const steps = turnSteps(labels.path, stamps);
      deps.metrics?.observeVoiceTurn(labels, steps);
      // Against the budget: what the turn took once it had ended (the agent's own speakingTimeout is not slowness).
      const responseMs = steps.totalMs === null ? null : steps.totalMs - (steps.endpointMs ?? 0);
      if (responseMs !== null && responseMs > deps.budgetMs) {
        deps.log?.warn({ conversation: conversation.id, message: messageId, path: labels.path, budgetMs: deps.budgetMs, responseMs, ...steps, engines: { vad: labels.vad, stt: labels.stt, llm: labels.llm, tts: labels.tts } },
          'voice turn: slower than the latency budget');
      }
      try {
        await latencyRepo.insert(deps.db, {
          message_id: messageId, org_id: conversation.org_id, account_id: conversation.account_id, conversation_id: conversation.id,
          path: labels.path, stt_engine: labels.stt, llm_engine: labels.llm, tts_engine: labels.tts, at: deps.now(),
          endpoint_ms: steps.endpointMs, stt_ms: steps.sttMs, llm_first_token_ms: steps.llmFirstTokenMs,
          tts_first_audio_ms: steps.ttsFirstAudioMs, total_ms: steps.totalMs,
        });
      } catch (err) {
        deps.log?.warn({ conversation: conversation.id, err: (err as Error).message }, 'voice turn: its latency could not be recorded');
      }
      return steps;
    },
  };
}

export type TurnLatencies = ReturnType<typeof turnLatencies>;

/** The longest window a summary reads, and the most turns it reads (the newest). */
export const LATENCY_MAX_WINDOW_HOURS = 24 * 90;
export const LATENCY_MAX_TURNS = 50_000;

/** The p-th percentile (nearest rank) of sorted values. */
function percentile(sorted: number[], p: number): number | null {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

const STEP_COLUMNS = {
  endpointMs: 'endpoint_ms', sttMs: 'stt_ms', llmFirstTokenMs: 'llm_first_token_ms', ttsFirstAudioMs: 'tts_first_audio_ms', totalMs: 'total_ms',
} as const;

function summarise(rows: TurnLatencyRow[]) {
  const out: Record<string, { count: number; p50: number | null; p95: number | null }> = {};
  for (const [key, column] of Object.entries(STEP_COLUMNS)) {
    const values = rows.map((r) => r[column]).filter((v): v is number => v !== null).map(Number).sort((a, b) => a - b);
    out[key] = { count: values.length, p50: percentile(values, 50), p95: percentile(values, 95) };
  }
  return out;
}

export function latencyService(deps: { db: Db; now?: () => number }) {
  const clock = deps.now ?? Date.now;
  return {
    /** GET /api/v2/agent/{agentId}/latency: p50/p95 of each step of the agent's spoken turns over the last windowHours, overall and per path. */
    async summary(scope: Scope, agentId: string, windowHours: number | undefined) {
      const hours = windowHours ?? 24;
      if (!Number.isInteger(hours) || hours < 1 || hours > LATENCY_MAX_WINDOW_HOURS) throw new Invalid(`windowHours must be an integer from 1 to ${LATENCY_MAX_WINDOW_HOURS}`);
      const id = accountIdOf(agentId);
      if (id === undefined) throw new NotFound(`agentId ${agentId} was not found`);
      let agent;
      try {
        agent = await scope.account(id, ['agent'], 'agentId');
      } catch (err) {
        if (err instanceof NotFound) throw new NotFound(`agentId ${agentId} was not found`);
        throw err;
      }
      const now = clock();
      const from = now - hours * 3_600_000;
      const rows = await latencyRepo.ofAgent(deps.db, agent.id, from, LATENCY_MAX_TURNS);
      const paths: Record<string, { turns: number; steps: ReturnType<typeof summarise> }> = {};
      for (const path of ['sip', 'stream', 'gather'] as const) {
        const of = rows.filter((r) => r.path === path);
        if (of.length > 0) paths[path] = { turns: of.length, steps: summarise(of) };
      }
      return {
        success: true,
        agentId: agentIdOf(agent.id),
        windowHours: hours,
        from: new Date(from).toISOString(),
        to: new Date(now).toISOString(),
        turns: rows.length,
        truncated: rows.length >= LATENCY_MAX_TURNS,
        steps: summarise(rows),
        paths,
      };
    },
  };
}

export type LatencyService = ReturnType<typeof latencyService>;
