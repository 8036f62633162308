// Builds the HTTP application: plugins, auth, error handling and every module's routes, each
// handed the services it uses (built once, by src/platform.ts). It never listens; main.ts (or a
// test) decides that.
import crypto from 'node:crypto';
import Fastify, { type FastifyBaseLogger, type FastifyError } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import cookie from '@fastify/cookie';
import type { Config } from './config.ts';
import type { Database } from './db/index.ts';
import { isDatabaseUnavailable } from './db/errors.ts';
import type { Services } from './platform.ts';
import type { App } from './http/types.ts';
import { consoleCookieName, registerAuth } from './http/auth.ts';
import { registerRateLimits } from './http/rate-limits.ts';
import { sharedRateLimitCounter } from './db/rate-limit-counters.ts';
import { HttpError, Invalid, TooManyRequests } from './http/errors.ts';
import { clientErrorReply, frameworkErrorReply, MAX_PARAM_LENGTH } from './http/error-replies.ts';
import { ErrorBody } from './http/schemas.ts';
import { describeValidationError, findNonFiniteNumber, findNulCharacter, findTooDeep, tooDeepMessage } from './http/validation.ts';
import { ajvFormats } from './http/formats.ts';
import { createMetrics, type Metrics } from './http/metrics.ts';
import { opsRoutes } from './modules/ops/routes.ts';
import { accountRoutes } from './modules/tenancy/routes.ts';
import { tokenRoutes } from './modules/tokens/routes.ts';
import { agentRoutes, agentUrlRoutes } from './modules/agents/routes.ts';
import { agentTestRoutes } from './modules/agent-tests/routes.ts';
import { AgentSettingsSchema } from './modules/agents/validation.ts';
import { memberRoutes } from './modules/members/routes.ts';
import { modelsRoutes } from './modules/models/routes.ts';
import { speechProviderRoutes } from './modules/speech-providers/routes.ts';
import { numberingRoutes } from './modules/numbering-providers/routes.ts';
import { taskRoutes } from './modules/tasks/routes.ts';
import { knowledgeRoutes } from './modules/knowledge/routes.ts';
import websocket from '@fastify/websocket';
import { MAX_STREAM_MESSAGE_BYTES } from './providers/twilio/media-stream.ts';
import { twilioRoutes } from './modules/twilio/routes.ts';
import { browserCallRoutes } from './modules/voice/browser-routes.ts';
import { relayRoutes } from './modules/webhooks/relays/routes.ts';
import { sipRoutes } from './modules/sip/routes.ts';
import { contextRoutes } from './modules/context/routes.ts';
import { complianceRoutes } from './modules/compliance/routes.ts';
import { numbersRoutes } from './modules/phone-numbers/routes.ts';
import { conversationRoutes, stagingChatRoutes } from './modules/conversations/routes.ts';
import { webChatRoutes } from './modules/conversations/web-chat-routes.ts';
import { historyRoutes } from './modules/conversations/history-routes.ts';
import { liveRoutes } from './modules/conversations/live-routes.ts';
import { latencyRoutes } from './modules/voice/latency-routes.ts';
import { voicesRoutes } from './modules/voice/voices-routes.ts';
import { integrationRoutes } from './modules/integrations/routes.ts';
import { subscriptionRoutes } from './modules/webhooks/subscriptions/routes.ts';
import { billingRoutes } from './modules/billing/routes.ts';
import { usageRoutes } from './modules/billing/usage-routes.ts';
import { overviewRoutes } from './modules/overview/routes.ts';
import { billingSystemRoutes } from './modules/billing/billing-system-routes.ts';
import { adrRoutes } from './modules/adr/routes.ts';
import { CONSOLE_CSP, consoleRoutes } from './modules/console/routes.ts';
import { lazySchemas, type LazySchemas } from './http/lazy-schemas.ts';
import { stopWorkerTasks } from './lib/worker-task.ts';

export type { App } from './http/types.ts';

export interface AppDeps {
  config: Config;
  database: Database;
  /** Every service the routes use, built once for the process (src/platform.ts). */
  services: Services;
  /** A pino logger; without one the app logs nothing (tests). */
  logger?: FastifyBaseLogger;
  metrics?: Metrics;
  /** True once the process is stopping: /readyz answers 503 (docs/deploy.md). */
  draining?: () => boolean;
  /** Compilers of the routes' schemas (compiled on first use); given by a test that compiles them all. */
  schemas?: LazySchemas;
}

const SECRET_PARAMS = new Set(['token', 'authtoken']);

/**
 * Request URLs in logs never carry the token. Keys are compared decoded, because the query
 * parser decodes them too: `?tok%65n=…` authenticates exactly like `?token=…`.
 */
export function redactUrl(url: string): string {
  // A relay's ingress id is its credential (providers send no token).
  url = url.replace(/^\/hooks\/relay\/[^/?#]+/, '/hooks/relay/[redacted]');
  const q = url.indexOf('?');
  if (q < 0) return url;
  const params = url.slice(q + 1).split('&').map((pair) => {
    const eq = pair.indexOf('=');
    const rawKey = eq < 0 ? pair : pair.slice(0, eq);
    let key = rawKey;
    try { key = decodeURIComponent(rawKey.replace(/\+/g, ' ')); } catch { /* undecodable: compare as sent */ }
    return SECRET_PARAMS.has(key.trim().toLowerCase()) ? `${rawKey}=[redacted]` : pair;
  });
  return `${url.slice(0, q)}?${params.join('&')}`;
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * The reference page's content policy: the console's (its scripts only from here, no inline script
 * or eval, never framed), with one exception Swagger UI needs: the one inline style it applies,
 * allowed by its hash. A Swagger UI upgrade that changes it shows as a CSP error in the console of
 * the browser (test/console/docs-page.test.ts), with the new hash to put here.
 */
const DOCS_STYLE_HASHES = ["'sha256-RL3ie0nH+Lzz2YNqQN83mnU0J1ot4QL7b99vMdIX99w='"];
const DOCS_CSP = CONSOLE_CSP.replace("style-src 'self'", `style-src 'self' 'unsafe-hashes' ${DOCS_STYLE_HASHES.join(' ')}`);

export async function buildApp(deps: AppDeps): Promise<App> {
  const { config, database } = deps;
  const app = Fastify({
    ...(deps.logger ? { loggerInstance: deps.logger } : { logger: false }),
    bodyLimit: config.bodyLimitBytes,
    // request.ip (rate limits per address) is the client X-Forwarded-For names only when the
    // connection comes from a proxy we were told to trust; otherwise the connection's address.
    trustProxy: config.trustProxy.length > 0 ? [...config.trustProxy] : false,
    // While shutting down, requests already on an open connection are still answered normally
    // (the database closes only after the server); Fastify's own 503 would not be our error shape.
    return503OnClosing: false,
    // false: Fastify would otherwise take the header verbatim; genReqId checks it first, so a
    // client cannot put spaces or markup into our logs and response headers.
    requestIdHeader: false,
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : crypto.randomUUID();
    },
    // Our string formats (src/http/formats.ts), so a route whose schema names one compiles; the
    // serializers' Ajv (which picks an anyOf's form) knows them too, instead of warning each time.
    ajv: { customOptions: { allErrors: false, formats: ajvFormats } },
    serializerOpts: { ajv: { formats: ajvFormats } },
    // Each route's validators and serializers are compiled when the route is first called (src/http/lazy-schemas.ts).
    schemaController: { compilersFactory: (deps.schemas ?? lazySchemas()).compilersFactory },
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: MAX_PARAM_LENGTH },
    // Errors raised before any route or hook runs come in our envelope too (src/http/error-replies.ts).
    frameworkErrors: frameworkErrorReply,
    clientErrorHandler: clientErrorReply,
  }).withTypeProvider<TypeBoxTypeProvider>() as unknown as App;
  // Bodies are JSON (or, where a route says so, a form or a CSV upload): Fastify's built-in
  // text/plain parser would hand a route a string, refused as "body must be an object" (400);
  // without it any other content type is a 415, as docs/api.md promises.
  app.removeContentTypeParser('text/plain');

  app.addSchema(ErrorBody);
  // The agent configuration, which several agent answers name by reference (src/modules/agents/routes.ts).
  app.addSchema(AgentSettingsSchema);
  const metrics = deps.metrics ?? createMetrics();

  await app.register(swagger, {
    openapi: {
      openapi: '3.0.3',
      info: {
        title: 'callplane API',
        version: '2.0.0',
        description: 'Self-hostable control plane for AI phone agents, wire-compatible with Vida API v2. Authenticate with the `token` query parameter.',
      },
      servers: [{ url: config.publicUrl }],
      components: { securitySchemes: { apiKeyAuth: { type: 'apiKey', in: 'query', name: 'token' } } },
    },
    refResolver: { buildLocalReference: (json, _base, _frag, i) => (typeof json.$id === 'string' ? json.$id : `def-${i}`) },
  });
  // The reference page and its assets are public, like the document they render.
  app.addHook('onRoute', (route) => {
    if (route.url.startsWith('/docs')) route.config = { ...(route.config ?? {}), public: true };
  });
  // The reference page shares the console's origin and cookie, so it gets the console's framing and
  // script rules (its page loads only its own scripts: no inline script, no eval). "Try it out"
  // calls the page's own origin: the document it renders names the server relatively ("/"),
  // whatever host name the page was opened on; GET /api/v2/openapi.json keeps CALLPLANE_PUBLIC_URL.
  await app.register(async (docs) => {
    docs.addHook('onSend', async (_req, reply) => {
      void reply.header('content-security-policy', DOCS_CSP);
      void reply.header('x-content-type-options', 'nosniff');
      void reply.header('referrer-policy', 'no-referrer');
      void reply.header('x-frame-options', 'DENY');
      void reply.header('cross-origin-opener-policy', 'same-origin');
    });
    await docs.register(swaggerUi, {
      routePrefix: '/docs',
      uiConfig: { docExpansion: 'list' },
      transformSpecification: (spec) => ({ ...spec, servers: [{ url: '/', description: 'This server (the origin this page was opened on)' }] }),
    });
  });

  // Closing, the server drops the connections idle at that moment; a keep-alive connection whose
  // request was still being answered (an upload being read) turned idle afterwards and held the
  // close, and so SIGTERM, until shutdown was forced at 15 s. Until the server has closed, the
  // connections that have since turned idle are dropped too; uploads still being read in a
  // worker thread are stopped (answered 503) rather than waited for (src/lib/worker-task.ts).
  let closeIdle: NodeJS.Timeout | undefined;
  app.addHook('preClose', (done) => {
    closeIdle = setInterval(() => app.server.closeIdleConnections(), 100).unref();
    stopWorkerTasks();
    done();
  });
  app.addHook('onClose', (_app, done) => {
    clearInterval(closeIdle);
    done();
  });

  app.addHook('onRequest', async (req, reply) => {
    reply.header('x-request-id', req.id);
  });
  app.addHook('onResponse', async (req, reply) => {
    metrics.observeRequest(req.method, req.routeOptions.url ?? 'unknown', reply.statusCode, reply.elapsedTime / 1000);
  });

  app.setErrorHandler((err: FastifyError, req, reply) => {
    if (err instanceof HttpError) {
      if (err instanceof TooManyRequests) void reply.header('retry-after', String(err.retryAfterSeconds));
      return reply.status(err.statusCode).send({ success: false, message: err.message, ...err.extra, requestId: req.id });
    }
    if (err.validation) {
      const message = describeValidationError(err.validation, err.validationContext ?? 'body');
      return reply.status(400).send({ success: false, message, requestId: req.id });
    }
    const status = err.statusCode ?? 500;
    if (status >= 400 && status < 500) {
      return reply.status(status).send({ success: false, message: clientErrorMessage(err), requestId: req.id });
    }
    if (isDatabaseUnavailable(err)) {
      // PostgreSQL stopped, restarting or out of reach: nothing is wrong with the request, and the
      // pool reconnects on its own once the server is back, so the client should try again.
      req.log.warn({ err: { message: err.message, code: (err as { code?: unknown }).code } }, 'database unavailable');
      return reply.status(503).header('retry-after', '2')
        .send({ success: false, message: 'The database is unavailable; try again shortly', requestId: req.id });
    }
    req.log.error({ err }, 'unhandled error');
    return reply.status(500).send({ success: false, message: 'Internal server error', requestId: req.id });
  });

  app.setNotFoundHandler((req, reply) =>
    reply.status(404).send({ success: false, message: `Route ${req.method} ${req.url.split('?')[0]} not found`, requestId: req.id }));

  const limits = await registerRateLimits(app, {
    perToken: config.rateLimitPerToken, perAddress: config.rateLimitPerAddress, windowSeconds: config.rateLimitWindowSeconds,
    shared: sharedRateLimitCounter(database),
  });
  // The address limit before authentication (a flood of bad tokens stops before the token lookup),
  // the token limit after it (keyed by the token's row id).
  if (limits.byAddress) app.addHook('onRequest', limits.byAddress);
  // Cookies are read by the web chat (its visitor) and the web console (its sign-in).
  await app.register(cookie);
  registerAuth(app, database.db, deps.services.tokenLookup, consoleCookieName(config.publicUrl.startsWith('https:')));
  if (limits.byToken) app.addHook('onRequest', limits.byToken);
  // Before schema validation, so no route ever sees a body nested deeper than MAX_JSON_DEPTH
  // (anything recursive, such as JSON.stringify, would overflow the stack on it) or a NUL
  // character (PostgreSQL refuses them).
  app.addHook('preValidation', async (req) => {
    const deep = findTooDeep(req.body);
    if (deep !== undefined) throw new Invalid(tooDeepMessage(deep));
    const field = findNulCharacter(req.params, '') ?? findNulCharacter(req.query, '') ?? findNulCharacter(req.body, 'body');
    if (field !== undefined) throw new Invalid(`${field} must not contain NUL characters`);
  });
  app.addHook('preHandler', async (req) => {
    const field = findNonFiniteNumber(req.params, '') ?? findNonFiniteNumber(req.query, '') ?? findNonFiniteNumber(req.body, 'body');
    if (field !== undefined) throw new Invalid(`${field} must be a finite number`);
  });

  const { services } = deps;
  await app.register(opsRoutes, { database, metrics, vad: services.vad, draining: deps.draining });
  await app.register(tokenRoutes, { tokens: services.tokens });
  await app.register(accountRoutes, { accounts: services.accounts });
  await app.register(memberRoutes, { members: services.members });
  await app.register(numberingRoutes, { numbering: services.numbering });
  await app.register(taskRoutes, { tasks: services.tasks, csvMaxBytes: config.csvMaxBytes });
  // The routes that take WebSockets, in one context with the WebSocket support registered once
  // (two registrations would both answer every upgrade): every path Twilio calls us on
  // (src/modules/twilio/: one plugin, its form parser scoped to it) and the browser's test call.
  await app.register(async (sockets) => {
    // Larger messages close the socket (1009) before anything reads them.
    await sockets.register(websocket, { options: { maxPayload: MAX_STREAM_MESSAGE_BYTES, perMessageDeflate: false } });
    await sockets.register(twilioRoutes, {
      twilioCallbacks: services.twilioCallbacks, twilioVoice: services.twilioVoice, mediaStreams: services.mediaStreams, twilioTexts: services.twilioTexts,
    });
    await sockets.register(browserCallRoutes, { browserCalls: services.browserCalls });
  });
  await app.register(relayRoutes, { relays: services.relays, config });
  await app.register(sipRoutes, { sip: services.sip });
  await app.register(subscriptionRoutes, { subscriptions: services.subscriptions });
  await app.register(contextRoutes, { context: services.context });
  await app.register(complianceRoutes, { compliance: services.compliance });
  await app.register(numbersRoutes, { numbers: services.numbers, sms: services.sms });
  await app.register(integrationRoutes, { integrations: services.integrations });
  await app.register(knowledgeRoutes, { knowledge: services.knowledge });
  await app.register(agentRoutes, { agents: services.agents });
  await app.register(conversationRoutes, { conversations: services.conversations });
  await app.register(stagingChatRoutes, { stagingChat: services.stagingChat });
  await app.register(agentTestRoutes, { agentTests: services.agentTests });
  await app.register(historyRoutes, { history: services.history });
  await app.register(liveRoutes, { live: services.live });
  await app.register(latencyRoutes, { latency: services.latency });
  await app.register(voicesRoutes, { voices: services.voices });
  await app.register(billingRoutes, { billing: services.billing });
  await app.register(usageRoutes, { usage: services.usage });
  await app.register(overviewRoutes, { overview: services.overview });
  await app.register(billingSystemRoutes, { billingSystems: services.billingSystems, processorSubscriptions: services.processorSubscriptions });
  await app.register(adrRoutes, { adr: services.adr });
  await app.register(agentUrlRoutes, { agents: services.agents });
  // The public chat page of each agent URL (/a/<slug>); its cookie is Secure when we are served over https.
  await app.register(webChatRoutes, { webChat: services.webChat, secureCookies: config.publicUrl.startsWith('https:') });
  await app.register(modelsRoutes, { models: services.models });
  await app.register(speechProviderRoutes, { speechProviders: services.speechProviders });
  await app.register(consoleRoutes, {
    tokens: services.tokens, lookup: services.tokenLookup, sessionSeconds: config.consoleSessionSeconds,
    assetsDir: config.consoleDir, secureCookies: config.publicUrl.startsWith('https:'),
  });

  app.get('/api/v2/openapi.json', { config: { public: true }, schema: { hide: true } }, async () => app.swagger());
  return app;
}

function clientErrorMessage(err: FastifyError): string {
  switch (err.code) {
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return 'Request body is not valid JSON';
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return 'Request body length does not match its Content-Length header';
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return 'Request body is empty but Content-Type is application/json';
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return 'Request body is too large';
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return `Unsupported Content-Type; send application/json`;
    default:
      return err.message.startsWith('Unexpected') || err.message.includes('JSON')
        ? 'Request body is not valid JSON'
        : err.message;
  }
}
