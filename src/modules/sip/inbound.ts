// Inbound requests outside our dialogs, and which of them we take: OPTIONS answered (PBX
// keep-alives); an INVITE attributed to an organization by the callee it names and admitted only
// from addresses on its whitelist (refusals captured at a bounded rate), and only while the
// organization is not suspended; BYE and NOTIFY for nothing of ours 481, anything else 405.
// An admitted INVITE goes one way: this module asks the agent runtime for the agent it is addressed
// to (voice.inbound: `PreparedVoiceCall`, or a refusal), the SIP engine answers it (src/sip/answer.ts:
// offer, ringing and CANCEL, RTP port, 200, the dialog, callMaxSeconds), and the agent's session
// starts over the call's RtpTransport (`sipCallTransport`, whose transfers need the organization's
// outbound plan) until either side hangs up.
import type { InboundRefusal, PreparedVoiceCall } from '../../media/voice-transport.ts';
import { sipCallTransport } from '../../providers/sip-transfer.ts';
import { IncomingCall, inviteParties, SipAnswering } from '../../sip/answer.ts';
import type { RequestContext, SipEndpoint, SipRequest } from '../../sip/endpoint.ts';
import { parseNameAddr, parseUri } from '../../sip/message.ts';
import { normalizePhone } from '../../lib/phone.ts';
import { orgsOwningNumber } from '../numbering-providers/carriers.ts';
import { phoneNumberRepo } from '../phone-numbers/repository.ts';
import type { SipCaptures } from './captures.ts';
import { formatHost, whitelisted, whitelistMatcher } from './parse.ts';
import { accountRepo } from '../accounts/repository.ts';
import { sipCallPlan } from './calls.ts';
import { comesFromRegistrar } from './registrations.ts';
import { sipRepo } from './repository.ts';
import type { SipWorkerDeps, WorkerState } from './worker-deps.ts';

/** Retry-After of the 503 a draining worker answers new INVITEs with (seconds). */
export const DRAIN_RETRY_AFTER_SECONDS = 5;

export class InboundCalls {
  /** The INVITEs on their way to an answer (CANCEL finds them there) and the calls answered. */
  readonly #answering = new SipAnswering();
  /** The agents' sessions on calls not yet ended (what a stop waits for once it has ended them). */
  readonly #sessions = new Set<Promise<void>>();

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
        // Draining (docs/deploy.md): a new call is turned away with 503 and Retry-After, which a
        // trunk or proxy with more than one target takes as "try another" (RFC 3261 §21.5.4);
        // calls in progress are not affected (their requests are in-dialog).
        if (this.worker.draining) {
          endpoint.respond(req, ctx, 503, 'Service Unavailable', { 'Retry-After': String(DRAIN_RETRY_AFTER_SECONDS) });
          this.deps.log?.info({ source: ctx.remote.address, callId: req.headers.get('call-id') }, 'inbound SIP INVITE refused: this worker is draining');
          return;
        }
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
        // The endpoint has answered it (200) and the INVITE (487): a call not yet answered is not.
        this.#answering.cancel(req);
        return;
      default:
        endpoint.respond(req, ctx, 405, 'Method Not Allowed', { Allow: 'INVITE, ACK, CANCEL, BYE, OPTIONS' });
    }
  }

  /** Ends every answered call (BYE from us) and waits for their sessions to record the end: the worker stops. */
  async endAll(): Promise<void> {
    const sessions = [...this.#sessions];
    await this.#answering.hangupAll();
    await Promise.allSettled(sessions);
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
      if (held?.state === 'active' && await this.#whitelistHolds(held.org_id, source)) candidates.add(held.org_id);
    }
    if (candidates.size === 0) return { identified: false };
    if (candidates.size === 1) return { orgId: [...candidates][0], identified: true };
    const admitting: number[] = [];
    for (const org of candidates) if (await this.#whitelistHolds(org, source)) admitting.push(org);
    return admitting.length === 1 ? { orgId: admitting[0], identified: true } : { identified: true };
  }

  /** Whether the organization's whitelist holds this address. */
  async #whitelistHolds(orgId: number, source: string): Promise<boolean> {
    return whitelisted(whitelistMatcher((await sipRepo.whitelist(this.deps.database.db, orgId)).map((w) => w.ip)), source);
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
    if (orgId === undefined || !await this.#whitelistHolds(orgId, source)) {
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
    await this.#answer(endpoint, req, ctx, orgId!);
  }

  /**
   * An admitted INVITE, answered by the agent it is addressed to: the engine reads the offer, the
   * agent is prepared (its greeting synthesized; refused by its number or CNAM rule; 480 when the
   * organization has none), it rings for preAnswerRingTime, the engine answers, and the agent's
   * session runs over the call until either side hangs up, the media dies or callMaxSeconds pass.
   * Without a voice runtime the call is answered and held silent.
   */
  async #answer(endpoint: SipEndpoint, req: SipRequest, ctx: RequestContext, orgId: number): Promise<void> {
    const callId = req.headers.get('call-id')!;
    const incoming = this.#answering.receive(endpoint, req, ctx);
    if (!(incoming instanceof IncomingCall)) return this.#refused(ctx, callId, incoming);
    const agent = this.deps.voice ? await this.#agent(orgId, req, callId) : undefined;
    // A number the organization does not hold (404, like one nobody has), or the agent's CNAM rule.
    if (agent && 'refuse' in agent) return this.#refused(ctx, callId, incoming.refuse(agent.refuse));
    if (agent?.ringMs) await incoming.ring(agent.ringMs);
    if (agent === null) return this.#refused(ctx, callId, incoming.refuse({ status: 480, reason: 'Temporarily Unavailable', why: 'the organization has no agent to answer' }));
    const call = await incoming.answer({ ports: this.worker.ports, mediaTimeoutMs: this.deps.mediaTimeoutMs, maxDurationMs: this.deps.config.callMaxSeconds * 1000 });
    if ('why' in call) return this.#refused(ctx, callId, call);
    this.deps.log?.info({ source: ctx.remote.address, callId, agent: Boolean(agent) }, 'inbound SIP call answered');
    const transport = agent && sipCallTransport({
      endpoint, ports: this.worker.ports, rtp: call.rtp, call, peer: call.peer, callerEnded: call.ended, endsCall: true,
      // An attended transfer calls the destination over the organization's outbound route, if it has one.
      plan: () => sipCallPlan(this.deps.database.db, this.deps.box, orgId),
      ringTimeoutMs: this.deps.config.sipRingSeconds * 1000, maxDurationMs: this.deps.config.callMaxSeconds * 1000,
      track: (id, org) => this.captures.track(id, org), untrack: (id) => this.captures.untrack(id),
    });
    void call.ended.then((by) => {
      this.captures.untrack(callId);
      if (transport) transport.end(by === 'local' ? 'ended by us' : 'hung up');
      else void call.rtp.close();
    });
    if (!agent || !transport) return;
    const session = agent.start(transport, { callId }).done;
    this.#sessions.add(session);
    void call.ended.then(() => this.#sessions.delete(session));
  }

  /** The agent an admitted INVITE is addressed to (voice.inbound), or a refusal; null when there is none or it could not be prepared. */
  async #agent(orgId: number, req: SipRequest, callId: string): Promise<PreparedVoiceCall | InboundRefusal | null> {
    // #onInvite answers only sources on the organization's whitelist: its trunk vouches for the caller ID.
    return this.deps.voice!.inbound({ orgId, ...inviteParties(req), callerVerified: true }).catch((err: Error) => {
      this.deps.log?.warn({ callId, err: err.message }, 'inbound SIP call: the agent could not be prepared');
      return null;
    });
  }

  /** An admitted INVITE refused (the response sent), with why in the log. */
  #refused(ctx: RequestContext, callId: string, r: { status: number; why: string }): void {
    this.deps.log?.info({ source: ctx.remote.address, callId, status: r.status }, `inbound SIP INVITE refused: ${r.why}`);
    this.captures.untrack(callId);
  }
}
