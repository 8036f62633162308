// The web console (docs/console.md): its built pages, served at /console/ from dist/console, and
// its sign-in. Signing in trades a token (an API token, or a one-time token from a reseller's link)
// for a console session token in an HttpOnly, SameSite=Strict cookie, so the page's script never
// holds a long-lived token; the session counts only on requests that carry CONSOLE_HEADER.
import fs from 'node:fs';
import { Type } from '@sinclair/typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { App } from '../../http/types.ts';
import { authenticate, CONSOLE_HEADER, consoleCookieName, identify, KIND_LABEL, type TokenLookup } from '../../http/auth.ts';
import { Envelope, errors } from '../../http/schemas.ts';
import type { TokenService } from '../tokens/service.ts';

/**
 * What the console's pages may load: only their own scripts and styles, from here; no frames,
 * no plugins, no other origin to talk to. Audio may also come over https: a voice's sample is
 * hosted by its provider (GET /api/v2/voices, previewUrl), fetched only when played.
 */
export const CONSOLE_CSP = [
  "default-src 'self'", "script-src 'self'", "style-src 'self'", "img-src 'self' data: blob:", "media-src 'self' blob: https:",
  "connect-src 'self'", "font-src 'self'", "object-src 'none'", "base-uri 'none'", "form-action 'self'", "frame-ancestors 'none'",
].join('; ');

const Who = Type.Object({
  id: Type.Integer(), kind: Type.String(), label: Type.String(), name: Type.String(),
});

export interface ConsoleDeps {
  tokens: TokenService;
  lookup: TokenLookup;
  /** How long a sign-in lasts. */
  sessionSeconds: number;
  /** The built pages (dist/console); the console answers 503 with how to build them when absent. */
  assetsDir: string;
  /** Cookies are Secure when we are served over https. */
  secureCookies: boolean;
}

export async function consoleRoutes(app: App, deps: ConsoleDeps): Promise<void> {
  const { tokens, lookup, sessionSeconds, secureCookies } = deps;
  // `__Host-callplane_console` over https (Secure, Path=/, no Domain), else `callplane_console`.
  const cookieName = consoleCookieName(secureCookies);
  const hidden = { hide: true };

  const who = (actor: { id: number; kind: keyof typeof KIND_LABEL; name: string }) =>
    ({ id: actor.id, kind: actor.kind, label: KIND_LABEL[actor.kind], name: actor.name });

  function setSession(reply: FastifyReply, value: string, maxAge: number): void {
    void reply.setCookie(cookieName, value, { path: '/', httpOnly: true, sameSite: 'strict', secure: secureCookies, maxAge });
  }

  app.post('/console/session', {
    // Guessing tokens here costs what it costs on the API: the per-address limit counts it.
    config: { public: true, limitByAddress: true },
    schema: {
      ...hidden,
      body: Type.Object({
        token: Type.String({ minLength: 1, maxLength: 200, description: 'An API token, or a one-time auth token' }),
        peek: Type.Optional(Type.Boolean({ description: 'Only say whose token it is: nothing is spent, no session is made' })),
      }),
      response: { 200: Envelope({ account: Who, expiresAt: Type.Optional(Type.Integer()) }), ...errors(400, 401, 403) },
    },
  }, async (req, reply) => {
    void reply.header('cache-control', 'no-store');
    if (req.body.peek) {
      // The console asks before a sign-in link replaces whoever is signed in (docs/console.md).
      const account = await identify(lookup, req.body.token.trim(), 'body');
      return { success: true, message: 'Not signed in: the token was only looked at', account: who(account) };
    }
    // A one-time token is spent here, like on any other request that presents it.
    const scope = await authenticate(lookup, req.body.token.trim(), Date.now(), undefined, 'body');
    const session = await tokens.openConsoleSession(scope, sessionSeconds);
    // The session this browser had until now ends: its cookie is replaced, and nothing could end it later.
    const previous = req.headers[CONSOLE_HEADER] !== undefined ? req.cookies?.[cookieName] : undefined;
    if (previous) await tokens.closeConsoleSessionByValue(previous);
    setSession(reply, session.token, session.maxAgeSeconds);
    return { success: true, message: 'Signed in', account: who(scope.actor), expiresAt: session.expiresAt };
  });

  app.get('/console/session', {
    schema: { ...hidden, response: { 200: Envelope({ account: Who, tokenType: Type.String() }), ...errors(401, 403) } },
  }, async (req, reply) => {
    void reply.header('cache-control', 'no-store');
    return { success: true, message: 'Signed in', account: who(req.scope.actor), tokenType: req.scope.token.type };
  });

  app.delete('/console/session', {
    schema: { ...hidden, response: { 200: Envelope({}), ...errors(401, 403) } },
  }, async (req, reply) => {
    await tokens.closeConsoleSession(req.scope);
    void reply.clearCookie(cookieName, { path: '/', httpOnly: true, sameSite: 'strict', secure: secureCookies });
    return { success: true, message: 'Signed out' };
  });

  const built = fs.existsSync(`${deps.assetsDir}/index.html`);
  if (!built) {
    for (const url of ['/console', '/console/*']) {
      app.get(url, { config: { public: true }, schema: hidden }, async (req, reply) =>
        reply.status(503).send({ success: false, message: 'The web console is not built: run `npm run build` (npm ci does it)', requestId: req.id }));
    }
    return;
  }
  // The built files, read on request by @fastify/send (what @fastify/static serves with), loaded on
  // the first asset asked for: the service starts without it (docs/performance.md, bench/startup).
  // send() refuses paths that leave the root, and dotfiles; every file here is public.
  const asset = async (req: FastifyRequest, reply: FastifyReply, file: string) => {
    const { default: send } = await import('@fastify/send');
    const r = await send(req.raw, encodeURI(`/${file}`), { root: deps.assetsDir, index: false, dotfiles: 'ignore' });
    if (r.type === 'directory' || (r.type === 'error' && r.statusCode === 404)) return reply.callNotFound();
    if (r.type === 'error') return reply.status(r.statusCode).send({ success: false, message: r.metadata.error.message, requestId: req.id });
    void reply.status(r.statusCode).headers(r.headers)
      .header('content-security-policy', CONSOLE_CSP)
      .header('x-content-type-options', 'nosniff')
      .header('referrer-policy', 'no-referrer')
      .header('x-frame-options', 'DENY')
      .header('cross-origin-opener-policy', 'same-origin')
      // Vite names every built asset by its content: it never changes under its name.
      .header('cache-control', /^assets\//.test(file) ? 'public, max-age=31536000, immutable' : 'no-cache');
    return reply.send(r.stream);
  };
  const page = { config: { public: true }, schema: hidden };
  // The page itself, with and without its trailing slash (its assets are addressed from /console/).
  app.get('/console', page, (req, reply) => asset(req, reply, 'index.html'));
  app.get<{ Params: { '*': string } }>('/console/*', page, (req, reply) => asset(req, reply, req.params['*'] || 'index.html'));
}
