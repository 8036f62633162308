// Inbound requests outside our dialogs: OPTIONS answered (PBX keep-alives), INVITEs attributed to
// an organization by the callee they name and admitted only from addresses on its whitelist
// (refusals captured at a bounded rate), an admitted INVITE answered by the agent it is addressed
// to, which talks over RTP until either side hangs up or callMaxSeconds pass; BYE and NOTIFY for
// nothing of ours 481, anything else 405.
import { lookup } from 'node:dns/promises';
import net from 'node:net';
import type { SipRegistrationRow } from '../../db/types.ts';
import { RtpSession } from '../../media/rtp-session.ts';
import { RtpTransport } from '../../media/rtp-transport.ts';
import type { PreparedVoiceCall } from '../../media/voice-transport.ts';
import { attendedTransfer } from '../../providers/sip-transfer.ts';
import { referTarget, SipDialog } from '../../sip/dialog.ts';
import { newTag, type RequestContext, type SipEndpoint, type SipRequest } from '../../sip/endpoint.ts';
import { parseNameAddr, parseUri } from '../../sip/message.ts';
import { buildAnswer, buildOffer, negotiateAudio, OFFER_CODECS, parseSdp, rtpParams } from '../../sip/sdp.ts';
import { normalizePhone } from '../../lib/phone.ts';
import { orgsOwningNumber } from '../numbering-providers/carriers.ts';
import { phoneNumberRepo } from '../phone-numbers/repository.ts';
import type { SipCaptures } from './captures.ts';
import { formatHost, whitelisted, whitelistMatcher } from './parse.ts';
import { accountRepo } from '../accounts/repository.ts';
import { sipCallPlan } from './calls.ts';
import { registrarOf } from './registrations.ts';
import { sipRepo } from './repository.ts';
import type { SipWorkerDeps, WorkerState } from './worker-deps.ts';

/** An inbound call we answered (whitelisted source), until a BYE, the agent's hang-up or callMaxSeconds. */
interface InboundCall {
  end(by: 'local' | 'remote'): Promise<void>;
  /** Settles when the agent's session has recorded the end (not awaited by end(): the session's own hang-up calls it). */
  session?: Promise<void>;
}

const toTag = (req: SipRequest): string | undefined => {
  try { return parseNameAddr(req.headers.get('to') ?? '').params.tag ?? undefined; } catch { return undefined; }
};

export class InboundCalls {
  readonly #calls = new Set<InboundCall>();

  constructor(
    readonly deps: Pick<SipWorkerDeps, 'database' | 'config' | 'box' | 'log' | 'voice' | 'mediaTimeoutMs'>,
    readonly worker: WorkerState,
    readonly captures: Pick<SipCaptures, 'track' | 'untrack' | 'mayCaptureRefusal'>,
  ) {}

  /** The endpoint's onRequest: a request that is not in one of our dialogs. */
  async onRequest(req: SipRequest, ctx: RequestContext): Promise<void> {
    const endpoint = this.worker.endpoint;
    if (!endpoint) return;
    switch (req.method) {
      case 'OPTIONS':
        endpoint.respond(req, ctx, 200, 'OK', { Allow: 'INVITE, ACK, CANCEL, BYE, OPTIONS', Accept: 'application/sdp' });
        return;
      case 'INVITE':
        return this.#onInvite(endpoint, req, ctx);
      case 'ACK':
        return;
      case 'BYE':
        endpoint.respond(req, ctx, 481, 'Call/Transaction Does Not Exist');
        return;
      case 'NOTIFY':
        // Our subscriptions' NOTIFYs reach their dialog's handler (by Call-ID): this one is for none of them.
        endpoint.respond(req, ctx, 481, 'Subscription Does Not Exist');
        return;
      case 'CANCEL':
        // The endpoint has answered it (200) and the INVITE (487): what is left is to end a call
        // still ringing. Nothing more is sent for it.
        this.#ringing.get(req.headers.get('call-id') ?? '')?.();
        return;
      default:
        endpoint.respond(req, ctx, 405, 'Method Not Allowed', { Allow: 'INVITE, ACK, CANCEL, BYE, OPTIONS' });
    }
  }

  /** Calls ringing before we answer (preAnswerRingTime), by Call-ID: what cancels the wait. */
  readonly #ringing = new Map<string, () => void>();

  /** Ends every answered call (BYE from us): the worker stops. */
  async endAll(): Promise<void> {
    const calls = [...this.#calls];
    await Promise.allSettled(calls.map((c) => c.end('local')));
    await Promise.allSettled(calls.map((c) => c.session ?? Promise.resolve()));
  }

  /**
   * The organization an INVITE is for, by what names the callee: the registration whose AOR is its
   * To (or Request-URI); else the registration whose user is the Request-URI's user (a call to our
   * Contact) and whose registrar the INVITE comes from — the call arrived through that registration;
   * else the organizations whose registration user is the Request-URI's user, whose agent the Request-URI's user names (`camp<id>`), or whose
   * numbering provider owns the number called (Request-URI or To user, or a tel: URI). Several of those are told apart by their own whitelists: the one whose
   * whitelist holds the source. Which whitelist holds the source never makes an INVITE anyone's
   * by itself. `identified` is false when nothing in the INVITE names any organization.
   */
  async #orgForInvite(req: SipRequest, source: string): Promise<{ orgId?: number; identified: boolean }> {
    const db = this.deps.database.db;
    const keys: string[] = [];
    const numbers: string[] = [];
    try {
      const to = parseUri(parseNameAddr(req.headers.get('to') ?? '').uri);
      if (to.user) {
        keys.push(`sip:${to.user}@${formatHost(to.host.replace(/^\[|\]$/g, ''))}${to.port ? `:${to.port}` : ''}`, `sip:${to.user}@${formatHost(to.host.replace(/^\[|\]$/g, ''))}`);
        numbers.push(to.user);
      }
    } catch { /* not a SIP URI */ }
    let ruriUser: string | undefined;
    if (/^tel:/i.test(req.uri)) numbers.unshift(req.uri);
    try {
      const ruri = parseUri(req.uri);
      ruriUser = ruri.user;
      if (ruri.user) {
        keys.push(`sip:${ruri.user}@${formatHost(ruri.host.replace(/^\[|\]$/g, ''))}`);
        numbers.unshift(ruri.user);
      }
    } catch { /* not a SIP URI */ }
    for (const key of keys) {
      const org = await sipRepo.orgOfAor(db, key);
      if (org !== undefined) return { orgId: org, identified: true };
    }
    const candidates = new Set<number>();
    if (ruriUser) {
      const regs = await sipRepo.registrationsOfUser(db, ruriUser);
      // A call that arrives through a registration — from its registrar, to the Contact we
      // registered — belongs to that registration's organization: no whitelist of another one
      // (which may hold the same trunk address and register the same user) can make it ambiguous.
      // Looked up together: one INVITE waits 2 s at most for the registrars' names, however many.
      const from = await Promise.all(regs.map((r) => comesFromRegistrar(r, source)));
      const through = new Set(regs.filter((_, i) => from[i]).map((r) => r.org_id));
      if (through.size === 1) return { orgId: [...through][0], identified: true };
      for (const r of regs) candidates.add(r.org_id);
    }
    // An agent called by its id (camp<id>, as the API names agents): its organization.
    const agentId = ruriUser ? /^camp(\d{1,10})$/i.exec(ruriUser)?.[1] : undefined;
    if (agentId) {
      const agent = await accountRepo.findById(db, Number(agentId));
      if (agent?.kind === 'agent' && agent.org_id !== null) candidates.add(agent.org_id);
    }
    for (const n of new Set(numbers)) {
      for (const org of await orgsOwningNumber(db, n)) candidates.add(org);
      // A number an organization holds (docs/numbers.md): its organization, but only from a source
      // its whitelist holds — another organization's trunk calling it is told nobody has it (404).
      const e164 = /^(?:tel:)?\+?\d{8,15}$/i.test(n) ? normalizePhone(n.replace(/^tel:/i, '').replace(/^(?!\+)/, '+')) : undefined;
      const held = e164?.ok ? await phoneNumberRepo.findByNumber(db, e164.e164) : undefined;
      if (held?.state === 'active' && whitelisted(whitelistMatcher((await sipRepo.whitelist(db, held.org_id)).map((w) => w.ip)), source)) candidates.add(held.org_id);
    }
    if (candidates.size === 0) return { identified: false };
    if (candidates.size === 1) return { orgId: [...candidates][0], identified: true };
    const admitting: number[] = [];
    for (const org of candidates) {
      if (whitelisted(whitelistMatcher((await sipRepo.whitelist(db, org)).map((w) => w.ip)), source)) admitting.push(org);
    }
    return admitting.length === 1 ? { orgId: admitting[0], identified: true } : { identified: true };
  }

  /** Whether any organization whitelisted this address (a trunk of someone's, not a stranger). */
  async #anyWhitelistHolds(source: string): Promise<boolean> {
    const entries = await sipRepo.whitelistEntriesFor(this.deps.database.db, source);
    return whitelisted(whitelistMatcher(entries.map((e) => e.ip)), source);
  }

  async #onInvite(endpoint: SipEndpoint, req: SipRequest, ctx: RequestContext): Promise<void> {
    const callId = req.headers.get('call-id')!;
    const source = ctx.remote.address;
    const { orgId, identified } = await this.#orgForInvite(req, source);
    if (!identified && await this.#anyWhitelistHolds(source)) {
      // A trunk someone whitelisted called a user or number nobody here has: say so. Strangers get
      // the 403 below whatever they call, so they cannot learn which users and numbers exist.
      this.deps.log?.info({ source, callId }, 'inbound SIP INVITE refused: nothing in it names an organization');
      endpoint.respond(req, ctx, 404, 'Not Found');
      return;
    }
    const list = orgId === undefined ? undefined : whitelistMatcher((await sipRepo.whitelist(this.deps.database.db, orgId)).map((w) => w.ip));
    if (!list || !whitelisted(list, source)) {
      const captured = orgId !== undefined && this.captures.mayCaptureRefusal(orgId);
      if (captured) this.captures.track(callId, orgId);
      this.deps.log?.info({ source, callId, org: orgId }, 'inbound SIP INVITE refused: source not whitelisted');
      endpoint.respond(req, ctx, 403, 'Forbidden');
      if (captured) this.captures.untrack(callId);
      return;
    }
    // A suspended organization (or its reseller or partner) takes no calls until it is reactivated.
    // Checked after the whitelist, so only the organization's own trunks learn of it: 480, as for a
    // callee that cannot take calls now (RFC 3261 §21.4.18), so a trunk may route elsewhere.
    const suspended = (await accountRepo.findWithSuspension(this.deps.database.db, orgId!))?.suspended;
    if (suspended) {
      this.deps.log?.info({ source, callId, org: orgId, suspended }, 'inbound SIP INVITE refused: organization suspended');
      endpoint.respond(req, ctx, 480, 'Temporarily Unavailable');
      return;
    }
    this.captures.track(callId, orgId!);
    if (toTag(req) !== undefined) {
      // A re-INVITE for a dialog we do not have (ours are claimed by Call-ID): RFC 3261 §12.2.2.
      endpoint.respond(req, ctx, 481, 'Call/Transaction Does Not Exist');
      this.captures.untrack(callId);
      return;
    }
    await this.#answer(endpoint, req, ctx, callId, orgId!);
  }

  /**
   * Answers a whitelisted INVITE with the agent it is addressed to: 100 Trying, the agent's
   * greeting synthesized, an RTP port of the pool opened with the codec chosen from the offer (or
   * offered in our 200 when the INVITE had no SDP, the answer then coming in the ACK), 200 OK, and
   * the agent's voice session over the call until either side hangs up, the media dies or
   * callMaxSeconds pass. No codec in common: 488. No agent: 480. No port free: 503.
   */
  async #answer(endpoint: SipEndpoint, req: SipRequest, ctx: RequestContext, callId: string, orgId: number): Promise<void> {
    endpoint.respond(req, ctx, 100, 'Trying');
    const offer = req.body.length > 0 ? parseSdp(req.body.toString('utf8')) : null;
    const negotiated = offer ? negotiateAudio(offer) : null;
    if (offer && !negotiated) {
      this.#refuse(endpoint, req, ctx, callId, 488, 'Not Acceptable Here', 'no audio codec in common (we take PCMU and PCMA)');
      return;
    }
    const { callee, caller, callerName } = parties(req);
    let agent: PreparedVoiceCall | null = null;
    if (this.deps.voice) {
      // #onInvite answers only sources on the organization's whitelist: its trunk vouches for the caller ID.
      const prepared = await this.deps.voice.inbound({ orgId, callee, caller, callerName, callerVerified: true }).catch((err: Error) => {
        this.deps.log?.warn({ callId, err: err.message }, 'inbound SIP call: the agent could not be prepared');
        return null;
      });
      if (prepared && 'refuse' in prepared) {
        // A number the organization does not hold (404, like one nobody has), or the agent's CNAM rule.
        this.#refuse(endpoint, req, ctx, callId, prepared.refuse.status, prepared.refuse.reason, prepared.refuse.why);
        return;
      }
      agent = prepared;
      if (agent?.ringMs) {
        // preAnswerRingTime: the caller hears it ring before we answer.
        endpoint.respond(req, ctx, 180, 'Ringing');
        const cancelled = await new Promise<boolean>((resolve) => {
          const timer = setTimeout(() => resolve(false), agent!.ringMs);
          timer.unref();
          this.#ringing.set(callId, () => { clearTimeout(timer); resolve(true); });
        });
        this.#ringing.delete(callId);
        if (cancelled) {
          this.deps.log?.info({ callId }, 'inbound SIP call cancelled by the caller while it rang (preAnswerRingTime)');
          this.captures.untrack(callId);
          return;
        }
      }
      if (!agent) {
        this.#refuse(endpoint, req, ctx, callId, 480, 'Temporarily Unavailable', 'the organization has no agent to answer');
        return;
      }
    }
    let rtp: RtpSession;
    try {
      rtp = await RtpSession.open({
        host: endpoint.host, pool: this.worker.ports, mediaTimeoutMs: this.deps.mediaTimeoutMs,
        ...(negotiated ? rtpParams(negotiated) : { codec: OFFER_CODECS[0]!, telephoneEvent: OFFER_CODECS[2]!.pt }),
      });
    } catch (err) {
      this.#refuse(endpoint, req, ctx, callId, 503, 'Service Unavailable', `no RTP port: ${(err as Error).message}`);
      return;
    }
    const adv = endpoint.advertised;
    const sdp = negotiated ? buildAnswer(negotiated, { address: adv.host, port: rtp.port }) : buildOffer({ address: adv.host, port: rtp.port });

    const tag = newTag();
    // Our To tag is fixed here, so what we send in the dialog later carries the same one.
    const answered: SipRequest = { ...req, headers: req.headers.clone().set('To', `${req.headers.get('to')};tag=${tag}`) };
    const remoteTarget = (() => {
      try { return parseNameAddr(req.headers.get('contact') ?? '').uri; } catch { return undefined; }
    })();
    const dialog = remoteTarget ? new SipDialog(endpoint, {
      callId, local: answered.headers.get('to')!, remote: req.headers.get('from')!, target: remoteTarget,
      routes: req.headers.getAll('record-route'), dest: { transport: ctx.remote.transport, host: ctx.remote.address, port: ctx.remote.port },
      cseq: 0,
    }) : undefined;
    let ended = false;
    let release = () => {};
    let transport: RtpTransport | undefined;
    let bridged = false;
    let callEnded!: () => void;
    const callerEnded = new Promise<void>((r) => { callEnded = r; });
    const call: InboundCall = {
      end: async (by) => {
        if (ended) return;
        ended = true;
        callEnded();
        clearTimeout(timer);
        this.#calls.delete(call);
        if (by === 'local') await dialog?.bye();
        release();
        this.captures.untrack(callId);
        if (transport) transport.end(by === 'local' ? 'ended by us' : 'hung up');
        else await rtp.close();
      },
    };
    this.#calls.add(call);
    release = endpoint.onDialog(callId, (r, c) => {
      if (r.method === 'ACK') {
        // A late offer's answer (RFC 3264 §4: the INVITE had no SDP, ours went in the 200).
        const answer = !negotiated && r.body.length > 0 ? parseSdp(r.body.toString('utf8')) : null;
        const n = answer ? negotiateAudio(answer) : null;
        if (n) rtp.negotiated(rtpParams(n));
        return;
      }
      if (r.method === 'BYE') {
        endpoint.respond(r, c, 200, 'OK');
        void call.end('remote');
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
    // Set before anything can end the call: a BYE and stop() only reach it later.
    const timer = setTimeout(() => void call.end('local'), this.deps.config.callMaxSeconds * 1000);
    timer.unref();
    endpoint.respond(answered, ctx, 200, 'OK', { Contact: endpoint.contactFor(undefined, ctx.remote.transport), 'Content-Type': 'application/sdp' }, sdp);
    this.deps.log?.info({ source: ctx.remote.address, callId, agent: Boolean(agent) }, 'inbound SIP call answered');
    if (agent) {
      const pbx = `${formatHost(ctx.remote.address)}:${ctx.remote.port}`;
      transport = new RtpTransport(rtp, {
        transfer: async (destination, opts) => {
          const plan = opts.announce ? await sipCallPlan(this.deps.database.db, this.deps.box, orgId) : null;
          if (opts.announce && plan) {
            // Attended: we call the destination over the organization's route and join the calls here.
            const r = await attendedTransfer({
              endpoint, ports: this.worker.ports, plan, ringTimeoutMs: this.deps.config.sipRingSeconds * 1000,
              maxDurationMs: this.deps.config.callMaxSeconds * 1000, caller: rtp, hangupCaller: () => void call.end('local'), callerEnded,
              destination, announce: opts.announce, track: (id, org) => this.captures.track(id, org), untrack: (id) => this.captures.untrack(id),
            });
            if (!r.ok) throw new Error(`the transfer to ${destination} failed: ${r.reason}`);
            bridged = true;
            return 'bridged';
          }
          // Blind (or attended without a route to call the destination on): REFER.
          if (!dialog) throw new Error('the caller gave no Contact to transfer');
          const r = await dialog.refer(referTarget(destination, pbx), answered.headers.get('to') ? parseNameAddr(answered.headers.get('to')!).uri : `sip:${adv.host}`);
          if (!r.ok) throw new Error(`the transfer to ${destination} failed: ${r.reason || r.status}`);
          void call.end('local');
          return undefined;
        },
        hangup: () => call.end('local'),
      });
      // The agent's session is over: so is the call, unless it was joined to a transfer's destination.
      transport.on('ended', () => { if (!bridged) void call.end('local'); });
      call.session = agent.start(transport, { callId }).done;
    }
  }

  /** Refuses an admitted INVITE we cannot serve, with why in the log. */
  #refuse(endpoint: SipEndpoint, req: SipRequest, ctx: RequestContext, callId: string, status: number, reason: string, why: string): void {
    this.deps.log?.info({ source: ctx.remote.address, callId, status }, `inbound SIP INVITE refused: ${why}`);
    endpoint.respond(req, ctx, status, reason);
    this.captures.untrack(callId);
  }
}

/**
 * Whether `source` is the registration's registrar (where its REGISTERs go: `proxy`, else the AOR's
 * host), by address: a name is resolved (all its addresses; one that does not resolve in 2 s is no
 * match). IPv4-mapped IPv6 sources are read as IPv4.
 */
async function comesFromRegistrar(row: Pick<SipRegistrationRow, 'aor' | 'proxy' | 'port' | 'transport'>, source: string): Promise<boolean> {
  let host: string;
  try { host = registrarOf(row).host; } catch { return false; }
  const src = source.replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/i, '').toLowerCase();
  if (net.isIP(host)) return host.toLowerCase() === src;
  const timeout = new Promise<[]>((resolve) => setTimeout(() => resolve([]), 2000).unref());
  const addresses = await Promise.race([lookup(host, { all: true }).catch(() => []), timeout]);
  return addresses.some((a) => a.address.toLowerCase() === src);
}

/** Who a call is for and from: the Request-URI's user (else To's, else a tel: number), and From. */
function parties(req: SipRequest): { callee: string; caller: string; callerName?: string } {
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
