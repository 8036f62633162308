// One call's media over UDP: G.711 audio both ways in 20 ms frames, RFC 4733 digits both ways,
// on a port from the pool. What goes out is paced by a timer; what comes in is checked
// (negotiated payload types, one source once latched), put back in order and decoded.
//
// Out: `send(pcm)` queues 8 kHz PCM16 of any length; every 20 ms the next frame is encoded and
// sent, with sequence numbers counting packets and the timestamp counting time, so both stay
// continuous across silence. With nothing queued we send G.711 silence (`silence: 'send'`, the
// default: it keeps NAT bindings and the far end's media timeout alive, and lets a NATed peer
// latch onto us) or nothing (`'suppress'`: the next packet is then marked as a talkspurt start).
// `clear()` drops everything not yet sent, so barge-in silences us within one frame.
// `sendDigits('12#')` sends telephone-events in place of audio (the queued audio waits for the
// last of them; the gaps between digits are silence).
//
// In: packets whose payload type is not negotiated are dropped. The first packets of an accepted
// type decide the source: a packet from the address and port the SDP named is taken at once, one
// from elsewhere (a peer behind NAT) after `latchPackets` in sequence from the same address, port
// and SSRC. From then on only that address, port and SSRC are accepted (a new SSRC from the same
// address, after the same number of packets in a row), and — symmetric RTP — we send to where
// the packets come from. Audio goes through the reorder buffer, is decoded, and comes out as
// `audio` events of 160 samples; digits as `dtmf` events, once per key press. No accepted packet
// for `mediaTimeoutMs` while the peer should be sending gives one `timeout` event.
import { EventEmitter } from 'node:events';
import crypto from 'node:crypto';
import type dgram from 'node:dgram';
import { decodeG711, encodeG711, g711Codec, g711Silence, type G711Codec } from './g711.ts';
import { DtmfReceiver, dtmfEventCode, encodeDtmf, type DtmfOptions, type DtmfPacket } from './dtmf.ts';
import { JitterBuffer } from './jitter-buffer.ts';
import { FRAME_MS, FRAME_SAMPLES } from './pcm.ts';
import type { BoundPort, PortPool } from './port-pool.ts';
import { buildRtp, parseRtp, seqDiff, type RtpPacket } from './rtp.ts';
import type { AudioBed } from './voice-transport.ts';

/** A payload type and the encoding it stands for (an SDP rtpmap: the sip/sdp.ts Codec fits). */
export interface PayloadFormat {
  pt: number;
  name: string;
}

/** Where the peer wants our RTP, from its SDP. */
export interface RtpRemote {
  address: string;
  port: number;
  /** The peer's SDP direction: sendonly or inactive means it takes no audio, recvonly or inactive that it sends none. */
  direction?: 'sendrecv' | 'sendonly' | 'recvonly' | 'inactive';
}

export interface RtpSessionOptions {
  /** The local address to bind (the SIP endpoint's). */
  host: string;
  pool: PortPool;
  /** The codec we send: PCMU or PCMA, from the negotiation. */
  codec: PayloadFormat;
  /** Audio codecs we accept from the peer (default: the codec we send). Others than G.711 are ignored. */
  receiveCodecs?: readonly PayloadFormat[];
  /** telephone-event's payload type, both ways; null or absent: digits can be neither sent nor received. */
  telephoneEvent?: number | null;
  /** Where to send; may come later (`setRemote`, once the answer arrives). */
  remote?: RtpRemote;
  /** Send to where the peer's packets come from once latched (default true). */
  symmetric?: boolean;
  /** Packets in sequence from one source before latching onto an address the SDP did not name (default 2). */
  latchPackets?: number;
  /** Packets that may wait behind a missing one (default 4, i.e. 80 ms). */
  jitterDepth?: number;
  /** No packet from the peer this long → `timeout` (default 30000; 0 never). */
  mediaTimeoutMs?: number;
  /** With nothing to say: send G.711 silence (default) or nothing. */
  silence?: 'send' | 'suppress';
  /** How digits are sent (duration, volume). */
  dtmf?: DtmfOptions;
  /** Gap between two digits, ms (default 60). */
  dtmfGapMs?: number;
  /** Our SSRC (default random). */
  ssrc?: number;
  /** Errors of listeners and of the socket: they never reach the socket's handlers. */
  onError?: (err: unknown) => void;
}

export interface RtpSessionEvents {
  /** 20 ms of the peer's audio: 160 samples, 8 kHz PCM16. */
  audio: [frame: Int16Array];
  /** A key the peer pressed ('0'-'9', '*', '#', 'A'-'D'), once per press. */
  dtmf: [key: string];
  /** Nothing accepted from the peer for mediaTimeoutMs. */
  timeout: [];
  /** The source we now accept packets from (and, symmetric, send to). */
  latched: [source: { address: string; port: number; ssrc: number }];
  /** The queued audio has all been sent. */
  drained: [];
  /**
   * What went out in one 20 ms slot of audio, as PCM16 (the queued audio with the background
   * mixed in, or silence): for recordings. Emitted only while someone listens.
   */
  sent: [frame: Int16Array];
}

export interface RtpSessionStats {
  packetsSent: number;
  packetsReceived: number;
  /** Not RTP, or malformed. */
  invalid: number;
  /** RTP, but not a negotiated payload type, or not from the latched source and SSRC. */
  rejected: number;
  /** From the reorder buffer: late, duplicate, lost. */
  late: number;
  duplicate: number;
  lost: number;
  sendErrors: number;
}

const MAX_CATCH_UP = 5;

/** Two frames summed, clipped to 16 bits. */
function mix(a: Int16Array, b: Int16Array): Int16Array {
  const out = new Int16Array(FRAME_SAMPLES);
  for (let i = 0; i < FRAME_SAMPLES; i++) out[i] = Math.max(-32768, Math.min(32767, (a[i] ?? 0) + (b[i] ?? 0)));
  return out;
}

interface Source { address: string; port: number; ssrc: number }
interface Candidate extends Source { count: number; lastSeq: number }
interface Arrived { pt: number; payload: Buffer }
interface OutgoingEvent { packets: DtmfPacket[]; next: number; timestamp: number }

export class RtpSession extends EventEmitter<RtpSessionEvents> {
  readonly port: number;
  readonly ssrc: number;
  readonly stats: RtpSessionStats = { packetsSent: 0, packetsReceived: 0, invalid: 0, rejected: 0, late: 0, duplicate: 0, lost: 0, sendErrors: 0 };

  private readonly socket: dgram.Socket;
  private readonly bound: BoundPort;
  private o: RtpSessionOptions;
  private sendCodec: G711Codec;
  private sendPt: number;
  private readonly receive = new Map<number, G711Codec>();
  private remote: RtpRemote | undefined;
  /** Where packets go: the SDP's address, or the latched source's (symmetric). */
  private dest: { address: string; port: number } | undefined;

  // Sending.
  private seq: number;
  private timestamp: number;
  private needMarker = true;
  private queue: Int16Array[] = [];
  private partial: Int16Array | undefined;
  private digits: string[] = [];
  private event: OutgoingEvent | undefined;
  private gapSlots = 0;
  private started = performance.now();
  private slots = 0;
  private timer: NodeJS.Timeout | undefined;
  private bed: AudioBed | undefined;
  /** The last slot that carried queued audio (a talkspurt goes on while the next slot does too). */
  private lastAudioSlot = -2;

  // Receiving.
  private latched: Source | undefined;
  private candidate: Candidate | undefined;
  private readonly jitter: JitterBuffer<Arrived>;
  private dtmf = new DtmfReceiver();
  private incoming: Int16Array = new Int16Array(0);
  private lastHeard = performance.now();
  private timedOut = false;
  private closed: Promise<void> | undefined;

  /** Binds a port of the pool and starts the clock. */
  static async open(o: RtpSessionOptions): Promise<RtpSession> {
    const codec = g711Codec(o.codec.name);
    if (!codec) throw new RangeError(`codec ${o.codec.name} is not PCMU or PCMA`);
    const bound = await o.pool.bind(o.host);
    return new RtpSession(o, bound, codec);
  }

  private constructor(o: RtpSessionOptions, bound: BoundPort, codec: G711Codec) {
    super();
    this.o = o;
    this.bound = bound;
    this.socket = bound.socket;
    this.port = bound.port;
    this.sendCodec = codec;
    this.sendPt = o.codec.pt;
    for (const c of o.receiveCodecs ?? [o.codec]) {
      const g = g711Codec(c.name);
      if (g && c.pt !== o.telephoneEvent) this.receive.set(c.pt, g);
    }
    this.receive.set(o.codec.pt, codec);
    this.ssrc = o.ssrc ?? crypto.randomInt(0, 2 ** 32);
    this.seq = crypto.randomInt(0, 2 ** 16);
    this.timestamp = crypto.randomInt(0, 2 ** 32);
    const depth = o.jitterDepth ?? 4;
    this.jitter = new JitterBuffer({ depth, maxWaitMs: depth * FRAME_MS });
    if (o.remote) this.setRemote(o.remote);
    this.socket.on('message', (buf, rinfo) => this.onPacket(buf, rinfo));
    this.socket.on('error', (err) => this.report(err));
    this.schedule();
  }

  /**
   * The outcome of offer/answer when it came after the port was bound (we offered; the answer
   * chose): the codec we send, what we accept, telephone-event's payload type, and where to send.
   */
  negotiated(n: { codec: PayloadFormat; receiveCodecs?: readonly PayloadFormat[]; telephoneEvent?: number | null; remote: RtpRemote }): void {
    const codec = g711Codec(n.codec.name);
    if (!codec) throw new RangeError(`codec ${n.codec.name} is not PCMU or PCMA`);
    this.o = { ...this.o, codec: n.codec, receiveCodecs: n.receiveCodecs, telephoneEvent: n.telephoneEvent };
    this.sendCodec = codec;
    this.sendPt = n.codec.pt;
    this.receive.clear();
    for (const c of n.receiveCodecs ?? [n.codec]) {
      const g = g711Codec(c.name);
      if (g && c.pt !== n.telephoneEvent) this.receive.set(c.pt, g);
    }
    this.receive.set(n.codec.pt, codec);
    this.setRemote(n.remote);
  }

  /** The peer's address (the answer arrived, or a re-INVITE moved the media): forgets the latched source. */
  setRemote(remote: RtpRemote): void {
    this.remote = { ...remote };
    this.dest = { address: remote.address, port: remote.port };
    this.latched = undefined;
    this.candidate = undefined;
    this.jitter.reset();
    this.lastHeard = performance.now();
    this.timedOut = false;
  }

  /** Where we send to now (the SDP's address, or the latched source). */
  get destination(): { address: string; port: number } | undefined {
    return this.dest ? { ...this.dest } : undefined;
  }

  /** Where we accept packets from, once latched. */
  get source(): Source | undefined {
    return this.latched ? { ...this.latched } : undefined;
  }

  /** Samples queued and not sent yet. */
  get queuedSamples(): number {
    return this.queue.length * FRAME_SAMPLES + (this.partial?.length ?? 0);
  }

  /** Queues 8 kHz PCM16 to send after what is queued (a trailing part-frame is padded with silence when nothing follows it in time). */
  send(pcm: Int16Array): void {
    if (this.closed || pcm.length === 0) return;
    // The start of a talkspurt goes out now rather than at the next 20 ms slot (up to a frame
    // sooner): the clock is moved so that this moment is a slot, and the frame is marked.
    const idle = this.queue.length === 0 && !this.partial && !this.event && this.digits.length === 0 && this.gapSlots === 0
      && this.slots - this.lastAudioSlot > 1;
    let samples = pcm;
    if (this.partial) {
      samples = new Int16Array(this.partial.length + pcm.length);
      samples.set(this.partial);
      samples.set(pcm, this.partial.length);
      this.partial = undefined;
    }
    let i = 0;
    for (; i + FRAME_SAMPLES <= samples.length; i += FRAME_SAMPLES) this.queue.push(samples.slice(i, i + FRAME_SAMPLES));
    if (i < samples.length) this.partial = samples.slice(i);
    if (idle && this.queue.length > 0 && this.dest) this.startTalkspurt();
  }

  /** Sends the first queued frame now and keeps slots 20 ms apart from here on. */
  private startTalkspurt(): void {
    clearTimeout(this.timer);
    this.started = performance.now() - this.slots * FRAME_MS;
    this.needMarker = true;
    this.tick();
  }

  /** Drops every queued sample not yet sent (barge-in); returns how many were dropped. */
  clear(): number {
    const dropped = this.queuedSamples;
    this.queue = [];
    this.partial = undefined;
    return dropped;
  }

  /** Mixes `bed` under everything sent from now on (in place of silence when nothing is queued); null stops it. */
  setBed(bed: AudioBed | null): void {
    this.bed = bed ?? undefined;
  }

  /** Queues keys to send as telephone-events. Throws when one is not a key or telephone-event was not negotiated. */
  sendDigits(keys: string): void {
    if (this.o.telephoneEvent === undefined || this.o.telephoneEvent === null) throw new Error('the far end did not accept telephone-event');
    const list = [...keys];
    const bad = list.find((k) => dtmfEventCode(k) === null);
    if (bad !== undefined) throw new RangeError(`'${bad}' is not a DTMF key (0-9, *, #, A-D)`);
    this.digits.push(...list);
  }

  /** Stops the clock, closes the socket and gives the port back. */
  close(): Promise<void> {
    if (!this.closed) {
      clearTimeout(this.timer);
      this.queue = [];
      this.partial = undefined;
      this.digits = [];
      this.closed = this.bound.release();
    }
    return this.closed;
  }

  // ------------------------------------------------------------------------------------------
  // The clock: one slot per 20 ms, caught up when the event loop was late.

  private schedule(): void {
    if (this.closed) return;
    const due = this.started + this.slots * FRAME_MS;
    this.timer = setTimeout(() => this.tick(), Math.max(0, due - performance.now()));
  }

  private tick(): void {
    if (this.closed) return;
    const now = performance.now();
    let pending = Math.floor((now - this.started) / FRAME_MS) + 1 - this.slots;
    if (pending > MAX_CATCH_UP) {
      // Far behind (a stalled event loop): let the missed time pass unsent rather than burst it.
      const skipped = pending - MAX_CATCH_UP;
      this.timestamp = (this.timestamp + skipped * FRAME_SAMPLES) >>> 0;
      this.slots += skipped;
      this.needMarker = true;
      pending = MAX_CATCH_UP;
    }
    for (let i = 0; i < pending && !this.closed; i++) {
      this.slot();
      this.slots++;
    }
    for (const a of this.jitter.poll()) this.deliver(a);
    this.syncJitterStats();
    this.checkTimeout(now);
    this.schedule();
  }

  /** One 20 ms slot: a telephone-event packet, an audio frame, silence, or nothing. */
  private slot(): void {
    const canSend = this.dest !== undefined && this.remote?.direction !== 'sendonly' && this.remote?.direction !== 'inactive';
    if (canSend) {
      if (!this.event && this.gapSlots === 0 && this.digits.length > 0) {
        const packets = encodeDtmf(this.digits.shift()!, { ...this.o.dtmf, packetMs: FRAME_MS });
        this.event = { packets, next: 0, timestamp: this.timestamp };
      }
      if (this.event) {
        const p = this.event.packets[this.event.next++];
        this.transmit(this.o.telephoneEvent!, p.marker, this.event.timestamp, p.payload);
        if (this.event.next >= this.event.packets.length) {
          this.event = undefined;
          this.gapSlots = Math.max(1, Math.round((this.o.dtmfGapMs ?? 60) / FRAME_MS));
          this.needMarker = true;
        }
      } else {
        if (this.gapSlots > 0) this.gapSlots--;
        // Between two digits only silence: queued audio waits until the last digit is out.
        let frame = this.digits.length > 0 ? undefined : this.queue.shift();
        if (!frame && this.partial && this.digits.length === 0) {
          frame = new Int16Array(FRAME_SAMPLES);
          frame.set(this.partial);
          this.partial = undefined;
        }
        const under = this.bed?.next() ?? null;
        if (under === null && this.bed) this.bed = undefined;
        const drained = frame !== undefined && this.queue.length === 0 && !this.partial;
        if (frame) this.lastAudioSlot = this.slots;
        if (under) frame = frame ? mix(frame, under) : under;
        if (frame) {
          this.transmit(this.sendPt, this.needMarker, this.timestamp, encodeG711(this.sendCodec, frame));
          this.needMarker = false;
          if (this.listenerCount('sent') > 0) this.emitSafely('sent', frame);
          if (drained) this.emitSafely('drained');
        } else if ((this.o.silence ?? 'send') === 'send') {
          this.transmit(this.sendPt, this.needMarker, this.timestamp, Buffer.alloc(FRAME_SAMPLES, g711Silence(this.sendCodec)));
          this.needMarker = false;
          if (this.listenerCount('sent') > 0) this.emitSafely('sent', new Int16Array(FRAME_SAMPLES));
        } else {
          this.needMarker = true;
          if (this.listenerCount('sent') > 0) this.emitSafely('sent', new Int16Array(FRAME_SAMPLES));
        }
      }
    } else {
      this.needMarker = true;
    }
    this.timestamp = (this.timestamp + FRAME_SAMPLES) >>> 0;
  }

  private transmit(pt: number, marker: boolean, timestamp: number, payload: Buffer): void {
    const dest = this.dest!;
    const packet = buildRtp({ marker, payloadType: pt, sequence: this.seq, timestamp, ssrc: this.ssrc, csrc: [], payload });
    this.seq = (this.seq + 1) & 0xffff;
    this.stats.packetsSent++;
    this.socket.send(packet, dest.port, dest.address, (err) => {
      if (err) {
        this.stats.sendErrors++;
        this.report(err);
      }
    });
  }

  // ------------------------------------------------------------------------------------------
  // Receiving.

  private onPacket(buf: Buffer, rinfo: dgram.RemoteInfo): void {
    if (this.closed) return;
    this.stats.packetsReceived++;
    const p = parseRtp(buf);
    if (!p) {
      this.stats.invalid++;
      return;
    }
    const isEvent = this.o.telephoneEvent !== undefined && this.o.telephoneEvent !== null && p.payloadType === this.o.telephoneEvent;
    if (!isEvent && !this.receive.has(p.payloadType)) {
      this.stats.rejected++;
      return;
    }
    if (!this.admit(p, rinfo)) {
      this.stats.rejected++;
      return;
    }
    this.lastHeard = performance.now();
    this.timedOut = false;
    if (isEvent) {
      const key = this.dtmf.push(p);
      if (key) this.emitSafely('dtmf', key);
      return;
    }
    for (const a of this.jitter.push(p.sequence, { pt: p.payloadType, payload: p.payload })) this.deliver(a);
    this.syncJitterStats();
  }

  private syncJitterStats(): void {
    this.stats.late = this.jitter.stats.late;
    this.stats.duplicate = this.jitter.stats.duplicate;
    this.stats.lost = this.jitter.stats.lost;
  }

  /** Whether a packet comes from the source we latched onto (latching onto it when it is time). */
  private admit(p: RtpPacket, rinfo: dgram.RemoteInfo): boolean {
    const need = Math.max(1, this.o.latchPackets ?? 2);
    const l = this.latched;
    if (l) {
      if (rinfo.address !== l.address || rinfo.port !== l.port) return false;
      if (p.ssrc === l.ssrc) {
        this.candidate = undefined;
        return true;
      }
      // A new SSRC from the same place (the peer's PBX bridged another leg): after `need` in a row.
      if (!this.probation(p, rinfo, need)) return false;
      this.latch({ address: l.address, port: l.port, ssrc: p.ssrc });
      return true;
    }
    const named = this.remote !== undefined && rinfo.address === this.remote.address && rinfo.port === this.remote.port;
    if (!named && !this.probation(p, rinfo, need)) return false;
    this.latch({ address: rinfo.address, port: rinfo.port, ssrc: p.ssrc });
    return true;
  }

  /** Counts packets in sequence from one address, port and SSRC; true once there are `need` of them. */
  private probation(p: RtpPacket, rinfo: dgram.RemoteInfo, need: number): boolean {
    const c = this.candidate;
    if (c && c.address === rinfo.address && c.port === rinfo.port && c.ssrc === p.ssrc && seqDiff(p.sequence, c.lastSeq) === 1) {
      c.count++;
      c.lastSeq = p.sequence;
    } else {
      this.candidate = { address: rinfo.address, port: rinfo.port, ssrc: p.ssrc, count: 1, lastSeq: p.sequence };
    }
    return this.candidate!.count >= need;
  }

  private latch(source: Source): void {
    const moved = this.latched?.ssrc !== source.ssrc;
    this.latched = source;
    this.candidate = undefined;
    if (moved) {
      this.jitter.reset();
      this.dtmf = new DtmfReceiver();
    }
    if (this.o.symmetric ?? true) this.dest = { address: source.address, port: source.port };
    this.emitSafely('latched', { ...source });
  }

  /** Decodes a packet's audio and hands it out in 160-sample frames. */
  private deliver(a: Arrived): void {
    const codec = this.receive.get(a.pt);
    if (!codec || a.payload.length === 0) return;
    const pcm = decodeG711(codec, a.payload);
    let samples = pcm;
    if (this.incoming.length) {
      samples = new Int16Array(this.incoming.length + pcm.length);
      samples.set(this.incoming);
      samples.set(pcm, this.incoming.length);
    }
    let i = 0;
    for (; i + FRAME_SAMPLES <= samples.length; i += FRAME_SAMPLES) this.emitSafely('audio', samples.slice(i, i + FRAME_SAMPLES));
    this.incoming = samples.slice(i);
  }

  private checkTimeout(now: number): void {
    const limit = this.o.mediaTimeoutMs ?? 30_000;
    const expecting = this.remote !== undefined && this.remote.direction !== 'recvonly' && this.remote.direction !== 'inactive';
    if (!limit || !expecting || this.timedOut) return;
    if (now - this.lastHeard >= limit) {
      this.timedOut = true;
      this.emitSafely('timeout');
    }
  }

  private emitSafely<K extends keyof RtpSessionEvents>(event: K, ...args: RtpSessionEvents[K]): void {
    try {
      (this.emit as (e: K, ...a: RtpSessionEvents[K]) => boolean)(event, ...args);
    } catch (err) {
      this.report(err);
    }
  }

  private report(err: unknown): void {
    try { this.o.onError?.(err); } catch { /* nowhere further to report */ }
  }
}
