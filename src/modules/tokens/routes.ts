// Authorization operations: tokens and one-time auth tokens.
import { Type } from '@sinclair/typebox';
import type { App } from '../../http/types.ts';
import { AccountId, Envelope, errors, Obj, Security } from '../../http/schemas.ts';
import type { TokenService } from './service.ts';

const tags = ['Authorization'];
const Token = Obj({
  token: Type.String({ description: 'The full token when just created; afterwards only its prefix' }),
  description: Type.String(), type: Type.String(), timestamp: Type.String(), userId: Type.Integer(),
});
const TargetAccount = Type.Object({ targetAccountId: Type.Optional(AccountId('Act on this descendant account instead of your own')) });

export async function tokenRoutes(app: App, { tokens }: { tokens: TokenService }): Promise<void> {
  app.get('/api/v2/tokens', {
    schema: { operationId: 'listTokens', tags, security: Security, summary: 'List tokens (prefixes only)',
      querystring: TargetAccount, response: { 200: Envelope({ tokens: Type.Array(Token) }), ...errors(400, 404) } },
  }, async (req) => tokens.list(req.scope, req.query.targetAccountId));

  app.post('/api/v2/tokens', {
    schema: { operationId: 'createToken', tags, security: Security, summary: 'Create a token (shown once)',
      querystring: TargetAccount,
      body: Type.Object({
        type: Type.String({ default: 'admin', description: "Permission; only 'admin' is supported" }),
        description: Type.String({ minLength: 1, maxLength: 200 }),
      }),
      response: { 200: Envelope({ token: Token }), ...errors(400, 404) } },
  }, async (req) => tokens.create(req.scope, req.body, req.query.targetAccountId));

  app.delete('/api/v2/tokens', {
    schema: { operationId: 'deleteToken', tags, security: Security, summary: 'Delete a token; it stops working at once',
      querystring: TargetAccount,
      body: Type.Object({ token: Type.String({ minLength: 1, maxLength: 200, description: 'The full token, or the prefix GET /api/v2/tokens shows' }) }),
      response: { 200: Envelope({}), ...errors(400, 404) } },
  }, async (req) => tokens.remove(req.scope, req.body.token, req.query.targetAccountId));

  // Extensions (docs/console.md, "Sessions"): the web console's sign-ins, which GET /api/v2/tokens
  // does not list, with the token each was made from, and a way to end one.
  const Session = Obj({
    sessionId: Type.Integer(), accountId: Type.Integer(),
    origin: Type.String({ description: "The prefix of the token the session was made from (an API token's, or a one-time token's)" }),
    originType: Type.String({ description: '`admin` (an API token) or `one-time` (a sign-in link)' }),
    createdAt: Type.Integer(), lastUsedAt: Type.Integer({ description: 'Unix seconds, to the minute' }), expiresAt: Type.Integer(),
    current: Type.Boolean({ description: 'The session this request is made with' }),
  });
  app.get('/api/v2/tokens/sessions', {
    schema: { operationId: 'listConsoleSessions', tags, security: Security,
      summary: 'List the web console sessions of an account (extension)',
      description: 'Sessions end with the token they were made from (deleted or expired), when signed out, or with DELETE /api/v2/tokens/sessions/{sessionId}.',
      querystring: TargetAccount, response: { 200: Envelope({ sessions: Type.Array(Session) }), ...errors(400, 404) } },
  }, async (req) => tokens.sessions(req.scope, req.query.targetAccountId));

  app.delete('/api/v2/tokens/sessions/:sessionId', {
    schema: { operationId: 'deleteConsoleSession', tags, security: Security,
      summary: 'End a web console session of an account or of one below it (extension); it stops working at once',
      params: Type.Object({ sessionId: Type.Integer({ minimum: 1, description: 'The sessionId GET /api/v2/tokens/sessions lists' }) }),
      querystring: TargetAccount, response: { 200: Envelope({}), ...errors(400, 404) } },
  }, async (req) => tokens.endSession(req.scope, req.params.sessionId, req.query.targetAccountId));

  app.get('/api/v2/auth/account/oneTimeAuthToken', {
    schema: { operationId: 'oneTimeAuthToken', tags, security: Security,
      summary: 'Generate a single-use token for an account (reseller or partner token); it expires within minutes',
      querystring: Type.Object({
        email: Type.String({ maxLength: 320 }),
        externalAccountId: Type.Optional(Type.String({ maxLength: 500 })),
        customerId: Type.Optional(Type.String({ maxLength: 50, description: 'The account id, instead of externalAccountId' })),
      }),
      response: { 200: Envelope({ authToken: Type.String() }), ...errors(400, 403, 404) } },
  }, async (req) => tokens.oneTime(req.scope, req.query));
}
