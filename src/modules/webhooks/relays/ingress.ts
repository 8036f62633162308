// The public URL providers post to: POST /hooks/relay/{ingressId}. No token: the id is
// unguessable, and each request is verified as its provider signs it (providers.ts). The body is
// kept as the exact bytes received, whatever its content type, since signatures cover those bytes
// and the forward must carry them unchanged.
import type { FastifyInstance } from 'fastify';
import type { Config } from '../../../config.ts';
import { EMPTY_TWIML } from '../../../providers/index.ts';
import { isTwilio } from './providers.ts';
import { INGRESS_PATH, type RelayService } from './service.ts';

export async function relayIngress(app: FastifyInstance, opts: { relays: RelayService; config: Config }): Promise<void> {
  const { relays, config } = opts;
  // Replaces the JSON parser in this scope only: any content type (or none) arrives as a Buffer.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: config.bodyLimitBytes }, (_req, body, done) => done(null, body));

  app.post(`${INGRESS_PATH}/:ingressId`, { config: { public: true }, schema: { hide: true } }, async (req, reply) => {
    const { ingressId } = req.params as { ingressId: string };
    const headers: Record<string, string | undefined> = {};
    for (const [name, value] of Object.entries(req.headers)) headers[name] = Array.isArray(value) ? value[0] : value;
    const result = await relays.receive({
      ingressId,
      // The URL as the provider called it (the ingressUrl we gave it, plus any query it added).
      url: `${config.publicUrl}${req.url}`,
      headers,
      contentType: headers['content-type'],
      rawBody: Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0),
    });
    if (result.kind === 'refused') {
      const { verdict } = result;
      req.log.warn({ relayId: result.relayId, type: result.type, reason: verdict.message }, 'relay ingress refused: verification failed');
      if (verdict.challenge) reply.header('www-authenticate', verdict.challenge);
      return reply.status(verdict.status).send({ success: false, message: verdict.message, requestId: req.id });
    }
    // Twilio is answered with no instructions (no reply to an SMS; for a call, nothing more to do).
    if (isTwilio(result.type)) return reply.status(200).type('text/xml; charset=utf-8').send(EMPTY_TWIML);
    return reply.status(200).send({ success: true, ...(result.kind === 'duplicate' ? { duplicate: true } : {}) });
  });
}
