// The token that lets a Twilio Media Stream into a call's conversation. The TwiML we answer a call
// with carries it as <Parameter name="token">; Twilio hands it back in the stream's `start` message.
// It is a MAC (a key derived from the deployment's secret key for this purpose only) binding the
// conversation, the CallSid, what the stream is for (`start`: the call's first stream, `resume`:
// the stream after a redirect) and an expiry, so a stream cannot join another call, open a second
// session on the same call, or come back later.
import crypto from 'node:crypto';
import type { SecretBox } from '../../lib/crypto.ts';

const MAC_PURPOSE = 'twilio-media-stream';
/** How long a token opens a stream: Twilio connects as soon as it has the TwiML (and played any digits). */
export const STREAM_TOKEN_TTL_SECONDS = 300;

export type StreamPurpose = 'start' | 'resume';

export interface StreamGrant {
  conversationId: string;
  purpose: StreamPurpose;
}

const TOKEN = /^v1\.(start|resume)\.([0-9a-f-]{36})\.(\d{1,12})\.([A-Za-z0-9_-]{43})$/;

const macOf = (box: Pick<SecretBox, 'mac'>, purpose: StreamPurpose, conversationId: string, callSid: string, exp: number) =>
  box.mac(MAC_PURPOSE, `${purpose}|${conversationId}|${callSid}|${exp}`);

export function streamToken(box: Pick<SecretBox, 'mac'>, purpose: StreamPurpose, conversationId: string, callSid: string, nowMs: number): string {
  const exp = Math.floor(nowMs / 1000) + STREAM_TOKEN_TTL_SECONDS;
  return `v1.${purpose}.${conversationId}.${exp}.${macOf(box, purpose, conversationId, callSid, exp)}`;
}

/** What a token grants to a stream of call `callSid`, or null (malformed, expired, another call's, forged). */
export function verifyStreamToken(box: Pick<SecretBox, 'mac'>, token: unknown, callSid: string, nowMs: number): StreamGrant | null {
  if (typeof token !== 'string' || token.length > 200) return null;
  const m = TOKEN.exec(token);
  if (!m) return null;
  const purpose = m[1] as StreamPurpose;
  const exp = Number(m[3]);
  if (exp * 1000 < nowMs) return null;
  const expected = Buffer.from(macOf(box, purpose, m[2]!, callSid, exp));
  const given = Buffer.from(m[4]!);
  if (given.length !== expected.length || !crypto.timingSafeEqual(given, expected)) return null;
  return { conversationId: m[2]!, purpose };
}
