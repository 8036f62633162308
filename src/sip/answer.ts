// Inbound calls over SIP as the UAS (RFC 3261 §13.3, RFC 3264): the mirror of placeSipCall
// (call.ts). The application decides whether an INVITE is taken at all (admission, who answers);
// this file carries the call from there: 100 Trying, the offer read (488 when no codec is in
// common; an INVITE without SDP is a late offer, answered in its ACK), ringing (180) for as long as
// asked, ended early by a CANCEL, an RTP port of the pool (503 when none is free), the 200 OK with
// our SDP, and the dialog until either side ends it or the maximum duration passes: ACK, BYE,
// re-INVITE (same codec, perhaps a new address) and NOTIFY (a REFER's progress) from the far end;
// BYE and REFER from us. Media belongs to the application once the call is answered: the
// RtpSession is handed over open and it closes it (or a transfer's bridge takes it).
import type { PortPool } from '../media/port-pool.ts';
import { RtpSession } from '../media/rtp-session.ts';
import { SipDialog, type CallControls, type TransferOutcome } from './dialog.ts';
import { bracket, newTag, type RequestContext, type SipEndpoint } from './endpoint.ts';
import { parseNameAddr, parseUri, type SipRequest } from './message.ts';
import { buildAnswer, buildOffer, negotiateAudio, OFFER_CODECS, parseSdp, rtpParams, type AudioNegotiation } from './sdp.ts';

export interface AnswerOptions {
  /** The RTP ports of the process. */
  ports: PortPool;
  /** No RTP from the far end this long: the RtpSession's `timeout` (default 30 s). */
  mediaTimeoutMs?: number;
  /** How long an answered call is held before we send BYE. */
  maxDurationMs: number;
}

/** A final response we sent instead of answering, and why (for the application's log). */
export interface Refusal {
  status: number;
  reason: string;
  why: string;
}

/** An inbound call we answered, until either side ends it or its maximum duration passes. */
export interface AnsweredSipCall extends CallControls {
  readonly callId: string;
  /** The call's media, on the codec the offer (or the ACK's late answer) chose. */
  readonly rtp: RtpSession;
  /** Where the INVITE came from (`host:port`): the far end a transfer destination that is no SIP URI is referred to. */
  readonly peer: string;
  /** Settles as the call ends, with who ended it (before our BYE has its answer). */
  readonly ended: Promise<'local' | 'remote'>;
  /** Ends the call from our side (BYE); settles once the BYE is answered (or given up). */
  hangup(): Promise<void>;
  /** A blind transfer: REFER the far end to `referTo` (a SIP URI); on success the call is ended (BYE). */
  refer(referTo: string): Promise<TransferOutcome>;
}

/** What a CANCEL before the answer amounts to: the endpoint answered the INVITE 487 for us. */
const CANCELED: Refusal = { status: 487, reason: 'Request Terminated', why: 'the caller cancelled it (CANCEL) before it was answered' };

const toTag = (req: SipRequest): string | undefined => {
  try { return parseNameAddr(req.headers.get('to') ?? '').params.tag ?? undefined; } catch { return undefined; }
};

/**
 * The inbound calls of one SIP endpoint's application: the INVITEs on their way to an answer (by
 * Call-ID, which a CANCEL names) and the calls answered, until each ends.
 */
export class SipAnswering {
  readonly #waiting = new Map<string, IncomingCall>();
  readonly #calls = new Set<AnsweredSipCall>();

  /**
   * An INVITE outside our dialogs that the application takes: `100 Trying`, and the offer read.
   * Refused here (the response sent): a re-INVITE for a dialog we do not have (481, RFC 3261
   * §12.2.2), and an offer with no codec in common (488).
   */
  receive(endpoint: SipEndpoint, req: SipRequest, ctx: RequestContext): IncomingCall | Refusal {
    if (toTag(req) !== undefined) {
      endpoint.respond(req, ctx, 481, 'Call/Transaction Does Not Exist');
      return { status: 481, reason: 'Call/Transaction Does Not Exist', why: 'a re-INVITE for a dialog we do not have' };
    }
    endpoint.respond(req, ctx, 100, 'Trying');
    const offer = req.body.length > 0 ? parseSdp(req.body.toString('utf8')) : null;
    const negotiated = offer ? negotiateAudio(offer) : null;
    if (offer && !negotiated) {
      endpoint.respond(req, ctx, 488, 'Not Acceptable Here');
      return { status: 488, reason: 'Not Acceptable Here', why: 'no audio codec in common (we take PCMU and PCMA)' };
    }
    const callId = req.headers.get('call-id')!;
    const call = new IncomingCall(endpoint, req, ctx, negotiated, {
      settled: () => { if (this.#waiting.get(callId) === call) this.#waiting.delete(callId); },
      answered: (answered) => {
        this.#calls.add(answered);
        void answered.ended.then(() => this.#calls.delete(answered));
      },
    });
    this.#waiting.set(callId, call);
    return call;
  }

  /**
   * A CANCEL outside our dialogs, which the endpoint has answered (200, and 487 for the INVITE
   * still unanswered): the call it names is not answered. Nothing more is sent for it.
   */
  cancel(req: SipRequest): void {
    this.#waiting.get(req.headers.get('call-id') ?? '')?.cancel();
  }

  /** Ends every answered call from our side (BYE), each settled once its BYE is answered. */
  async hangupAll(): Promise<void> {
    await Promise.allSettled([...this.#calls].map((c) => c.hangup()));
  }
}

/**
 * An INVITE the application takes, until it is answered, refused or cancelled
 * (SipAnswering.receive). Every outcome that is not an answer is a `Refusal` saying what the
 * caller was sent: a CANCEL's 487 included.
 */
export class IncomingCall {
  readonly callId: string;
  #settled = false;
  #canceled = false;
  #wake: (() => void) | undefined;

  constructor(
    private readonly endpoint: SipEndpoint,
    readonly req: SipRequest,
    private readonly ctx: RequestContext,
    /** The offer's outcome; null for a late offer (no SDP in the INVITE). */
    private readonly negotiated: AudioNegotiation | null,
    private readonly on: { settled(): void; answered(call: AnsweredSipCall): void },
  ) {
    this.callId = req.headers.get('call-id')!;
  }

  /** A CANCEL came: the endpoint answered 487 for the INVITE, and this call is not answered. */
  cancel(): void {
    this.#canceled = true;
    this.#settle();
    this.#wake?.();
  }

  #settle(): void {
    if (this.#settled) return;
    this.#settled = true;
    this.on.settled();
  }

  /** Refuses with a final response other than 200 (none when a CANCEL came first: that 487 is the answer). */
  refuse(r: Refusal): Refusal {
    if (this.#canceled) return CANCELED;
    this.#settle();
    this.endpoint.respond(this.req, this.ctx, r.status, r.reason);
    return r;
  }

  /** `180 Ringing`, then `ms` of it; over at once when a CANCEL comes (answer() then says so). */
  async ring(ms: number): Promise<void> {
    if (this.#canceled) return;
    this.endpoint.respond(this.req, this.ctx, 180, 'Ringing');
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      timer.unref();
      this.#wake = () => { clearTimeout(timer); resolve(); };
    });
    this.#wake = undefined;
  }

  /**
   * Answers: an RTP port of the pool opened on the offer's codec (or, for a late offer, on ours,
   * set to the ACK's answer when it comes), the maximum duration's timer, and 200 OK with our SDP.
   * No port free: 503. A CANCEL came first: nothing is sent (the endpoint's 487 was the answer).
   */
  async answer(o: AnswerOptions): Promise<AnsweredSipCall | Refusal> {
    const { endpoint, req, ctx, negotiated } = this;
    if (this.#canceled) return CANCELED;
    let rtp: RtpSession;
    try {
      rtp = await RtpSession.open({
        host: endpoint.host, pool: o.ports, mediaTimeoutMs: o.mediaTimeoutMs,
        ...(negotiated ? rtpParams(negotiated) : { codec: OFFER_CODECS[0]!, telephoneEvent: OFFER_CODECS[2]!.pt }),
      });
    } catch (err) {
      return this.refuse({ status: 503, reason: 'Service Unavailable', why: `no RTP port: ${(err as Error).message}` });
    }
    if (this.#canceled) {
      await rtp.close();
      return CANCELED;
    }
    this.#settle();
    const adv = endpoint.advertised;
    const sdp = negotiated ? buildAnswer(negotiated, { address: adv.host, port: rtp.port }) : buildOffer({ address: adv.host, port: rtp.port });
    const callId = this.callId;

    // Our To tag is fixed here, so what we send in the dialog later carries the same one.
    const answered: SipRequest = { ...req, headers: req.headers.clone().set('To', `${req.headers.get('to')};tag=${newTag()}`) };
    const local = answered.headers.get('to')!;
    const referredBy = (() => {
      try { return parseNameAddr(local).uri; } catch { return `sip:${adv.host}`; }
    })();
    const remoteTarget = (() => {
      try { return parseNameAddr(req.headers.get('contact') ?? '').uri; } catch { return undefined; }
    })();
    const dialog = remoteTarget ? new SipDialog(endpoint, {
      callId, local, remote: req.headers.get('from')!, target: remoteTarget,
      routes: req.headers.getAll('record-route'), dest: { transport: ctx.remote.transport, host: ctx.remote.address, port: ctx.remote.port },
      cseq: 0,
    }) : undefined;

    let over = false;
    let endedBy!: (by: 'local' | 'remote') => void;
    const ended = new Promise<'local' | 'remote'>((resolve) => { endedBy = resolve; });
    const end = async (by: 'local' | 'remote'): Promise<void> => {
      if (over) return;
      over = true;
      clearTimeout(timer);
      endedBy(by);
      dialog?.close(by === 'local' ? 'the call was ended by us' : 'the caller hung up');
      if (by === 'local') await dialog?.bye();
      release();
    };
    const release = endpoint.onDialog(callId, (r, c) => {
      if (r.method === 'ACK') {
        // A late offer's answer (RFC 3264 §4: the INVITE had no SDP, ours went in the 200).
        const answer = !negotiated && r.body.length > 0 ? parseSdp(r.body.toString('utf8')) : null;
        const n = answer ? negotiateAudio(answer) : null;
        if (n) rtp.negotiated(rtpParams(n));
        return;
      }
      if (r.method === 'BYE') {
        endpoint.respond(r, c, 200, 'OK');
        void end('remote');
        return;
      }
      if (r.method === 'INVITE') {
        // A re-INVITE (session refresh, hold, a move of the media): same codec, possibly a new address.
        const moved = r.body.length > 0 ? parseSdp(r.body.toString('utf8')) : null;
        const n = moved ? negotiateAudio(moved) : null;
        if (n) rtp.setRemote(rtpParams(n).remote);
        endpoint.respond(r, c, 200, 'OK', { Contact: endpoint.contactFor(undefined, c.remote.transport), 'Content-Type': 'application/sdp' }, sdp);
        return;
      }
      endpoint.respond(r, c, 200, 'OK');
      if (r.method === 'NOTIFY') dialog?.onNotify(r);
    });
    // Set before anything can end the call: a BYE and hangup() only reach it later.
    const timer = setTimeout(() => void end('local'), o.maxDurationMs);
    timer.unref();
    const call: AnsweredSipCall = {
      callId, rtp, ended, peer: `${bracket(ctx.remote.address)}:${ctx.remote.port}`,
      hangup: () => end('local'),
      refer: async (referTo) => {
        if (!dialog) return { ok: false, status: 0, reason: 'the caller gave no Contact to transfer' };
        const r = await dialog.refer(referTo, referredBy);
        if (r.ok) void end('local');
        return r;
      },
    };
    this.on.answered(call);
    endpoint.respond(answered, ctx, 200, 'OK', { Contact: endpoint.contactFor(undefined, ctx.remote.transport), 'Content-Type': 'application/sdp' }, sdp);
    return call;
  }
}

/** Who an INVITE's call is for and from: the Request-URI's user (else To's, else a tel: number), and From. */
export function inviteParties(req: SipRequest): { callee: string; caller: string; callerName?: string } {
  let callee = '';
  try { callee = /^tel:/i.test(req.uri) ? req.uri.slice(4) : parseUri(req.uri).user ?? ''; } catch { /* not a SIP URI */ }
  if (!callee) {
    try { callee = parseUri(parseNameAddr(req.headers.get('to') ?? '').uri).user ?? ''; } catch { /* no user */ }
  }
  let caller = 'unknown';
  let callerName: string | undefined;
  try {
    const from = parseNameAddr(req.headers.get('from') ?? '');
    callerName = from.display?.slice(0, 100);
    const u = parseUri(from.uri);
    caller = u.user ? (/^\+?\d{6,15}$/.test(u.user) ? u.user : `${u.user}@${u.host}`) : from.uri;
  } catch { /* keep unknown */ }
  return { callee: callee.slice(0, 64), caller: caller.slice(0, 200), ...(callerName ? { callerName } : {}) };
}
