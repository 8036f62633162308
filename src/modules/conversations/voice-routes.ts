// The route Twilio posts a spoken conversation's gather action to (what the caller said, or that
// they said nothing); src/modules/conversations/twilio-voice.ts checks and answers it with TwiML.
// Twilio sends no token: the request is public and signed (X-Twilio-Signature).
import formbody from '@fastify/formbody';
import type { App } from '../../http/types.ts';
import type { Params } from '../tasks/twilio-callbacks.ts';
import { TWILIO_GATHER_PATH, type TwilioVoice } from './twilio-voice.ts';

/** The form as parsed by @fastify/formbody (strings, or arrays for repeated keys); anything else is no form. */
function formOf(body: unknown): Params {
  if (!body || typeof body !== 'object' || Array.isArray(body)) return {};
  const out: Params = {};
  for (const [k, v] of Object.entries(body)) {
    if (typeof v === 'string' || (Array.isArray(v) && v.every((x) => typeof x === 'string'))) out[k] = v as string | string[];
  }
  return out;
}

export async function voiceRoutes(app: App, { twilioVoice }: { twilioVoice: TwilioVoice }): Promise<void> {
  // Scoped to this plugin: the rest of the API stays JSON-only.
  await app.register(formbody);
  app.post(TWILIO_GATHER_PATH, { config: { public: true }, schema: { hide: true } }, async (req, reply) => {
    const form = formOf(req.body);
    const header = req.headers['x-twilio-signature'];
    const body = await twilioVoice.gather({
      url: req.url,
      conversation: (req.query as Record<string, unknown>).conversation,
      signature: Array.isArray(header) ? header[0] : header,
      params: form,
      signed: form,
    }, req.log);
    return reply.status(200).type('text/xml; charset=utf-8').send(body);
  });
}
