// Every path Twilio calls us on (paths.ts), in one encapsulated plugin: a task's call and text
// (status callback, TwiML, answering-machine detection: task-callbacks.ts), calls to our numbers
// and their status, the <Gather> action and an attended transfer's whisper (calls.ts), a call's
// Media Stream WebSocket (media-streams.ts), and texts to our numbers (texts.ts). Twilio sends no
// token: every route is public, and the services check each request (verify.ts) — a form by its
// X-Twilio-Signature, a stream by the token of its TwiML in its `start` message.
//
// A form is read one way here: its exact bytes are kept (a twilioSMS relay forwards them
// unchanged) and parsed by src/providers/twilio/form.ts. The parser is scoped to this plugin: the
// rest of the API stays JSON-only. The WebSocket support is registered around it, once, with the
// browser's talk socket (app.ts): one upgrade listener for the server.
import type { FastifyRequest } from 'fastify';
import type { App } from '../../http/types.ts';
import { EMPTY_TWIML } from '../../providers/index.ts';
import { parseForm, type TwilioForm } from '../../providers/twilio/form.ts';
import { signatureHeader } from '../../providers/twilio/signature.ts';
import type { TwilioVoice } from './calls.ts';
import type { MediaStreams } from './media-streams.ts';
import {
  TWILIO_AMD_PATH, TWILIO_GATHER_PATH, TWILIO_INCOMING_PATH, TWILIO_INCOMING_STATUS_PATH, TWILIO_SMS_PATH,
  TWILIO_STATUS_PATH, TWILIO_STREAM_PATH, TWILIO_TWIML_PATH, TWILIO_WHISPER_PATH,
} from '../../providers/twilio/paths.ts';
import type { TwilioCallbacks } from './task-callbacks.ts';
import type { TwilioTexts } from './texts.ts';
import type { TwilioRequest } from './verify.ts';

export interface TwilioRouteDeps {
  twilioCallbacks: TwilioCallbacks;
  twilioVoice: TwilioVoice;
  mediaStreams: MediaStreams;
  twilioTexts: TwilioTexts;
}

/** A form Twilio posted: its bytes as they came, and its parameters. */
class PostedForm {
  readonly form: TwilioForm;
  constructor(readonly raw: Buffer) {
    this.form = parseForm(raw.toString('utf8'));
  }
}

/** The form of a POST; a body of another type (Twilio posts none) carries no parameters. */
const formOfBody = (body: unknown): TwilioForm => (body instanceof PostedForm ? body.form : {});

/** A POST of Twilio's: the path and query it called, its signature, and the form it sent (which the signature covers). */
function posted(req: FastifyRequest): TwilioRequest {
  const form = formOfBody(req.body);
  return { url: req.url, signature: signatureHeader(req.headers), params: form, signed: form };
}

const query = (req: FastifyRequest) => req.query as Record<string, unknown>;

const TWIML = 'text/xml; charset=utf-8';

export async function twilioRoutes(app: App, deps: TwilioRouteDeps): Promise<void> {
  const { twilioCallbacks: callbacks, twilioVoice: calls, mediaStreams, twilioTexts: texts } = deps;
  // The app's body limit applies (CALLPLANE_BODY_LIMIT_BYTES).
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'buffer' }, (_req, body, done) => done(null, new PostedForm(body as Buffer)));
  const route = { config: { public: true }, schema: { hide: true } } as const;

  // A task's call or text.
  app.post(TWILIO_STATUS_PATH, route, async (req, reply) => {
    await callbacks.status({ ...posted(req), taskId: query(req).taskId }, req.log);
    return reply.status(204).send();
  });
  app.post(TWILIO_AMD_PATH, route, async (req, reply) => {
    await callbacks.amd({ ...posted(req), taskId: query(req).taskId }, req.log);
    return reply.status(204).send();
  });
  // Twilio fetches the TwiML URL with POST by default (the form signed); with GET its parameters
  // are in the query string, which the signed URL already covers.
  app.post(TWILIO_TWIML_PATH, route, async (req, reply) => {
    const body = await callbacks.twiml({ ...posted(req), taskId: query(req).taskId }, req.log);
    return reply.status(200).type(TWIML).send(body);
  });
  app.get(TWILIO_TWIML_PATH, route, async (req, reply) => {
    const search = req.url.indexOf('?');
    const params = search < 0 ? {} : parseForm(req.url.slice(search + 1));
    const body = await callbacks.twiml({ url: req.url, signature: signatureHeader(req.headers), params, signed: {}, taskId: query(req).taskId }, req.log);
    return reply.status(200).type(TWIML).send(body);
  });

  // A Twilio number's voice webhook ("A call comes in") and its call status callback.
  app.post(TWILIO_INCOMING_PATH, route, async (req, reply) => {
    const body = await calls.incoming(posted(req), req.log);
    return reply.status(200).type(TWIML).send(body);
  });
  app.post(TWILIO_INCOMING_STATUS_PATH, route, async (req, reply) => {
    await calls.incomingStatus(posted(req), req.log);
    return reply.status(204).send();
  });
  // A gathered call: what the caller said, and what an attended transfer's destination hears.
  app.post(TWILIO_GATHER_PATH, route, async (req, reply) => {
    const body = await calls.gather({ ...posted(req), conversation: query(req).conversation }, req.log);
    return reply.status(200).type(TWIML).send(body);
  });
  app.post(TWILIO_WHISPER_PATH, route, async (req, reply) => {
    const body = await calls.whisper({ ...posted(req), conversation: query(req).conversation, name: query(req).name }, req.log);
    return reply.status(200).type(TWIML).send(body);
  });
  // A streamed call's audio.
  app.get(TWILIO_STREAM_PATH, { websocket: true, ...route }, (socket, req) => {
    void mediaStreams.accept(socket, req.log);
  });

  // A Twilio number's messaging webhook ("A message comes in").
  app.post(TWILIO_SMS_PATH, route, async (req, reply) => {
    const headers: Record<string, string | undefined> = {};
    for (const [name, value] of Object.entries(req.headers)) headers[name] = Array.isArray(value) ? value[0] : value;
    await texts.receive(posted(req), {
      headers, contentType: headers['content-type'], rawBody: req.body instanceof PostedForm ? req.body.raw : Buffer.alloc(0),
    }, req.log);
    // No instructions: the reply goes out later, from the worker, through the Messages API.
    return reply.status(200).type(TWIML).send(EMPTY_TWIML);
  });
}
