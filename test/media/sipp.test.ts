// The media layer against sipp, an RTP stack that is not ours: sipp answers a call and plays
// real captures (RFC 2833 digit '1' with its end packet repeated under one sequence number, then
// 30 ms PCMA packets) to an RtpSession, and echoes an RtpSession's own audio back (-rtp_echo).
// Skips locally without sipp, fails under CI=true (.ci/run installs sip-tester), like test/sip.
// @lane wall
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, it } from 'node:test';
import alawmulaw from 'alawmulaw';
import { PortPool } from '../../src/media/port-pool.ts';
import { RtpSession } from '../../src/media/rtp-session.ts';
import { placeSipCall } from '../../src/sip/call.ts';
import { SipEndpoint } from '../../src/sip/endpoint.ts';
import { buildOffer, negotiateAudio, parseSdp } from '../../src/sip/sdp.ts';
import { peersSkip, startSipp, waitFor } from '../helpers/sip-peers.ts';

/** The captures Debian's sip-tester ships. */
const PCAPS = '/usr/share/sip-tester';
const DTMF_PCAP = `${PCAPS}/dtmf_2833_1.pcap`;
const AUDIO_PCAP = `${PCAPS}/g711a.pcap`;

/** Why the capture-playing test cannot run here, or false. sipp plays captures through a raw socket: root only. */
function pcapSkip(): false | string {
  const skip = peersSkip(['sipp']);
  if (skip) return skip;
  if (!fs.existsSync(DTMF_PCAP) || !fs.existsSync(AUDIO_PCAP)) return `sipp's captures are not in ${PCAPS} (Debian's sip-tester ships them)`;
  if (process.getuid?.() !== 0) return 'sipp plays captures through a raw socket, which needs root';
  return false;
}

/** The RTP payloads of a capture (Ethernet, IPv4, UDP), in order. */
function rtpPayloads(file: string): Buffer[] {
  const b = fs.readFileSync(file);
  const out: Buffer[] = [];
  for (let o = 24; o + 16 <= b.length;) {
    const len = b.readUInt32LE(o + 8);
    const frame = b.subarray(o + 16, o + 16 + len);
    o += 16 + len;
    const udp = 14 + (frame[14] & 0x0f) * 4;
    const rtp = frame.subarray(udp + 8);
    out.push(rtp.subarray(12 + 4 * (rtp[0] & 0x0f)));
  }
  return out;
}

const HOST = '127.0.0.1';
const portMin = 26_000 + 2 * Math.floor(Math.random() * 2000);
const pool = new PortPool({ portMin, portMax: portMin + 20 });

describe('media against sipp', { skip: peersSkip(['sipp']) }, () => {
  let ep: SipEndpoint;
  /** The SDP bodies of the 200s we received, by Call-ID. */
  const answers = new Map<string, string>();
  before(async () => {
    ep = new SipEndpoint({
      host: HOST, port: 0,
      onMessage: (dir, msg) => {
        if (dir === 'in' && msg.kind === 'response' && msg.status === 200 && msg.body.length) answers.set(msg.headers.get('call-id')!, msg.body.toString());
      },
    });
    await ep.start();
  });
  after(async () => {
    await ep?.stop();
  });

  it('receives sipp\'s captured digit once and its PCMA audio sample for sample', { skip: pcapSkip() }, async () => {
    const sipp = await startSipp({ scenario: 'uas-media.xml', vars: { dtmf: DTMF_PCAP, audio: AUDIO_PCAP } });
    const session = await RtpSession.open({ host: HOST, pool, codec: { pt: 8, name: 'PCMA' }, receiveCodecs: [{ pt: 8, name: 'PCMA' }, { pt: 0, name: 'PCMU' }], telephoneEvent: 101 });
    try {
      const keys: string[] = [];
      const frames: Int16Array[] = [];
      session.on('dtmf', (k) => keys.push(k));
      session.on('audio', (f) => frames.push(f));
      const call = placeSipCall(ep, {
        target: 'media', from: 'callplane', route: { host: sipp.host, port: sipp.port }, ringTimeoutMs: 5000, maxDurationMs: 2500,
        sdp: buildOffer({ address: HOST, port: session.port }),
      });
      const r = await call;
      assert.equal(r.outcome, 'completed', JSON.stringify(r));
      const n = negotiateAudio(parseSdp(answers.get(r.callId)!)!)!;
      assert.deepEqual([n.codec.name, n.telephoneEvent?.pt], ['PCMA', 101]);

      assert.deepEqual(keys, ['1']);
      assert.ok(session.source, 'latched onto sipp');
      assert.equal(session.stats.invalid, 0);
      // ~2 s of the 30 ms capture, cut into 160-sample frames: a stretch of the capture's own samples.
      assert.ok(frames.length >= 50, `${frames.length} frames`);
      assert.ok(frames.every((f) => f.length === 160));
      const reference = alawmulaw.alaw.decode(Buffer.concat(rtpPayloads(AUDIO_PCAP)));
      const got = Int16Array.from(frames.flatMap((f) => [...f]));
      // The first packets of a new source are its probation, and the capture starts with silence:
      // what we got is the capture from one of its first packets on.
      const matchesFrom = (p: number) => got.every((s, i) => s === reference[p * 240 + i]);
      const start = [...Array(10).keys()].find(matchesFrom);
      assert.ok(start !== undefined, `not the capture from any of its first 10 packets: ${[...Array(10).keys()].map((p) => got.findIndex((s, i) => s !== reference[p * 240 + i])).join(', ')}`);
    } finally {
      await session.close();
      await sipp.stop();
    }
  });

  it('sends audio sipp echoes back (-rtp_echo), in order, to where its SDP said', async () => {
    const sipp = await startSipp({ extra: ['-rtp_echo'] });
    const session = await RtpSession.open({ host: HOST, pool, codec: { pt: 0, name: 'PCMU' }, telephoneEvent: 101 });
    try {
      const marks: number[] = [];
      session.on('audio', (f) => {
        const i = 0xff - (alawmulaw.mulaw.encodeSample(f[80]) & 0xff);
        if (i > 0) marks.push(i);
      });
      // What the worker will do: open the session, offer its port, and point it at the answer.
      let pointed = false;
      const call = placeSipCall(ep, {
        target: 'echo', from: 'callplane', route: { host: sipp.host, port: sipp.port }, ringTimeoutMs: 5000, maxDurationMs: 2500,
        sdp: buildOffer({ address: HOST, port: session.port }),
        onProgress: (e) => {
          if (e.phase !== 'answered') return;
          const [body] = [...answers.values()].slice(-1);
          const n = negotiateAudio(parseSdp(body)!)!;
          session.setRemote({ address: n.address, port: n.port, direction: n.direction });
          for (let i = 1; i <= 50; i++) session.send(new Int16Array(160).fill(alawmulaw.mulaw.decodeSample(0xff - i)));
          pointed = true;
        },
      });
      const r = await call;
      assert.equal(r.outcome, 'completed', JSON.stringify(r));
      assert.ok(pointed);
      await waitFor('the echo', () => marks.includes(50), 2000).catch(() => undefined);
      assert.ok(marks.length >= 45, `${marks.length} of 50 frames echoed`);
      assert.deepEqual(marks, [...marks].sort((a, b) => a - b));
      assert.equal(session.source?.ssrc, session.ssrc, 'our own stream, back');
    } finally {
      await session.close();
      await sipp.stop();
    }
  });
});
