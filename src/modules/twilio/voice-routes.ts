// The routes Twilio calls during a spoken conversation: the gather action (what the caller said, or
// that they said nothing), which twilio-voice.ts checks and answers with TwiML, and the Media
// Stream WebSocket of a streamed call, which media-streams.ts checks and runs. Twilio sends no
// token: the gather request is public and signed (X-Twilio-Signature); a stream proves itself with
// the token of its TwiML, in its `start` message.
import formbody from '@fastify/formbody';
import websocket from '@fastify/websocket';
import { MAX_STREAM_MESSAGE_BYTES } from '../../providers/twilio/media-stream.ts';
import { formOf } from '../../providers/twilio/form.ts';
import { signatureHeader } from '../../providers/twilio/signature.ts';
import type { App } from '../../http/types.ts';
import { TWILIO_STREAM_PATH, type MediaStreams } from './media-streams.ts';
import { TWILIO_WHISPER_PATH } from './voice-twiml.ts';
import { TWILIO_GATHER_PATH, TWILIO_INCOMING_PATH, TWILIO_INCOMING_STATUS_PATH, type NumberWebhookRequest, type TwilioVoice } from './calls.ts';

export async function voiceRoutes(app: App, { twilioVoice, mediaStreams }: { twilioVoice: TwilioVoice; mediaStreams: MediaStreams }): Promise<void> {
  // Scoped to this plugin: the rest of the API stays JSON-only.
  await app.register(formbody);
  // Larger messages close the socket (1009) before anything reads them.
  await app.register(websocket, { options: { maxPayload: MAX_STREAM_MESSAGE_BYTES, perMessageDeflate: false } });
  app.get(TWILIO_STREAM_PATH, { websocket: true, config: { public: true }, schema: { hide: true } }, (socket, req) => {
    void mediaStreams.accept(socket, req.log);
  });
  const numberWebhook = (req: { url: string; body: unknown; headers: Record<string, string | string[] | undefined> }): NumberWebhookRequest => {
    const form = formOf(req.body);
    return { url: req.url, signature: signatureHeader(req.headers), params: form, signed: form };
  };
  // A Twilio number's voice webhook ("A call comes in") and its call status callback.
  app.post(TWILIO_INCOMING_PATH, { config: { public: true }, schema: { hide: true } }, async (req, reply) => {
    const body = await twilioVoice.incoming(numberWebhook(req), req.log);
    return reply.status(200).type('text/xml; charset=utf-8').send(body);
  });
  app.post(TWILIO_INCOMING_STATUS_PATH, { config: { public: true }, schema: { hide: true } }, async (req, reply) => {
    await twilioVoice.incomingStatus(numberWebhook(req), req.log);
    return reply.status(204).send();
  });
  app.post(TWILIO_WHISPER_PATH, { config: { public: true }, schema: { hide: true } }, async (req, reply) => {
    const form = formOf(req.body);
    const query = req.query as Record<string, unknown>;
    const body = await twilioVoice.whisper({
      url: req.url, conversation: query.conversation, name: query.name,
      signature: signatureHeader(req.headers), params: form, signed: form,
    }, req.log);
    return reply.status(200).type('text/xml; charset=utf-8').send(body);
  });
  app.post(TWILIO_GATHER_PATH, { config: { public: true }, schema: { hide: true } }, async (req, reply) => {
    const form = formOf(req.body);
    const body = await twilioVoice.gather({
      url: req.url,
      conversation: (req.query as Record<string, unknown>).conversation,
      signature: signatureHeader(req.headers),
      params: form,
      signed: form,
    }, req.log);
    return reply.status(200).type('text/xml; charset=utf-8').send(body);
  });
}
