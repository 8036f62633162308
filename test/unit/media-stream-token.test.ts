// The stream token (what lets a Twilio Media Stream into a call), the stream TwiML's escaping and
// the CALLPLANE_TWILIO_VOICE setting.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { it } from 'node:test';
import { ConfigError, loadConfig } from '../../src/config.ts';
import { SecretBox } from '../../src/lib/crypto.ts';
import { streamToken, verifyStreamToken, STREAM_TOKEN_TTL_SECONDS } from '../../src/modules/twilio/media-stream-token.ts';
import { connectStream, playDigits } from '../../src/providers/twilio/twiml.ts';

const box = new SecretBox(crypto.randomBytes(32));
const id = crypto.randomUUID();
const now = Date.now();

it('a stream token opens its own call\'s conversation for its purpose, until it expires', () => {
  const t = streamToken(box, 'start', id, 'CA1', now);
  assert.deepEqual(verifyStreamToken(box, t, 'CA1', now), { conversationId: id, purpose: 'start' });
  assert.equal(verifyStreamToken(box, t, 'CA2', now), null, 'another call');
  assert.equal(verifyStreamToken(box, t, 'CA1', now + (STREAM_TOKEN_TTL_SECONDS + 1) * 1000), null, 'expired');
  assert.equal(verifyStreamToken(new SecretBox(crypto.randomBytes(32)), t, 'CA1', now), null, 'another deployment');
  assert.equal(verifyStreamToken(box, t.replace('v1.start.', 'v1.resume.'), 'CA1', now), null, 'another purpose');
  const [v, p, conv, exp, mac] = t.split('.');
  assert.equal(verifyStreamToken(box, [v, p, conv, String(Number(exp) + 1000), mac].join('.'), 'CA1', now), null, 'a later expiry');
  assert.equal(verifyStreamToken(box, [v, p, crypto.randomUUID(), exp, mac].join('.'), 'CA1', now), null, 'another conversation');
  for (const bad of [undefined, 42, '', 'x'.repeat(500), `${t}x`]) assert.equal(verifyStreamToken(box, bad, 'CA1', now), null);
  assert.deepEqual(verifyStreamToken(box, streamToken(box, 'resume', id, 'CA1', now), 'CA1', now), { conversationId: id, purpose: 'resume' });
});

it('stream TwiML escapes what it carries; digits keep only keys Twilio plays', () => {
  assert.equal(connectStream('wss://h/x?a=1&b="2"', { token: '<t>' }),
    '<Connect><Stream url="wss://h/x?a=1&amp;b=&quot;2&quot;"><Parameter name="token" value="&lt;t&gt;"/></Stream></Connect>');
  assert.equal(playDigits('1,2#"/><Hangup/>A'), '<Play digits="1w2#"/>');
  assert.equal(playDigits('ABCD'), '');
});

it('CALLPLANE_TWILIO_VOICE is gather by default, stream by choice, and nothing else', () => {
  assert.equal(loadConfig({}).twilioVoice, 'gather');
  assert.equal(loadConfig({ CALLPLANE_TWILIO_VOICE: 'stream' }).twilioVoice, 'stream');
  assert.throws(() => loadConfig({ CALLPLANE_TWILIO_VOICE: 'websocket' }), (e: unknown) => e instanceof ConfigError && /CALLPLANE_TWILIO_VOICE/.test(e.message));
});
