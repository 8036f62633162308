// The SIP carrier: a `call` task of an organization with outbound routes is placed over SIP from
// this worker's SIP endpoint (src/sip/call.ts), route by route, and its outcome mapped to the
// task's final state. The task's agent talks on the answered call: our offer names an RTP port
// of the process's pool, the answer picks the codec, and the agent's voice session runs over it
// until either side hangs up (or callMaxSeconds pass); the agent's transfers are REFERs. Without
// a voice runtime (tests of the carrier alone) the call is held silent. Texts cannot go over SIP.
//
//   200, held, BYE                  → finished, outcome completed
//   486 / 600 Busy                  → finished, outcome busy
//   408 / 480, or ring timeout      → finished, outcome no-answer (we CANCEL after ringTimeoutMs)
//   603 Decline                     → finished, outcome declined
//   503, or no SIP answer at all    → the next route; after the last one a transient error (retried)
//   other 3xx–6xx                   → failed (result.sipStatus, error names the status)
//   canceled through the API        → canceled (CANCEL before the answer, BYE after it)
import type { PortPool } from '../media/port-pool.ts';
import { RtpSession } from '../media/rtp-session.ts';
import type { RtpTransport } from '../media/rtp-transport.ts';
import type { PreparedVoiceCall, VoiceCalls } from '../media/voice-transport.ts';
import { placeSipCall, type AnsweredCall, type CallResult, type SipRoute } from '../sip/call.ts';
import { sipCallTransport } from './sip-transfer.ts';
import type { SipCallPlan } from './sip-call-plan.ts';
import { newCallId, type SipEndpoint } from '../sip/endpoint.ts';
import { buildOffer, negotiateAudio, OFFER_CODECS, rtpParams } from '../sip/sdp.ts';
import {
  PermanentCarrierError, TransientCarrierError, callOutcome,
  type CallStart, type Carrier, type PlaceCallRequest, type ResultBase, type SendTextRequest, type TextResult,
} from './carrier.ts';

export const SIP = 'sip';

/** What the carrier needs from the process's SIP runtime (src/modules/sip/sip-worker.ts). */
export interface SipCallDeps {
  /** Undefined when this process runs without SIP (CALLPLANE_SIP_ENABLED=false). */
  readonly endpoint: SipEndpoint | undefined;
  /** Captures of this Call-ID belong to the organization. */
  track(callId: string, orgId: number): void;
  untrack(callId: string): void;
  /** The RTP ports of this process (CALLPLANE_RTP_PORT_MIN–_MAX). */
  readonly ports: PortPool;
  /** Who talks on the calls (the agent runtime); absent: answered calls are held silent. */
  readonly voice?: VoiceCalls;
}

export interface SipCarrierOptions {
  ringTimeoutMs: number;
  maxDurationMs: number;
}

/** No SIP answer from the route, or 503: another route (or a later retry) may work. */
function unreachable(r: CallResult): boolean {
  return r.outcome === 'failed' && (r.status === undefined || r.status === 503);
}

export class SipCarrier implements Carrier {
  readonly name = SIP;
  readonly simulated = false;

  constructor(readonly deps: SipCallDeps | undefined, readonly plan: SipCallPlan, readonly options: SipCarrierOptions) {}

  async placeCall(req: PlaceCallRequest, signal: AbortSignal): Promise<CallStart> {
    const endpoint = this.deps?.endpoint;
    if (!endpoint) {
      throw new PermanentCarrierError('sip: this worker does not run SIP (CALLPLANE_SIP_ENABLED is false), so calls over outbound routes cannot be placed here', SIP);
    }
    if (this.plan.routes.length === 0) throw new PermanentCarrierError('sip: the organization has no outbound route', SIP);
    let result: CallResult | undefined;
    let answeredBy: string | undefined;
    let route = this.plan.routes[0];
    const tried: string[] = [];
    // The agent's first words are synthesized before dialing, so they start when the callee answers.
    const agent = await this.#prepare(req);
    for (route of this.plan.routes) {
      const callId = newCallId(endpoint.advertised.host);
      this.deps!.track(callId, this.plan.orgId);
      const media = agent ? await this.#media(endpoint, agent, callId, route) : undefined;
      try {
        result = await placeSipCall(endpoint, {
          target: req.to, from: this.plan.from, route, credentials: route.credentials,
          ringTimeoutMs: this.options.ringTimeoutMs, maxDurationMs: this.options.maxDurationMs, signal, callId,
          ...(media ? { sdp: media.offer, onAnswered: media.answered } : {}),
        });
      } finally {
        await media?.close(result?.outcome === 'completed' ? 'hung up' : 'not answered');
        answeredBy = media?.answeredBy() ?? answeredBy;
        this.deps!.untrack(callId);
      }
      tried.push(`${route.text}: ${result.status ? `${result.status} ${result.reason ?? ''}`.trim() : result.reason ?? 'no answer'}`);
      if (!unreachable(result) || signal.aborted) break;
    }
    const r = result!;
    const base: ResultBase = {
      provider: SIP, providerRef: r.callId, route: route.text,
      ...(r.status !== undefined ? { sipStatus: r.status } : {}), ...(r.reason ? { sipReason: r.reason } : {}),
      durationSeconds: Math.round(r.durationMs / 1000),
      ...(r.endedBy ? { endedBy: r.endedBy } : {}),
      ...(r.transferred ? { transferred: true } : {}),
      // A machine makes the completed call's outcome `voicemail` (callOutcome).
      ...(answeredBy ? { answeredBy } : {}),
      ...(r.status !== undefined && r.status >= 300 ? { errorCode: String(r.status) } : {}),
    };
    if (signal.aborted) {
      const kind = (signal.reason as { kind?: string } | undefined)?.kind;
      if (kind === 'canceled') {
        return this.#start(r, callOutcome('canceled', base, { cancelRequested: true })!);
      }
      // Shutdown or a lost lease: an answered call did happen (and was ended); one that never
      // connected goes back to the queue.
      if (r.outcome !== 'completed') throw signal.reason;
      return this.#start(r, callOutcome('completed', { ...base, note: 'ended early: the worker stopped' })!);
    }
    if (unreachable(r)) {
      throw new TransientCarrierError(`sip: no route answered (${tried.join('; ')})`, SIP, { maybeApplied: false });
    }
    const outcome = callOutcome(r.outcome, base);
    if (!outcome) throw new PermanentCarrierError(`sip: unexpected call outcome ${r.outcome}`, SIP);
    if (outcome.state === 'failed') {
      outcome.error = `sip: call failed${r.status ? ` with ${r.status} ${r.reason ?? ''}`.trimEnd() : r.reason ? `: ${r.reason}` : ''}`;
    }
    return this.#start(r, outcome);
  }

  async #prepare(req: PlaceCallRequest): Promise<PreparedVoiceCall | null> {
    const voice = this.deps?.voice;
    if (!voice || req.agentId === undefined) return null;
    return voice.outbound({
      taskId: req.taskId, orgId: this.plan.orgId, agentId: req.agentId, to: req.to, greeting: req.greeting, waitToGreet: req.waitToGreet,
      ...(req.voicemail ? { voicemail: req.voicemail } : {}),
    });
  }

  /**
   * One attempt's media: an RTP port offered in our SDP; once answered, the session set to the
   * codec the answer chose and the agent's voice session started over it. close() ends both.
   */
  async #media(endpoint: SipEndpoint, agent: PreparedVoiceCall, callId: string, route: SipRoute) {
    const rtp = await RtpSession.open({ host: endpoint.host, pool: this.deps!.ports, codec: OFFER_CODECS[0]!, telephoneEvent: OFFER_CODECS[2]!.pt });
    let transport: RtpTransport | undefined;
    let session: { done: Promise<void>; answeredBy?(): string | undefined } | undefined;
    const peer = `${route.host}${route.port ? `:${route.port}` : ''}`;
    let callEnded!: () => void;
    const ended = new Promise<void>((r) => { callEnded = r; });
    return {
      offer: buildOffer({ address: endpoint.advertised.host, port: rtp.port }),
      answered: (call: AnsweredCall) => {
        const n = call.remote ? negotiateAudio(call.remote) : null;
        if (!n) {
          // An answer that shares no codec with our offer (or has no audio): no one to talk to.
          call.hangup();
          return;
        }
        rtp.negotiated(rtpParams(n));
        transport = sipCallTransport({
          endpoint, ports: this.deps!.ports, rtp, call, peer, plan: () => Promise.resolve(this.plan), ...this.options, callerEnded: ended,
          track: (id, org) => this.deps!.track(id, org), untrack: (id) => this.deps!.untrack(id),
        });
        session = agent.start(transport, { callId });
      },
      /** Who answered, as the voice session's voicemail screen decided. */
      answeredBy: () => session?.answeredBy?.(),
      close: async (reason: string) => {
        callEnded();
        if (transport) transport.end(reason);
        else await rtp.close();
        await session?.done;
      },
    };
  }

  #start(r: CallResult, final: NonNullable<ReturnType<typeof callOutcome>>): CallStart {
    return { provider: SIP, simulated: false, providerRef: r.callId, status: final.result.status, final };
  }

  async sendText(_req: SendTextRequest, _signal: AbortSignal): Promise<TextResult> {
    throw new PermanentCarrierError('sip: texts cannot be sent over SIP', SIP);
  }

  /** Calls run inside placeCall, which the task's signal ends; nothing is left to hang up. */
  async endCall(): Promise<void> {}
}
