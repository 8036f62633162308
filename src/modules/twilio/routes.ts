// The routes Twilio calls back on for tasks' calls and texts (src/modules/tasks/twilio-callbacks.ts
// checks and applies them). Twilio sends no token: the callbacks are public and signed.
import formbody from '@fastify/formbody';
import type { FastifyRequest } from 'fastify';
import type { App } from '../../http/types.ts';
import type { TwilioParams } from '../../providers/index.ts';
import { formOf, type TwilioForm } from '../../providers/twilio/form.ts';
import { signatureHeader } from '../../providers/twilio/signature.ts';
import { TWILIO_AMD_PATH, TWILIO_STATUS_PATH, TWILIO_TWIML_PATH } from '../tasks/run-task.ts';
import type { TwilioCallbacks, TwilioRequest } from './task-callbacks.ts';

function twilioRequest(req: FastifyRequest, params: TwilioForm, signed: TwilioParams): TwilioRequest {
  return {
    url: req.url,
    taskId: (req.query as Record<string, unknown>).taskId,
    signature: signatureHeader(req.headers),
    params,
    signed,
  };
}

export async function twilioRoutes(app: App, opts: { twilioCallbacks: TwilioCallbacks }): Promise<void> {
  const callbacks = opts.twilioCallbacks;
  // Scoped to this plugin: the rest of the API stays JSON-only.
  await app.register(formbody);
  const hidden = { hide: true } as const;

  app.post(TWILIO_STATUS_PATH, { config: { public: true }, schema: hidden }, async (req, reply) => {
    const form = formOf(req.body);
    await callbacks.status(twilioRequest(req, form, form), req.log);
    return reply.status(204).send();
  });

  app.post(TWILIO_AMD_PATH, { config: { public: true }, schema: hidden }, async (req, reply) => {
    const form = formOf(req.body);
    await callbacks.amd(twilioRequest(req, form, form), req.log);
    return reply.status(204).send();
  });

  // Twilio fetches the TwiML URL with POST by default (the form signed); with GET its parameters
  // are in the query string, which the signed URL already covers.
  app.post(TWILIO_TWIML_PATH, { config: { public: true }, schema: hidden }, async (req, reply) => {
    const form = formOf(req.body);
    const body = await callbacks.twiml(twilioRequest(req, form, form), req.log);
    return reply.status(200).type('text/xml; charset=utf-8').send(body);
  });
  app.get(TWILIO_TWIML_PATH, { config: { public: true }, schema: hidden }, async (req, reply) => {
    const body = await callbacks.twiml(twilioRequest(req, formOf(req.query), {}), req.log);
    return reply.status(200).type('text/xml; charset=utf-8').send(body);
  });
}
