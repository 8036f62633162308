// Outbound calls over SIP (RFC 3261 §13–15): INVITE with an SDP offer, provisional and final
// responses, ACK, holding the answered call, and BYE; CANCEL when the ring timeout passes or the
// caller aborts; digest answers to 401/407. Media belongs to the caller: with `sdp` and
// `onAnswered` it runs the call's RTP (src/media/) and can hang up or transfer (REFER) the call;
// without them a port is bound and only the packets reaching it are counted.
import dgram from 'node:dgram';
import net from 'node:net';
import { authorize, challengesOf, type Challenge } from './digest.ts';
import {
  bracket, failureText, newBranch, newCallId, newTag, SipAbortError, type Destination, type RequestContext, type SipEndpoint, type Transport,
} from './endpoint.ts';
import { parseCSeq, parseNameAddr, parseUri, SipHeaders, type SipRequest, type SipResponse } from './message.ts';
import { SipDialog, type CallControls } from './dialog.ts';
import { buildOffer, parseSdp, type SdpAudio } from './sdp.ts';

export type CallOutcome = 'completed' | 'busy' | 'declined' | 'no-answer' | 'failed' | 'canceled';

export interface SipRoute {
  /** The host of the Request-URI (the customer's PBX or carrier). */
  host: string;
  port?: number;
  transport?: Transport;
  /** An outbound proxy: requests go there, with a Route header naming it (loose routing). */
  proxy?: { host: string; port?: number };
}

/** Digest credentials and where they may be used (PlaceCallOptions.credentials). */
export interface SipCredentials {
  username: string;
  password: string;
  authUsername?: string;
  realm?: string;
  host?: string;
}

/** Whether credentials bound to `c.host` may answer a challenge to a request sent to `host`. */
export function credentialsFor(c: SipCredentials | undefined, host: string): SipCredentials | undefined {
  if (!c) return undefined;
  const unbracket = (h: string) => h.replace(/^\[|\]$/g, '').toLowerCase();
  return c.host === undefined || unbracket(c.host) === unbracket(host) ? c : undefined;
}

export interface PlaceCallOptions {
  /** A phone number or user (becomes sip:target@route.host[:port]) or a full SIP URI. */
  target: string;
  /** Our user (becomes sip:from@our host) or a full SIP URI. */
  from: string;
  fromDisplay?: string;
  route: SipRoute;
  /**
   * For 401/407 challenges from the far end or a proxy. A secret answers only its own host: with
   * `host`, a challenge is answered only when the request went to that host (the route's next hop:
   * its proxy, else its host; compared case-insensitively), and in the dialog only while its
   * requests go there too; with `realm`, only a challenge of that realm.
   */
  credentials?: SipCredentials;
  /** How long it may ring before we CANCEL (outcome no-answer). */
  ringTimeoutMs: number;
  /** How long to wait for any response to the INVITE before giving up (Timer B; default 32 s). */
  inviteTimeoutMs?: number;
  /** How long an answered call is held before we send BYE (outcome completed). */
  maxDurationMs: number;
  /** Abort: before the answer CANCELs (outcome canceled), after it sends BYE (outcome completed). */
  signal?: AbortSignal;
  /** An SDP offer to send instead of ours (then no RTP port is bound). */
  sdp?: string;
  callId?: string;
  /** Extra headers for the INVITE (e.g. X- headers, P-Asserted-Identity). */
  headers?: Record<string, string>;
  onProgress?: (event: { phase: 'trying' | 'ringing' | 'answered' | 'ended'; status?: number; at: Date }) => void;
  /** The call was answered (and ACKed): what the answer's SDP said, and the call's controls. */
  onAnswered?: (call: AnsweredCall) => void;
}

/** What the caller of placeSipCall may do with an answered call. */
export interface AnsweredCall extends CallControls {
  /** The answer's audio stream (null: no SDP, or no audio in it). */
  remote: SdpAudio | null;
  /** Ends the call from our side (BYE); placeSipCall resolves `completed`, ended by us. */
  hangup(): void;
}

export interface CallResult {
  outcome: CallOutcome;
  /** The final SIP status of the INVITE (200 for answered calls). */
  status?: number;
  reason?: string;
  callId: string;
  /** From the answer to the end; 0 when never answered. */
  durationMs: number;
  answeredAt?: Date;
  /** Who ended an answered call. */
  endedBy?: 'local' | 'remote';
  /** The call was handed on by a REFER the far end carried out. */
  transferred?: boolean;
  /** What the answer's SDP said and how many RTP packets reached our port. */
  media?: { localPort?: number; remote?: SdpAudio | null; packetsReceived: number };
}

const BUSY = new Set([486, 600]);
const DECLINED = new Set([603]);
const NO_ANSWER = new Set([408, 480]);

export async function placeSipCall(endpoint: SipEndpoint, o: PlaceCallOptions): Promise<CallResult> {
  const transport: Transport = o.route.transport ?? 'UDP';
  const defaultPort = transport === 'TLS' ? 5061 : 5060;
  const adv = endpoint.advertised;
  const callId = o.callId ?? newCallId(adv.host);
  const started = Date.now();
  const result = (r: Omit<CallResult, 'callId' | 'durationMs'> & { durationMs?: number }): CallResult => ({ durationMs: 0, callId, ...r });
  if (o.signal?.aborted) return result({ outcome: 'canceled', reason: 'aborted before dialing' });

  const tparam = transport === 'UDP' ? '' : `;transport=${transport.toLowerCase()}`;
  const targetUri = /^sips?:/i.test(o.target) ? o.target : `sip:${o.target}@${bracket(o.route.host)}${o.route.port ? `:${o.route.port}` : ''}${tparam}`;
  const fromUri = /^sips?:/i.test(o.from) ? o.from : `sip:${o.from}@${bracket(adv.host)}`;
  const fromTag = newTag();
  const fromValue = `${o.fromDisplay ? `"${o.fromDisplay.replace(/["\\]/g, '')}" ` : ''}<${fromUri}>;tag=${fromTag}`;
  const toValue = `<${targetUri}>`;
  const next: Destination = o.route.proxy
    ? { transport, host: o.route.proxy.host, port: o.route.proxy.port ?? defaultPort }
    : { transport, host: o.route.host, port: o.route.port ?? defaultPort };
  const preloaded = o.route.proxy ? [`<sip:${bracket(o.route.proxy.host)}${o.route.proxy.port ? `:${o.route.proxy.port}` : ''}${tparam};lr>`] : [];

  // Media: a port for the far end's RTP; packets are counted, not played.
  let rtp: dgram.Socket | undefined;
  let packetsReceived = 0;
  let offer = o.sdp;
  if (!offer) {
    rtp = dgram.createSocket(net.isIPv6(endpoint.host) ? 'udp6' : 'udp4');
    rtp.on('message', () => { packetsReceived++; });
    rtp.on('error', () => undefined);
    await new Promise<void>((resolve, reject) => {
      rtp!.once('error', reject);
      rtp!.bind({ address: endpoint.host, port: 0 }, () => resolve());
    });
    offer = buildOffer({ address: adv.host, port: rtp.address().port });
  }
  const media = () => ({ ...(rtp ? { localPort: safePort(rtp) } : {}), remote: remoteSdp, packetsReceived });
  let remoteSdp: SdpAudio | null | undefined;

  // In-dialog requests from the far end (BYE, re-INVITE…) come here.
  let remoteBye: (() => void) | undefined;
  let remoteByeSeen = false;
  let dialog: SipDialog | undefined;
  const releaseDialog = endpoint.onDialog(callId, (req, ctx) => onInDialog(endpoint, req, ctx, offer!, () => {
    remoteByeSeen = true;
    remoteBye?.();
  }, (notify) => dialog?.onNotify(notify)));

  let cseq = 0;
  // The credentials answer only the host they are for: the INVITE's next hop must be it.
  const credentials = credentialsFor(o.credentials, next.host);
  const auth = new Map<Challenge['kind'], { challenge: Challenge; nc: number }>();
  const authHeaders = (method: string, uri: string): Array<[string, string]> => {
    if (!credentials) return [];
    const user = credentials.authUsername || credentials.username;
    return [...auth.values()].map((e) => {
      const a = authorize(e.challenge, { username: user, password: credentials.password }, method, uri, ++e.nc);
      return [a.name, a.value];
    });
  };

  const progress = (phase: 'trying' | 'ringing' | 'answered' | 'ended', status?: number) => {
    try { o.onProgress?.({ phase, status, at: new Date() }); } catch { /* a listener's failure is not ours */ }
  };

  try {
    let invite: SipRequest | undefined;
    let final: SipResponse | undefined;
    let cancelledFor: 'ring-timeout' | 'abort' | undefined;
    /** Set once our ACK is out: re-sends it when the far end repeats its 2xx (our ACK was lost). */
    let resendAck: (() => void) | undefined; // eslint-disable-line prefer-const -- read by a callback defined before its one assignment
    let lateEnded = false;

    for (let attempt = 0; attempt < 3; attempt++) {
      const h = new SipHeaders();
      h.append('Via', endpoint.viaFor(transport, newBranch()));
      for (const r of preloaded) h.append('Route', r);
      h.append('Max-Forwards', 70);
      h.append('From', fromValue);
      h.append('To', toValue);
      h.append('Call-ID', callId);
      h.append('CSeq', `${++cseq} INVITE`);
      h.append('Contact', endpoint.contactFor(typeof o.from === 'string' && !/^sips?:/i.test(o.from) ? o.from : undefined, transport));
      h.append('Allow', 'INVITE, ACK, CANCEL, BYE, OPTIONS, INFO');
      for (const [n, v] of Object.entries(o.headers ?? {})) h.append(n, v);
      for (const [n, v] of authHeaders('INVITE', targetUri)) h.append(n, v);
      h.append('Content-Type', 'application/sdp');
      invite = { kind: 'request', method: 'INVITE', uri: targetUri, headers: h, body: Buffer.from(offer) };

      const abandon = new AbortController();
      let provisional = false;
      let cancelSent = false;
      const inv = invite;
      const sendCancel = (why: 'ring-timeout' | 'abort') => {
        cancelledFor ??= why;
        if (cancelSent) return;
        if (!provisional) {
          // RFC 3261 §9.1: no CANCEL before a provisional. An abort does not wait for one: the INVITE is
          // abandoned (a late 2xx is still ACKed and ended); a ring timeout waits for it (or Timer B).
          if (why === 'abort') abandon.abort();
          return;
        }
        cancelSent = true;
        const c = new SipHeaders();
        c.append('Via', inv.headers.getAll('via')[0]);
        for (const r of preloaded) c.append('Route', r);
        c.append('Max-Forwards', 70);
        c.append('From', fromValue);
        c.append('To', toValue);
        c.append('Call-ID', callId);
        c.append('CSeq', `${parseCSeq(inv.headers.get('cseq')!).seq} CANCEL`);
        endpoint.request({ kind: 'request', method: 'CANCEL', uri: targetUri, headers: c, body: Buffer.alloc(0) }, next, { timeoutMs: 32_000 })
          .catch(() => undefined);
        // The far end owes a 487; if it never comes, stop waiting.
        guard = setTimeout(() => abandon.abort(), 32_000);
      };
      let guard: NodeJS.Timeout | undefined;
      const ringLeft = Math.max(0, o.ringTimeoutMs - (Date.now() - started));
      const ringTimer = setTimeout(() => sendCancel('ring-timeout'), ringLeft);
      const onAbort = () => sendCancel('abort');
      o.signal?.addEventListener('abort', onAbort, { once: true });
      try {
        progress('trying');
        final = await endpoint.request(invite, next, {
          timeoutMs: o.inviteTimeoutMs ?? 32_000,
          signal: abandon.signal,
          onProvisional: (res) => {
            // Any provisional, 100 included, allows a CANCEL (RFC 3261 §9.1) and ends Timer B in the
            // transaction: after a bare 100 only our CANCEL at the ring timeout can end the call.
            if (!provisional) {
              provisional = true;
              if (cancelledFor) sendCancel(cancelledFor);
            }
            if (res.status === 180 || res.status === 183) progress('ringing', res.status);
          },
          on2xxRetransmit: (res) => {
            if (resendAck) resendAck();
            // A 2xx after we gave up on the INVITE: accept it and end it at once, so the far end is not left hanging.
            else if (!lateEnded) {
              lateEnded = true;
              void endLate(endpoint, res, inv, fromValue, transport, preloaded, next);
            }
          },
        });
      } catch (err) {
        if (err instanceof SipAbortError) {
          return result({ outcome: cancelledFor === 'abort' ? 'canceled' : 'no-answer', reason: 'no final response after CANCEL', media: media() });
        }
        // Refused, closed and silent ports read alike (failureText): the outcome is no port scanner.
        const reason = failureText(err, next);
        return result({ outcome: cancelledFor === 'abort' ? 'canceled' : 'failed', reason, media: media() });
      } finally {
        clearTimeout(ringTimer);
        clearTimeout(guard);
        o.signal?.removeEventListener('abort', onAbort);
      }

      if ((final.status === 401 || final.status === 407) && credentials && !cancelledFor) {
        const kind = final.status === 407 ? 'proxy' : 'www';
        const realm = credentials.realm?.toLowerCase();
        const c = challengesOf(final.headers, final.status).find((x) => !realm || x.realm.toLowerCase() === realm);
        if (c && (!auth.has(kind) || c.stale)) {
          auth.set(kind, { challenge: c, nc: 0 });
          continue;
        }
      }
      break;
    }

    if (!final || !invite) return result({ outcome: 'failed', reason: 'no INVITE sent', media: media() });
    if (final.status >= 300) {
      let outcome: CallOutcome;
      if (cancelledFor === 'abort') outcome = 'canceled';
      else if (cancelledFor === 'ring-timeout' || NO_ANSWER.has(final.status)) outcome = 'no-answer';
      else if (BUSY.has(final.status)) outcome = 'busy';
      else if (DECLINED.has(final.status)) outcome = 'declined';
      else outcome = 'failed';
      progress('ended', final.status);
      return result({ outcome, status: final.status, reason: final.reason, media: media() });
    }

    // Answered: build the dialog from the 2xx and ACK it.
    const answeredAt = new Date();
    const inviteCSeq = parseCSeq(invite.headers.get('cseq')!).seq;
    const route = dialogFrom(final, transport, preloaded, next);
    remoteSdp = final.body.length ? parseSdp(final.body.toString('utf8')) : null;
    const ackHeaders = dialogHeaders(route, fromValue, final, callId, `${inviteCSeq} ACK`);
    for (const [n, v] of invite.headers.entries()) if (/^(proxy-)?authorization$/i.test(n)) ackHeaders.append(n, v);
    ackHeaders.prepend('Via', endpoint.viaFor(route.dest.transport, newBranch()));
    const ack: SipRequest = { kind: 'request', method: 'ACK', uri: route.target, headers: ackHeaders, body: Buffer.alloc(0) };
    const sendAck = () => endpoint.send(ack, route.dest).catch(() => undefined);
    await sendAck();
    resendAck = () => void sendAck();
    dialog = new SipDialog(endpoint, {
      callId, local: fromValue, remote: final.headers.get('to')!, target: route.target, routes: route.routes, dest: route.dest, cseq: inviteCSeq,
    // In the dialog the credentials answer only while its requests go to their host as well.
    }, credentialsFor(o.credentials, route.dest.host) ? authHeaders : undefined);
    progress('answered', final.status);

    if (cancelledFor) {
      // The answer crossed our CANCEL: the call is up, so end it at once.
      await dialog.bye();
      progress('ended');
      return result({ outcome: cancelledFor === 'abort' ? 'canceled' : 'no-answer', status: final.status, reason: final.reason, answeredAt, media: media() });
    }

    // Hold until the far end hangs up, the maximum duration passes, the caller aborts, or the
    // media's owner hangs up or transfers the call.
    const held = dialog;
    let transferred = false;
    const endedBy = await new Promise<'local' | 'remote'>((resolve) => {
      if (remoteByeSeen) return resolve('remote');
      const timer = setTimeout(() => finish('local'), o.maxDurationMs);
      const onAbort = () => finish('local');
      o.signal?.addEventListener('abort', onAbort, { once: true });
      remoteBye = () => finish('remote');
      function finish(by: 'local' | 'remote') {
        clearTimeout(timer);
        o.signal?.removeEventListener('abort', onAbort);
        resolve(by);
      }
      try {
        o.onAnswered?.({
          remote: remoteSdp ?? null,
          hangup: () => finish('local'),
          refer: async (referTo) => {
            const r = await held.refer(referTo, fromUri);
            if (r.ok) {
              transferred = true;
              finish('local');
            }
            return r;
          },
        });
      } catch { /* the media owner's failure is not the call's */ }
    });
    held.close(endedBy === 'local' ? 'the call was ended by us' : 'the far end hung up');
    if (endedBy === 'local' && !remoteByeSeen) await held.bye();
    progress('ended');
    return result({
      outcome: 'completed', status: final.status, reason: final.reason, answeredAt, durationMs: Date.now() - answeredAt.getTime(), endedBy,
      ...(transferred ? { transferred: true } : {}), media: media(),
    });
  } finally {
    releaseDialog();
    if (rtp) await new Promise<void>((r) => rtp!.close(() => r()));
  }
}

function safePort(sock: dgram.Socket): number | undefined {
  try { return sock.address().port; } catch { return undefined; }
}

interface Dialog { target: string; routes: string[]; dest: Destination }

/** The headers of a request we send in the dialog a 2xx made (ACK, BYE); the endpoint adds Via. */
function dialogHeaders(dialog: Dialog, fromValue: string, answer: SipResponse, callId: string, cseq: string): SipHeaders {
  const h = new SipHeaders();
  for (const r of dialog.routes) h.append('Route', r);
  h.append('Max-Forwards', 70);
  h.append('From', fromValue);
  h.append('To', answer.headers.get('to')!);
  h.append('Call-ID', callId);
  h.append('CSeq', cseq);
  return h;
}

/** RFC 3261 §12.1.2: the remote target is the 2xx's Contact, the route set its Record-Route reversed. */
function dialogFrom(res: SipResponse, transport: Transport, preloaded: string[], fallback: Destination): Dialog {
  const contact = res.headers.getAll('contact')[0];
  let target = fallback.host;
  try { target = parseNameAddr(contact ?? '').uri; } catch { /* keep the fallback */ }
  const routes = res.headers.getAll('record-route').reverse();
  const first = routes[0] ?? preloaded[0];
  let dest = fallback;
  const hop = first ? parseNameAddr(first).uri : target;
  try {
    const u = parseUri(hop);
    const t = (u.params.transport?.toUpperCase() as Transport | undefined) ?? (u.scheme === 'sips' ? 'TLS' : transport);
    dest = { transport: t, host: u.host.replace(/^\[|\]$/g, ''), port: u.port ?? (t === 'TLS' ? 5061 : 5060) };
  } catch { /* keep the fallback */ }
  if (!/^sips?:/i.test(target)) target = `sip:${fallback.host}:${fallback.port}`;
  return { target, routes: routes.length ? routes : preloaded, dest };
}

/** A 2xx to an INVITE we had abandoned: ACK it and hang up. */
async function endLate(endpoint: SipEndpoint, res: SipResponse, invite: SipRequest, fromValue: string, transport: Transport, preloaded: string[], next: Destination): Promise<void> {
  try {
    const dialog = dialogFrom(res, transport, preloaded, next);
    const seq = parseCSeq(invite.headers.get('cseq')!).seq;
    const callId = invite.headers.get('call-id')!;
    const h = dialogHeaders(dialog, fromValue, res, callId, `${seq} ACK`);
    await endpoint.send({ kind: 'request', method: 'ACK', uri: dialog.target, headers: h, body: Buffer.alloc(0) }, dialog.dest);
    await new SipDialog(endpoint, { callId, local: fromValue, remote: res.headers.get('to')!, target: dialog.target, routes: dialog.routes, dest: dialog.dest, cseq: seq }).bye();
  } catch { /* best effort */ }
}

function onInDialog(endpoint: SipEndpoint, req: SipRequest, ctx: RequestContext, sdp: string, onBye: () => void, onNotify: (req: SipRequest) => void): void {
  switch (req.method) {
    case 'ACK':
      return;
    case 'BYE':
      endpoint.respond(req, ctx, 200, 'OK');
      onBye();
      return;
    case 'INVITE':
      // A re-INVITE (session refresh or hold): keep the session as it is.
      endpoint.respond(req, ctx, 200, 'OK', { Contact: endpoint.contactFor(undefined, ctx.remote.transport), 'Content-Type': 'application/sdp' }, sdp);
      return;
    case 'CANCEL':
      return; // answered by the endpoint
    case 'NOTIFY':
      endpoint.respond(req, ctx, 200, 'OK');
      onNotify(req);
      return;
    default:
      endpoint.respond(req, ctx, 200, 'OK');
  }
}
