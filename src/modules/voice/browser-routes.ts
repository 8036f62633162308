// "Talk to this agent" from the browser (browser-calls.ts): the authenticated POST that mints a
// one-call token, and the WebSocket the call runs on. The socket's route is public (a browser
// cannot send the console's header on a WebSocket) and admits only a valid, unused token; it is
// registered where the app's one WebSocket support is (app.ts).
import { Type } from '@sinclair/typebox';
import type { App } from '../../http/types.ts';
import { errors, Security } from '../../http/schemas.ts';
import { BROWSER_RATES } from './browser-transport.ts';
import type { BrowserCalls } from './browser-calls.ts';

export const BROWSER_TALK_PATH = '/api/v2/agent/:agentId/talk';

export async function browserCallRoutes(app: App, { browserCalls }: { browserCalls: BrowserCalls }): Promise<void> {
  app.post(BROWSER_TALK_PATH, {
    schema: {
      operationId: 'startAgentTalk', tags: ['Agents'], security: Security,
      summary: 'callplane extension: a token for one spoken test call with the agent\'s staging configuration, from the browser',
      description: 'Answers a token (valid for 60 s, used once) and the WebSocket path to open with it: GET this same path with ?token=, upgraded. '
        + 'The socket carries PCM16 little-endian mono at sampleRate both ways in binary messages (at most 1 s each) and JSON messages '
        + '(ready, transcript, clear, ended; the browser may send {"type":"hangup"}). One test call per account at a time; the call runs the agent\'s '
        + 'STAGING configuration through the same voice session and call policy as a phone call (no keys, no transfer), and is recorded on the test channel. '
        + '`simulated` says the replies will come from the SIMULATED engine (no model configured). Any token whose subtree holds the agent; 409 while a call of yours runs.',
      params: Type.Object({ agentId: Type.String({ maxLength: 100, description: 'Agent id: camp<accountId>, or the account id' }) }),
      body: Type.Optional(Type.Object({
        sampleRate: Type.Optional(Type.Integer({ description: `The socket's audio rate, Hz: ${BROWSER_RATES.join(' or ')} (default 16000)` })),
      })),
      response: {
        200: Type.Object({
          success: Type.Boolean(), message: Type.String(),
          token: Type.String({ description: 'Opens one call within 60 s' }), path: Type.String({ description: 'The WebSocket path, token included' }),
          expiresAt: Type.Integer({ description: 'Unix seconds' }), sampleRate: Type.Integer(), maxSeconds: Type.Integer({ description: 'The longest call' }),
          engine: Type.String({ description: 'model, or simulated when no model provider is configured' }), model: Type.String(),
          simulated: Type.Boolean({ description: 'The replies are SIMULATED: no model provider is configured' }),
        }),
        ...errors(400, 403, 404, 409),
      },
    },
  }, async (req) => browserCalls.mint(req.scope, req.params.agentId, req.body ?? {}));

  app.get(BROWSER_TALK_PATH, { websocket: true, config: { public: true }, schema: { hide: true } }, (socket, req) => {
    const q = req.query as Record<string, unknown>;
    void browserCalls.accept(socket, q.token, (req.params as { agentId: string }).agentId, req.log);
  });
}
