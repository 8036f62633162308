// The voice transport of a SIP call whose audio we carry, placed (sip.ts) or answered (the SIP
// worker's inbound calls), and its transfers: `sipCallTransport` is the call's RtpTransport, whose
// hang-up is the dialog's BYE and whose transfer is blind (REFER in the dialog) or attended.
// An attended transfer (attendedTransfers): while the caller waits, we call the destination over
// the organization's first outbound route, play it the agent's announcement, and then join the two
// calls' media here — audio and keys relayed frame by frame both ways — until either side hangs
// up, which hangs up the other. When the destination does not answer (busy, no answer, refused),
// nothing is joined and the caller stays with the agent.
import type { PortPool } from '../media/port-pool.ts';
import { RtpSession } from '../media/rtp-session.ts';
import { RtpTransport } from '../media/rtp-transport.ts';
import { FRAME_SAMPLES } from '../media/pcm.ts';
import { placeSipCall, type AnsweredCall } from '../sip/call.ts';
import { referTarget, type CallControls } from '../sip/dialog.ts';
import { newCallId, type SipEndpoint } from '../sip/endpoint.ts';
import { buildOffer, negotiateAudio, OFFER_CODECS, rtpParams } from '../sip/sdp.ts';
import type { SipCallPlan } from './sip-call-plan.ts';

/** Audio one leg may hold queued for the other before the oldest is dropped (clocks drift). */
const MAX_RELAY_BACKLOG = FRAME_SAMPLES * 10;

export interface AttendedTransferInput {
  endpoint: SipEndpoint;
  ports: PortPool;
  plan: SipCallPlan;
  ringTimeoutMs: number;
  maxDurationMs: number;
  /** The caller's leg: its media, and how to end it once the joined call is over. */
  caller: RtpSession;
  hangupCaller(): void;
  /** Resolves when the caller's leg ends (its BYE): the destination's leg is ended too. */
  callerEnded: Promise<unknown>;
  destination: string;
  /** What the destination hears before it is joined (8 kHz PCM16). */
  announce: Int16Array;
  track(callId: string, orgId: number): void;
  untrack(callId: string): void;
}

export type AttendedOutcome = { ok: true } | { ok: false; reason: string };

export interface SipCallTransportInput extends Omit<AttendedTransferInput, 'plan' | 'caller' | 'hangupCaller' | 'destination' | 'announce'> {
  /** The call's media. */
  rtp: RtpSession;
  /** The call's dialog: BYE and REFER. */
  call: CallControls;
  /** The far end (`host[:port]`): a destination that is no SIP URI is referred to it. */
  peer: string;
  /** The plan an attended transfer calls the destination over; null: the transfer is blind (REFER). Asked only for an attended one. */
  plan(): Promise<SipCallPlan | null>;
  /** The transport's end (the session's, or dead media) ends the call too (BYE), unless a transfer's bridge took its media. */
  endsCall?: boolean;
}

/**
 * The voice transport over a SIP call's RTP: the agent's hang-up is the call's BYE; a transfer
 * with an announcement is attended when there is a plan to call the destination on (the caller's
 * media then joined to it, `bridged`), else blind: a REFER whose success ends the call.
 */
export function sipCallTransport(i: SipCallTransportInput): RtpTransport {
  const { rtp, call } = i;
  let bridged = false;
  const transport = new RtpTransport(rtp, {
    transfer: async (destination, opts) => {
      const plan = opts.announce ? await i.plan() : null;
      if (opts.announce && plan) {
        // Attended: we call the destination over the organization's route and join the calls here.
        const r = await attendedTransfer({ ...i, plan, caller: rtp, hangupCaller: () => void call.hangup(), destination, announce: opts.announce });
        if (!r.ok) throw new Error(`the transfer to ${destination} failed: ${r.reason}`);
        bridged = true;
        return 'bridged';
      }
      // Blind (or attended without a route to call the destination on): REFER.
      const r = await call.refer(referTarget(destination, i.peer));
      if (!r.ok) throw new Error(`the transfer to ${destination} failed: ${r.reason || r.status}`);
      return undefined;
    },
    hangup: async () => { await call.hangup(); },
  });
  // The agent's session is over: so is the call, unless it was joined to a transfer's destination.
  if (i.endsCall) transport.on('ended', () => { if (!bridged) void call.hangup(); });
  return transport;
}

/** Relays one leg's audio and keys into the other. */
function relay(from: RtpSession, to: RtpSession): void {
  from.on('audio', (frame) => {
    if (to.queuedSamples > MAX_RELAY_BACKLOG) to.clear();
    to.send(frame);
  });
  from.on('dtmf', (key) => { try { to.sendDigits(key); } catch { /* the other leg takes no keys */ } });
}

/**
 * Calls the destination, announces, joins. Resolves `ok` once the calls are joined (the joined
 * call then runs on by itself), or why not once the destination's leg failed.
 */
export async function attendedTransfer(i: AttendedTransferInput): Promise<AttendedOutcome> {
  const route = i.plan.routes[0];
  if (!route) return { ok: false, reason: 'the organization has no outbound route to call the destination' };
  const target = i.destination.trim().replace(/^(ext|pbx):/i, '');
  const rtp = await RtpSession.open({ host: i.endpoint.host, pool: i.ports, codec: OFFER_CODECS[0]!, telephoneEvent: OFFER_CODECS[2]!.pt });
  const callId = newCallId(i.endpoint.advertised.host);
  const abort = new AbortController();
  void i.callerEnded.then(() => abort.abort({ kind: 'caller-ended' }));
  i.track(callId, i.plan.orgId);

  let joined = false;
  return new Promise<AttendedOutcome>((resolve) => {
    const onAnswered = (call: AnsweredCall) => {
      const n = call.remote ? negotiateAudio(call.remote) : null;
      if (!n) {
        call.hangup();
        return;
      }
      rtp.negotiated(rtpParams(n));
      rtp.send(i.announce);
      rtp.once('drained', () => {
        if (abort.signal.aborted) return;
        joined = true;
        relay(i.caller, rtp);
        relay(rtp, i.caller);
        resolve({ ok: true });
      });
    };
    void placeSipCall(i.endpoint, {
      target, from: i.plan.from, route, credentials: route.credentials, callId,
      ringTimeoutMs: i.ringTimeoutMs, maxDurationMs: i.maxDurationMs, signal: abort.signal,
      sdp: buildOffer({ address: i.endpoint.advertised.host, port: rtp.port }), onAnswered,
    }).then((r) => {
      if (!joined) resolve({ ok: false, reason: r.outcome === 'completed' ? 'the destination hung up before it was joined' : `the destination's call ended ${r.outcome}${r.status ? ` (${r.status})` : ''}` });
      // The joined call is over when either leg ends: the other one goes too.
      else i.hangupCaller();
    }, (err: Error) => {
      resolve({ ok: false, reason: err.message });
    }).finally(() => {
      i.untrack(callId);
      void rtp.close();
      if (joined) void i.caller.close();
    });
  });
}
