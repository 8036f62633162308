// Inbound requests outside our dialogs: OPTIONS answered (PBX keep-alives), INVITEs attributed to
// an organization by the callee they name and admitted only from addresses on its whitelist
// (refusals captured at a bounded rate), an admitted INVITE answered and held without media until the caller's BYE or
// callMaxSeconds; BYE and NOTIFY for nothing of ours 481, anything else 405.
import dgram from 'node:dgram';
import net from 'node:net';
import { newTag, type RequestContext, type SipEndpoint, type SipRequest } from '../../sip/endpoint.ts';
import { SipHeaders, parseNameAddr, parseUri } from '../../sip/message.ts';
import { buildOffer } from '../../sip/sdp.ts';
import { orgsOwningNumber } from '../numbering/carriers.ts';
import type { SipCaptures } from './captures.ts';
import { formatHost, whitelisted, whitelistMatcher } from './parse.ts';
import { accountRepo } from '../accounts/repository.ts';
import { sipRepo } from './repository.ts';
import type { SipWorkerDeps, WorkerState } from './worker-deps.ts';

/** An inbound call we answered (whitelisted source), held until a BYE or callMaxSeconds. */
interface InboundCall { end(by: 'local' | 'remote'): Promise<void> }

const toTag = (req: SipRequest): string | undefined => {
  try { return parseNameAddr(req.headers.get('to') ?? '').params.tag ?? undefined; } catch { return undefined; }
};

export class InboundCalls {
  readonly #calls = new Set<InboundCall>();

  constructor(
    readonly deps: Pick<SipWorkerDeps, 'database' | 'config' | 'log'>,
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
      default:
        endpoint.respond(req, ctx, 405, 'Method Not Allowed', { Allow: 'INVITE, ACK, CANCEL, BYE, OPTIONS' });
    }
  }

  /** Ends every answered call (BYE from us): the worker stops. */
  async endAll(): Promise<void> {
    await Promise.allSettled([...this.#calls].map((c) => c.end('local')));
  }

  /**
   * The organization an INVITE is for, by what names the callee: the registration whose AOR is its
   * To (or Request-URI); else the organizations whose registration user is the Request-URI's user
   * (calls to our Contact) or whose numbering provider owns the number called (Request-URI or To
   * user, or a tel: URI). Several of those are told apart by their own whitelists: the one whose
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
    if (ruriUser) for (const r of await sipRepo.orgsOfUser(db, ruriUser)) candidates.add(r.org_id);
    for (const n of new Set(numbers)) for (const org of await orgsOwningNumber(db, n)) candidates.add(org);
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
    await this.#answer(endpoint, req, ctx, callId);
  }

  /**
   * Answers a whitelisted INVITE and holds the call (no agent runtime is attached: no media is
   * played) until the caller hangs up or callMaxSeconds pass, then sends BYE.
   */
  async #answer(endpoint: SipEndpoint, req: SipRequest, ctx: RequestContext, callId: string): Promise<void> {
    const tag = newTag();
    // Our To tag is fixed here, so the BYE we may send later carries the same one.
    const answered: SipRequest = { ...req, headers: req.headers.clone().set('To', `${req.headers.get('to')};tag=${tag}`) };
    const rtp = dgram.createSocket(net.isIPv6(endpoint.host) ? 'udp6' : 'udp4');
    rtp.on('error', () => undefined);
    rtp.on('message', () => undefined);
    await new Promise<void>((resolve, reject) => { rtp.once('error', reject); rtp.bind({ address: endpoint.host, port: 0 }, () => resolve()); });
    const adv = endpoint.advertised;
    const sdp = buildOffer({ address: adv.host, port: rtp.address().port });
    let ended = false;
    let release = () => {};
    const remoteTarget = (() => {
      try { return parseNameAddr(req.headers.get('contact') ?? '').uri; } catch { return undefined; }
    })();
    const call: InboundCall = {
      end: async (by) => {
        if (ended) return;
        ended = true;
        clearTimeout(timer);
        this.#calls.delete(call);
        if (by === 'local' && remoteTarget) {
          const h = new SipHeaders();
          for (const r of req.headers.getAll('record-route')) h.append('Route', r);
          h.append('From', answered.headers.get('to')!);
          h.append('To', req.headers.get('from')!);
          h.append('Call-ID', callId);
          h.append('CSeq', '1 BYE');
          await endpoint.request({ kind: 'request', method: 'BYE', uri: remoteTarget, headers: h, body: Buffer.alloc(0) },
            { transport: ctx.remote.transport, host: ctx.remote.address, port: ctx.remote.port }, { timeoutMs: 5000 }).catch(() => undefined);
        }
        release();
        this.captures.untrack(callId);
        await new Promise<void>((r) => rtp.close(() => r()));
      },
    };
    this.#calls.add(call);
    release = endpoint.onDialog(callId, (r, c) => {
      if (r.method === 'ACK') return;
      if (r.method === 'BYE') {
        endpoint.respond(r, c, 200, 'OK');
        void call.end('remote');
        return;
      }
      if (r.method === 'INVITE') {
        endpoint.respond(r, c, 200, 'OK', { Contact: endpoint.contactFor(undefined, c.remote.transport), 'Content-Type': 'application/sdp' }, sdp);
        return;
      }
      endpoint.respond(r, c, 200, 'OK');
    });
    // Set before anything can end the call: a BYE and stop() only reach it later.
    const timer = setTimeout(() => void call.end('local'), this.deps.config.callMaxSeconds * 1000);
    timer.unref();
    endpoint.respond(answered, ctx, 200, 'OK', { Contact: endpoint.contactFor(undefined, ctx.remote.transport), 'Content-Type': 'application/sdp' }, sdp);
    this.deps.log?.info({ source: ctx.remote.address, callId }, 'inbound SIP call answered');
  }
}
