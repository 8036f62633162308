// GET /api/v2/agent/{agentId}/latency (callplane extension): p50/p95 of each step of an agent's
// spoken turns over a window (docs/api.md, docs/voice.md "Every turn's latency").
import { Type } from '@sinclair/typebox';
import type { App } from '../../http/types.ts';
import { Envelope, errors, Security, Nullable } from '../../http/schemas.ts';
import { LATENCY_MAX_WINDOW_HOURS, type LatencyService } from './latency.ts';

const Step = Type.Object({
  count: Type.Integer({ description: 'Turns that measured this step' }),
  p50: Nullable(Type.Integer({ description: 'ms; null without turns' })),
  p95: Nullable(Type.Integer({ description: 'ms; null without turns' })),
});
const Steps = Type.Object({
  endpointMs: Step, sttMs: Step, llmFirstTokenMs: Step, ttsFirstAudioMs: Step, totalMs: Step,
}, { description: 'Each step of a turn (docs/voice.md): endpoint (end of speech → end of turn), stt (→ transcript), llmFirstToken (→ first model token), ttsFirstAudio (→ first audio out), total (end of speech → first audio; gather: request → our answer)' });

export async function latencyRoutes(app: App, { latency }: { latency: LatencyService }): Promise<void> {
  app.get('/api/v2/agent/:agentId/latency', {
    schema: {
      operationId: 'getAgentLatency', tags: ['Agents'], security: Security,
      summary: 'Latency of an agent\'s spoken turns: p50 and p95 of each step over a window (callplane extension)',
      params: Type.Object({ agentId: Type.String({ maxLength: 100, description: 'Agent id: camp<accountId>, or the account id' }) }),
      querystring: Type.Object({
        windowHours: Type.Optional(Type.Integer({ minimum: 1, maximum: LATENCY_MAX_WINDOW_HOURS, description: 'The last this many hours (default 24)' })),
      }),
      response: {
        200: Envelope({
          agentId: Type.String(), windowHours: Type.Integer(),
          from: Type.String({ description: 'ISO 8601: the window\'s start' }), to: Type.String({ description: 'ISO 8601: now' }),
          turns: Type.Integer({ description: 'Spoken turns in the window (at most 50,000, the newest)' }),
          truncated: Type.Boolean({ description: 'More turns than were read' }),
          steps: Steps,
          paths: Type.Record(Type.String(), Type.Object({ turns: Type.Integer(), steps: Steps }), { description: 'The same per path (sip, stream, gather), for paths with turns' }),
        }),
        ...errors(400, 403, 404),
      },
    },
  }, async (req) => latency.summary(req.scope, req.params.agentId, req.query.windowHours));
}
