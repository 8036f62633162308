// SDP: our audio offer and what we read from answers (sipp's real bodies and hand-made edge cases).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { parseMessage } from '../../src/sip/message.ts';
import { buildOffer, parseSdp } from '../../src/sip/sdp.ts';

const dir = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../fixtures/sip');

describe('SDP', () => {
  it('offers PCMU, PCMA and telephone-event on our address and port, CRLF-terminated', () => {
    const sdp = buildOffer({ address: '192.0.2.10', port: 40000, sessionId: '42' });
    assert.equal(sdp, [
      'v=0', 'o=callplane 42 1 IN IP4 192.0.2.10', 's=callplane', 'c=IN IP4 192.0.2.10', 't=0 0', 'm=audio 40000 RTP/AVP 0 8 101',
      'a=rtpmap:0 PCMU/8000', 'a=rtpmap:8 PCMA/8000', 'a=rtpmap:101 telephone-event/8000', 'a=fmtp:101 0-16', 'a=ptime:20', 'a=sendrecv', '',
    ].join('\r\n'));
    assert.deepEqual(parseSdp(sdp), {
      address: '192.0.2.10', port: 40000, direction: 'sendrecv',
      codecs: [{ pt: 0, name: 'PCMU', rate: 8000 }, { pt: 8, name: 'PCMA', rate: 8000 }, { pt: 101, name: 'telephone-event', rate: 8000, fmtp: '0-16' }],
    });
  });

  it('writes IP6 for an IPv6 address', () => {
    assert.match(buildOffer({ address: '2001:db8::5', port: 5004 }), /\r\nc=IN IP6 2001:db8::5\r\n/);
  });

  it('reads sipp\'s offer: session-level connection, static payload types named without rtpmap', () => {
    const invite = parseMessage(fs.readFileSync(path.join(dir, 'sipp-udp-call-01-sent-invite.txt')));
    assert.deepEqual(parseSdp(invite.body.toString()), { address: '127.0.0.4', port: 6200, direction: 'sendrecv', codecs: [{ pt: 0, name: 'PCMU', rate: 8000 }] });
  });

  it('prefers a media-level c= and direction, reads only the first audio stream, and refuses non-SDP', () => {
    const sdp = ['v=0', 'o=- 1 1 IN IP4 10.0.0.1', 's=-', 'c=IN IP4 10.0.0.1', 'a=sendonly', 't=0 0', 'm=video 5000 RTP/AVP 96', 'c=IN IP4 10.0.0.9',
      'm=audio 6000 RTP/AVP 8 18', 'c=IN IP4 10.0.0.2', 'a=recvonly', 'm=audio 7000 RTP/AVP 0', ''].join('\n');
    assert.deepEqual(parseSdp(sdp), { address: '10.0.0.2', port: 6000, direction: 'recvonly', codecs: [{ pt: 8, name: 'PCMA', rate: 8000 }, { pt: 18, name: 'G729', rate: 8000 }] });
    // A video section's c= and direction do not leak into the audio stream after it.
    const leaky = ['v=0', 'o=- 1 1 IN IP4 10.0.0.1', 's=-', 'c=IN IP4 10.0.0.1', 't=0 0', 'm=video 5000 RTP/AVP 96', 'c=IN IP4 10.0.0.9', 'a=inactive', 'm=audio 6000 RTP/AVP 0', ''].join('\r\n');
    assert.deepEqual([parseSdp(leaky)?.address, parseSdp(leaky)?.direction], ['10.0.0.1', 'sendrecv']);
    assert.equal(parseSdp('hello'), null);
    assert.equal(parseSdp('v=0\r\nm=video 1 RTP/AVP 96\r\n'), null);
  });
});
