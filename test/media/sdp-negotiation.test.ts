// Offer/answer for the media layer (src/sip/sdp.ts): the codec chosen from a remote SDP, the
// telephone-event payload type, where to send, and our answer.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { buildAnswer, buildOffer, negotiateAudio, parseSdp } from '../../src/sip/sdp.ts';

const sdp = (...media: string[]) => ['v=0', 'o=- 1 1 IN IP4 198.51.100.7', 's=-', 'c=IN IP4 198.51.100.7', 't=0 0', ...media, ''].join('\r\n');

describe('audio negotiation', () => {
  it('takes the first codec of the remote\'s list that we support, and telephone-event with its payload type', () => {
    const remote = parseSdp(sdp('m=audio 30000 RTP/AVP 18 8 0 96', 'a=rtpmap:96 telephone-event/8000', 'a=fmtp:96 0-15', 'a=ptime:20', 'a=sendrecv'))!;
    const n = negotiateAudio(remote)!;
    assert.deepEqual(n.codec, { pt: 8, name: 'PCMA', rate: 8000 });
    assert.deepEqual(n.common.map((c) => c.name), ['PCMA', 'PCMU']);
    assert.deepEqual(n.telephoneEvent, { pt: 96, name: 'telephone-event', rate: 8000, fmtp: '0-15' });
    assert.deepEqual([n.address, n.port, n.direction], ['198.51.100.7', 30000, 'sendrecv']);
    assert.deepEqual(n.answerCodecs.map((c) => c.pt), [8, 96]);
  });

  it('reads our own offer back as PCMU with telephone-event 101', () => {
    const n = negotiateAudio(parseSdp(buildOffer({ address: '192.0.2.1', port: 10_000 }))!)!;
    assert.deepEqual([n.codec.name, n.telephoneEvent?.pt, n.telephoneEvent?.fmtp, n.address, n.port], ['PCMU', 101, '0-16', '192.0.2.1', 10_000]);
  });

  it('matches by name and rate, so a dynamic payload type for PCMU works, and names in any case', () => {
    const n = negotiateAudio(parseSdp(sdp('m=audio 4000 RTP/AVP 97', 'a=rtpmap:97 pcmu/8000'))!)!;
    assert.deepEqual([n.codec.pt, n.codec.name, n.telephoneEvent], [97, 'pcmu', null]);
    // telephone-event at another rate than the codec's is not ours to use.
    const wide = negotiateAudio(parseSdp(sdp('m=audio 4000 RTP/AVP 0 100', 'a=rtpmap:100 telephone-event/16000'))!)!;
    assert.equal(wide.telephoneEvent, null);
  });

  it('gives null when nothing is shared, the stream is refused, or there is no address', () => {
    assert.equal(negotiateAudio(parseSdp(sdp('m=audio 4000 RTP/AVP 18 9'))!), null);
    assert.equal(negotiateAudio(parseSdp(sdp('m=audio 0 RTP/AVP 0'))!), null);
    assert.equal(negotiateAudio({ port: 4000, codecs: [{ pt: 0, name: 'PCMU', rate: 8000 }], direction: 'sendrecv' }), null);
    // Only what we support counts: an offer of PCMA alone, when we support only PCMU.
    assert.equal(negotiateAudio(parseSdp(sdp('m=audio 4000 RTP/AVP 8'))!, [{ pt: 0, name: 'PCMU', rate: 8000 }]), null);
  });

  it('answers with the chosen codec and telephone-event, numbered as offered, and the mirrored direction', () => {
    const offer = parseSdp(sdp('m=audio 30000 RTP/AVP 0 8 96', 'a=rtpmap:96 telephone-event/8000', 'a=sendonly'))!;
    const answer = buildAnswer(negotiateAudio(offer)!, { address: '192.0.2.10', port: 10_002, sessionId: '9' });
    assert.equal(answer, [
      'v=0', 'o=callplane 9 1 IN IP4 192.0.2.10', 's=callplane', 'c=IN IP4 192.0.2.10', 't=0 0', 'm=audio 10002 RTP/AVP 0 96',
      'a=rtpmap:0 PCMU/8000', 'a=rtpmap:96 telephone-event/8000', 'a=fmtp:96 0-15', 'a=ptime:20', 'a=recvonly', '',
    ].join('\r\n'));
    assert.match(buildAnswer(negotiateAudio(offer)!, { address: '192.0.2.10', port: 1, direction: 'inactive' }), /a=inactive/);
  });
});
