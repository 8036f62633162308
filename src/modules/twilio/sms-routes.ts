// Twilio's messaging webhook (src/modules/conversations/sms.ts checks and records what it posts).
// Twilio sends no token: the route is public, and every request is checked by X-Twilio-Signature.
import type { App } from '../../http/types.ts';
import { EMPTY_TWIML } from '../../providers/index.ts';
import { TWILIO_SMS_PATH, type SmsService } from '../conversations/sms.ts';

export async function smsRoutes(app: App, opts: { sms: SmsService; bodyLimitBytes: number }): Promise<void> {
  const { sms } = opts;
  // Scoped to this plugin: the form arrives as its exact bytes, which the signature covers and a
  // twilioSMS relay forwards unchanged.
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'buffer', bodyLimit: opts.bodyLimitBytes },
    (_req, body, done) => done(null, body));

  app.post(TWILIO_SMS_PATH, { config: { public: true }, schema: { hide: true } }, async (req, reply) => {
    const headers: Record<string, string | undefined> = {};
    for (const [name, value] of Object.entries(req.headers)) headers[name] = Array.isArray(value) ? value[0] : value;
    await sms.receive({
      url: req.url, headers, contentType: headers['content-type'],
      rawBody: Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0),
    }, req.log);
    // No instructions: the reply goes out later, from the worker, through the Messages API.
    return reply.status(200).type('text/xml; charset=utf-8').send(EMPTY_TWIML);
  });
}
