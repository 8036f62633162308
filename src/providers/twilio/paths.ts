// Every path Twilio calls us on, in one place: the twilio module's plugin (src/modules/twilio/routes.ts)
// serves them, and what gives Twilio a URL builds it from config.publicUrl and these (a task's call
// and text, tasks/run-task.ts; a number's webhooks, built in platform.ts for phone-numbers/service.ts; a
// call's TwiML, twilio/calls.ts and media-streams.ts). Here, in the providers layer, and importing
// nothing, so a module below the twilio module may name a path without importing the Twilio side.
// Twilio sends no token on any of them: each request is checked by its signature
// (src/modules/twilio/verify.ts), a Media Stream by the token of its TwiML (media-stream-token.ts).

/** A task's call or text status callback (?taskId is added by the carrier's URL). */
export const TWILIO_STATUS_PATH = '/api/v2/providers/twilio/status';
/** Where Twilio fetches an answered task call's instructions; ?taskId names the task. */
export const TWILIO_TWIML_PATH = '/api/v2/providers/twilio/twiml';
/** Twilio's answering-machine detection of a task's call (AsyncAmdStatusCallback; ?taskId names the task). */
export const TWILIO_AMD_PATH = '/api/v2/providers/twilio/amd';
/** Where a Twilio number's voice webhook points ("A call comes in"): calls to our numbers. */
export const TWILIO_INCOMING_PATH = '/api/v2/providers/twilio/voice';
/** Where a Twilio number's call status callback points: the end of calls to our numbers. */
export const TWILIO_INCOMING_STATUS_PATH = '/api/v2/providers/twilio/voice/status';
/** Where Twilio posts what the caller said (the <Gather action>); ?conversation names the call's conversation. */
export const TWILIO_GATHER_PATH = '/api/v2/providers/twilio/voice/gather';
/** What an attended transfer's destination hears (<Number url>); ?conversation and ?name. */
export const TWILIO_WHISPER_PATH = '/api/v2/providers/twilio/voice/whisper';
/** The WebSocket route Twilio opens a call's Media Stream on. */
export const TWILIO_STREAM_PATH = '/api/v2/providers/twilio/voice/stream';
/** Where Twilio posts a number's incoming messages ("A message comes in"). */
export const TWILIO_SMS_PATH = '/api/v2/providers/twilio/sms';

/** Where Twilio fetches what an attended transfer's destination hears before it is joined. */
export function whisperUrl(publicUrl: string, conversationId: string, name: string | undefined): string {
  return `${publicUrl}${TWILIO_WHISPER_PATH}?conversation=${encodeURIComponent(conversationId)}&name=${encodeURIComponent((name ?? '').slice(0, 100))}`;
}

/** Where a call's <Gather> posts what the caller said. */
export function gatherUrl(publicUrl: string, conversationId: string): string {
  return `${publicUrl}${TWILIO_GATHER_PATH}?conversation=${encodeURIComponent(conversationId)}`;
}
