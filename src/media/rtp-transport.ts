// A VoiceTransport over one call's RtpSession (SIP): the caller's frames, digits and a dead media
// stream in; the agent's audio (with marks emitted once it has really been sent), clear,
// RFC 4733 digits out. Transfer and hang-up belong to whoever owns the SIP dialog (REFER, BYE),
// which hands them in as callbacks.
import { EventEmitter } from 'node:events';
import { FRAME_MS } from './pcm.ts';
import type { RtpSession } from './rtp-session.ts';
import type { AudioBed, TransferOptions, VoiceTransport, VoiceTransportEvents } from './voice-transport.ts';

export interface RtpTransportOptions {
  /**
   * Hands the call to `destination` (a SIP REFER by the dialog's owner, or with `announce` an
   * attended transfer). `'bridged'`: the owner joined this call's media to another call, so the
   * session stays open for it.
   */
  transfer(destination: string, opts: TransferOptions): Promise<'bridged' | void>;
  /** Ends the call (a BYE by the dialog's owner). */
  hangup(reason: string): Promise<void>;
}

interface Pending {
  mark: string;
  /** The mark is reached once this many samples (counted since the session opened) have been sent. */
  at: number;
}

export class RtpTransport extends EventEmitter<VoiceTransportEvents> implements VoiceTransport {
  readonly kind = 'sip';
  /** Samples handed to the session since it opened (cleared ones included). */
  private queued = 0;
  /** Samples dropped by clear(). */
  private dropped = 0;
  private marks: Pending[] = [];
  private timer: NodeJS.Timeout | undefined;
  private done = false;

  constructor(private readonly session: RtpSession, private readonly o: RtpTransportOptions) {
    super();
    session.on('audio', this.onAudio);
    session.on('dtmf', this.onDtmf);
    session.on('timeout', this.onTimeout);
    session.on('drained', this.onDrained);
    session.on('sent', this.onSent);
  }

  private readonly onAudio = (frame: Int16Array) => { this.emit('audio', frame); };
  private readonly onDtmf = (key: string) => { this.emit('dtmf', key); };
  private readonly onTimeout = () => { this.end('no media from the far end'); };
  private readonly onDrained = () => { this.checkMarks(); };
  private readonly onSent = (frame: Int16Array) => { if (this.listenerCount('sent') > 0) this.emit('sent', frame); };

  background(bed: AudioBed | null): void {
    this.session.setBed(bed);
  }

  /** Samples the session has really sent (queued, less what is still queued or was dropped). */
  private get sent(): number {
    return this.queued - this.dropped - this.session.queuedSamples;
  }

  private checkMarks(): void {
    const sent = this.sent;
    while (this.marks.length > 0 && this.marks[0]!.at <= sent) this.emit('played', this.marks.shift()!.mark);
    if (this.marks.length === 0 && this.timer) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }

  play(pcm: Int16Array, mark?: string): void {
    if (this.done) return;
    this.session.send(pcm);
    this.queued += pcm.length;
    if (mark === undefined) return;
    this.marks.push({ mark, at: this.queued - this.dropped });
    // Marks are checked every frame while any is pending (the session reports only when it has drained).
    this.timer ??= setInterval(() => this.checkMarks(), FRAME_MS);
  }

  clear(): number {
    const n = this.session.clear();
    this.dropped += n;
    // Marks of audio that will never be played are dropped with it, unplayed.
    const sent = this.sent;
    this.marks = this.marks.filter((m) => m.at <= sent);
    this.checkMarks();
    return n;
  }

  sendDigits(digits: string): Promise<void> {
    this.session.sendDigits(digits);
    return Promise.resolve();
  }

  async transfer(destination: string, opts: TransferOptions = {}): Promise<void> {
    const how = await this.o.transfer(destination, opts);
    this.end('transferred', { keepMedia: how === 'bridged' });
  }

  async hangup(reason = 'hung up by the agent'): Promise<void> {
    if (this.done) return;
    await this.o.hangup(reason);
    this.end(reason);
  }

  /**
   * The far end hung up (the dialog's owner saw a BYE), or the media died: once. With
   * `keepMedia` the RTP session stays open (a bridge took it over) and this transport lets go of it.
   */
  end(reason: string, opts: { keepMedia?: boolean } = {}): void {
    if (this.done) return;
    this.done = true;
    clearInterval(this.timer);
    this.timer = undefined;
    this.marks = [];
    if (opts.keepMedia) {
      this.session.setBed(null);
      this.session.off('audio', this.onAudio).off('dtmf', this.onDtmf).off('timeout', this.onTimeout).off('drained', this.onDrained).off('sent', this.onSent);
    } else {
      void this.session.close();
    }
    this.emit('ended', reason);
  }
}
