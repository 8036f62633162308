// The public web chat (docs/conversations.md, Web chat), no token: the page of an agent's slug
// (GET /a/<slug>) and the visitor's messages (GET and POST /a/<slug>/messages). `a` cannot be a
// slug (slugs are at least 3 characters and `a` is reserved besides), and nothing here is under
// /api/v2. The visitor is the HttpOnly, SameSite=Strict cookie `cp_visitor`, scoped to the page's
// path; the page is HTML with a hash-based Content-Security-Policy, the messages JSON.
import { Type } from '@sinclair/typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { HttpError, Invalid, NotFound, TooManyRequests } from '../../http/errors.ts';
import type { App } from '../../http/types.ts';
import { normaliseSlug } from '../agents/slug.ts';
import { chatPage, noticePage, PAGE_CSP } from './web-chat-page.ts';
import { WEB_CHAT_BODY_BYTES, type WebChatService } from './web-chat.ts';

export const VISITOR_COOKIE = 'cp_visitor';
/** How long a browser keeps its visitor id (and so its transcript): 30 days. */
export const VISITOR_COOKIE_MAX_AGE = 30 * 24 * 3600;

const Params = Type.Object({ slug: Type.String({ minLength: 1, maxLength: 100 }) });
const open = { config: { public: true } } as const;

export async function webChatRoutes(app: App, { webChat, secureCookies }: { webChat: WebChatService; secureCookies: boolean }): Promise<void> {
  // Every answer here, page or JSON, error or not: no sniffing, no referrer, never cached.
  app.addHook('onSend', async (_req, reply) => {
    void reply.header('x-content-type-options', 'nosniff').header('referrer-policy', 'no-referrer').header('cache-control', 'no-store');
  });

  const client = (req: FastifyRequest) => ({ ip: req.ip, visitor: req.cookies[VISITOR_COOKIE] });

  function setVisitor(reply: FastifyReply, slug: string, value: string | undefined): void {
    if (value === undefined) return;
    void reply.header('set-cookie', `${VISITOR_COOKIE}=${value}; Path=/a/${slug}; Max-Age=${VISITOR_COOKIE_MAX_AGE}; HttpOnly; SameSite=Strict${secureCookies ? '; Secure' : ''}`);
  }

  function html(reply: FastifyReply, status: number, body: string) {
    return reply.status(status)
      .header('content-type', 'text/html; charset=utf-8')
      .header('content-security-policy', PAGE_CSP)
      .header('x-frame-options', 'DENY')
      .header('cross-origin-opener-policy', 'same-origin')
      .send(body);
  }

  app.get('/a/:slug', { ...open, schema: { hide: true, params: Params } }, async (req, reply) => {
    // One spelling per page, so the cookie's path (which browsers match case-sensitively) fits.
    let canonical: string | undefined;
    try {
      canonical = normaliseSlug(req.params.slug);
    } catch { /* not a slug: no such page */ }
    if (canonical !== undefined && canonical !== req.params.slug) return reply.redirect(`/a/${canonical}`, 308);
    try {
      const page = await webChat.page(req.params.slug, client(req), req.headers['sec-fetch-site'] === 'cross-site');
      setVisitor(reply, page.slug, page.issued);
      return html(reply, 200, chatPage({ title: page.title, welcome: page.welcome, endpoint: `/a/${page.slug}/messages` }));
    } catch (err) {
      if (err instanceof NotFound) return html(reply, 404, noticePage('Not found', 'There is no chat at this address.'));
      if (err instanceof TooManyRequests) {
        void reply.header('retry-after', String(err.retryAfterSeconds));
        return html(reply, 429, noticePage('Too many requests', 'Too many new chats from your network. Try again later.'));
      }
      throw err;
    }
  });

  app.get('/a/:slug/messages', { ...open, schema: { hide: true, params: Params } }, async (req, reply) => {
    const t = await webChat.transcript(req.params.slug, client(req));
    setVisitor(reply, t.slug, t.issued);
    return t.body;
  });

  app.post('/a/:slug/messages', {
    ...open,
    bodyLimit: WEB_CHAT_BODY_BYTES,
    schema: { hide: true, params: Params, body: Type.Object({ text: Type.Optional(Type.Unknown()) }) },
  }, async (req) => {
    // JSON only: a cross-site form cannot send it without a CORS preflight we never answer.
    if (!/^application\/json\s*(;|$)/i.test(req.headers['content-type'] ?? '')) throw new HttpError(415, 'Send application/json');
    if (req.body.text === undefined) throw new Invalid('text is required');
    return webChat.send(req.params.slug, client(req), req.body.text);
  });
}
