// What a voice session needs from whatever carries a call's audio (SIP/RTP, Twilio Media
// Streams), and nothing else: audio, digits and hang-up in; audio, clear, digits, transfer and
// hang-up out (DESIGN §11). Audio is PCM16 mono at 8 kHz; the transport converts to its codec
// (μ-law, A-law) and paces it (20 ms frames).
import type { EventEmitter } from 'node:events';

export interface VoiceTransportEvents {
  /** A frame of the caller's audio (FRAME_SAMPLES of src/media/pcm.ts: 160 samples, 8 kHz). */
  audio: [frame: Int16Array];
  /** A key the caller pressed (0-9, *, #, A-D). */
  dtmf: [digit: string];
  /** Audio queued with a mark has been played out to the caller (Twilio `mark`, or sent over RTP). */
  played: [mark: string];
  /** The call ended (the far end hung up, the media timed out, the transport failed). */
  ended: [reason: string];
  /**
   * The agent's side as it went out, 20 ms at a time (silence included), where the transport
   * knows it (RTP): what a recording's agent channel holds.
   */
  sent: [frame: Int16Array];
}

export interface TransferOptions {
  /** An attended transfer: what the destination hears before it is joined to the caller. */
  announce?: Int16Array;
  /** The destination's name (for transports that announce with the carrier's own speech: Twilio). */
  name?: string;
}

/** Audio mixed under the agent's voice (background audio): the next 160 samples (8 kHz), or null when it is over. */
export interface AudioBed {
  next(): Int16Array | null;
}

export interface VoiceTransport extends EventEmitter<VoiceTransportEvents> {
  /** Who carries the call, for records and logs: `sip`, `twilio-media-stream`. */
  readonly kind: string;
  /**
   * Queues the agent's audio (any length; PCM16, 8 kHz). It is played in order after what is
   * queued, paced in real time. `mark` is emitted as `played` once the last sample went out.
   */
  play(pcm: Int16Array, mark?: string): void;
  /** Drops everything queued and not yet played (barge-in); the samples dropped. Output stops within one frame. */
  clear(): number;
  /** Sends keypresses to the far end (RFC 4733 over RTP, or the carrier's API). */
  sendDigits(digits: string): Promise<void>;
  /**
   * Hands the call to `destination` (E.164, an ext:/pbx: extension, or a SIP URI where the
   * transport allows) and leaves it; rejects when the destination did not take it (the call goes
   * on). With `announce` (attendedTransfers), the transport first calls the destination itself,
   * plays it `announce` (8 kHz PCM16), and then joins the two calls, where it can (else blind).
   */
  transfer(destination: string, opts?: TransferOptions): Promise<void>;
  /** Ends the call from our side. */
  hangup(reason?: string): Promise<void>;
  /** Mixes `bed` under everything played from now on (null stops it); absent where the transport cannot. */
  background?(bed: AudioBed | null): void;
}

/** A call about to be answered (or placed) by an agent, its first words ready. */
export interface PreparedVoiceCall {
  /** The call is up: the agent's session runs over `transport` until the call ends. */
  start(transport: VoiceTransport, call: { callId: string }): {
    readonly done: Promise<void>;
    /** Who answered an outbound call, once its voicemail screen decided (`human`, `machine`, `unknown`). */
    answeredBy?(): string | undefined;
  };
  /** An inbound call's ringing before it is answered, ms (preAnswerRingTime); absent for none. */
  ringMs?: number;
}

/** An inbound call the agent runtime refuses before answering: the SIP final response, and why (for the log). */
export interface InboundRefusal {
  refuse: { status: number; reason: string; why: string };
}

/** An inbound call admitted for an organization: who it is for and who is calling. */
export interface InboundVoiceCall {
  orgId: number;
  /** The called user part or number (Request-URI, else To). */
  callee: string;
  /** The caller (From's user part or number, else its URI) and display name. */
  caller: string;
  callerName?: string;
  /**
   * The caller ID is vouched for: the call came through a registration of the organization's or a
   * trunk it whitelisted. Left out: not verified.
   */
  callerVerified?: boolean;
}

/**
 * Who talks on calls whose audio we carry ourselves (SIP): the agent runtime
 * (src/modules/voice/sip-calls.ts), handed to the SIP side by the composition root.
 */
export interface VoiceCalls {
  /**
   * The agent an inbound call is addressed to, ready to talk; null when the organization has none;
   * a refusal for a callee that is a number the organization does not hold, or a caller the
   * agent's CNAM rule rejects.
   */
  inbound(call: InboundVoiceCall): Promise<PreparedVoiceCall | InboundRefusal | null>;
  /** A call task's agent, ready to talk on the call about to be placed; null when it is gone. */
  outbound(call: {
    taskId: string; orgId: number; agentId: number; to: string; greeting?: string; waitToGreet?: boolean;
    /** What the call does when a voicemail answers (the call policy's plan); absent: nothing is screened. */
    voicemail?: { action: 'hangup' | 'leave-message' | 'continue'; message: string | null; holdGreeting: boolean };
  }): Promise<PreparedVoiceCall | null>;
  /** Calls of this process whose agent is talking now (what a stopping worker waits for). */
  readonly active?: number;
  /**
   * The process is stopping and the drain time has passed: every call in progress ends politely
   * (the agent's closing line, then a hang-up). Resolves when they have all ended.
   */
  wrapUpAll?(): Promise<void>;
}
