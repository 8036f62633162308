// The requests we send inside an established INVITE dialog (RFC 3261 §12.2.1), the same whether
// we placed the call (call.ts) or answered it (answer.ts): BYE, and REFER for a
// blind transfer (RFC 3515, RFC 5589 §6) whose progress the far end reports in NOTIFYs carrying a
// sipfrag (RFC 3420). CSeq numbers count up from the dialog's last one.
import type { Destination, SipEndpoint } from './endpoint.ts';
import { SipHeaders, type SipRequest, type SipResponse } from './message.ts';

export interface DialogState {
  callId: string;
  /** Our side: the From of what we send (with our tag). */
  local: string;
  /** The far side: the To of what we send (with its tag). */
  remote: string;
  /** The remote target (its Contact URI). */
  target: string;
  /** The route set, in the order Route headers are sent. */
  routes: string[];
  /** Where requests go (the first route, or the target). */
  dest: Destination;
  /** The last CSeq number we used in this dialog. */
  cseq: number;
}

/** How a transfer went, from the far end's NOTIFYs (or the REFER's own answer when refused). */
export interface TransferOutcome {
  /** True when the transfer target answered (sipfrag 2xx). */
  ok: boolean;
  /** The final status that decided it (the REFER's rejection, or the sipfrag's), 0 when none came. */
  status: number;
  reason: string;
}

/** What the owner of an answered call's media may do with the call, placed (call.ts) or answered (answer.ts). */
export interface CallControls {
  /** Ends the call from our side (BYE). */
  hangup(): void | Promise<void>;
  /** A blind transfer: REFER the far end to `referTo` (a SIP URI); on success the call is ended (BYE). */
  refer(referTo: string): Promise<TransferOutcome>;
}

/** Digest answers for a request we send (the caller's credentials), or none. */
export type AuthFor = (method: string, uri: string) => Array<[string, string]>;

const SIPFRAG = /^SIP\/2\.0\s+(\d{3})\s*(.*)$/m;

export class SipDialog {
  #waiting: ((o: TransferOutcome) => void) | undefined;
  /** Why the call ended, once it has: a transfer still waiting (or asked for later) fails with it. */
  #closed: string | undefined;

  constructor(private readonly endpoint: SipEndpoint, readonly state: DialogState, private readonly auth: AuthFor = () => []) {}

  #headers(method: string): SipHeaders {
    const s = this.state;
    const h = new SipHeaders();
    for (const r of s.routes) h.append('Route', r);
    h.append('Max-Forwards', 70);
    h.append('From', s.local);
    h.append('To', s.remote);
    h.append('Call-ID', s.callId);
    h.append('CSeq', `${++s.cseq} ${method}`);
    return h;
  }

  /** One in-dialog request, answered again once with credentials after a 401/407. */
  async request(method: string, extra: Array<[string, string]> = [], timeoutMs = 32_000): Promise<SipResponse> {
    let res: SipResponse | undefined;
    for (let attempt = 0; attempt < 2; attempt++) {
      const h = this.#headers(method);
      for (const [n, v] of extra) h.append(n, v);
      if (attempt > 0) for (const [n, v] of this.auth(method, this.state.target)) h.append(n, v);
      const req: SipRequest = { kind: 'request', method, uri: this.state.target, headers: h, body: Buffer.alloc(0) };
      res = await this.endpoint.request(req, this.state.dest, { timeoutMs });
      if (res.status !== 401 && res.status !== 407) return res;
    }
    return res!;
  }

  /** Ends the call from our side; undefined when the far end never answered the BYE. */
  async bye(): Promise<SipResponse | undefined> {
    try {
      return await this.request('BYE');
    } catch {
      return undefined; // nothing more we can do: the dialog is over for us
    }
  }

  /**
   * A blind transfer: REFER the far end to `referTo` (a SIP URI) and wait for the NOTIFY that
   * says how the new call went (at most `timeoutMs`). The dialog stays up: on success the caller
   * ends it with bye(); on failure the call goes on.
   */
  async refer(referTo: string, referredBy: string, timeoutMs = 30_000): Promise<TransferOutcome> {
    if (this.#closed) return { ok: false, status: 0, reason: this.#closed };
    if (this.#waiting) return { ok: false, status: 0, reason: 'a transfer is already under way' };
    let settle!: (o: TransferOutcome) => void;
    const outcome = new Promise<TransferOutcome>((resolve) => {
      const timer = setTimeout(() => settle({ ok: false, status: 0, reason: `no final NOTIFY within ${timeoutMs} ms` }), timeoutMs);
      settle = (o) => {
        clearTimeout(timer);
        if (this.#waiting === settle) this.#waiting = undefined;
        resolve(o);
      };
    });
    this.#waiting = settle;
    // The REFER's own answer is not waited for past the outcome (the call ending settles it).
    void this.request('REFER', [['Refer-To', `<${referTo}>`], ['Referred-By', `<${referredBy}>`]]).then(
      (res) => { if (res.status >= 300) settle({ ok: false, status: res.status, reason: `REFER refused: ${res.status} ${res.reason}` }); },
      (err: Error) => settle({ ok: false, status: 0, reason: `REFER was not answered: ${err.message}` }),
    );
    return outcome;
  }

  /**
   * The call is over (either side's BYE, or ours): a transfer waiting on the far end's NOTIFY
   * fails at once with `reason` instead of holding its caller until its timeout, and no new one starts.
   */
  close(reason = 'the call ended'): void {
    this.#closed ??= reason;
    this.#waiting?.({ ok: false, status: 0, reason: this.#closed });
  }

  /**
   * A NOTIFY in this dialog: when it reports on our REFER (Event: refer), its sipfrag's final
   * status settles the transfer. The caller answers it 200 either way.
   */
  onNotify(req: SipRequest): void {
    if (!/^refer\b/i.test(req.headers.get('event') ?? '')) return;
    const frag = SIPFRAG.exec(req.body.toString('utf8').slice(0, 1024));
    const status = frag ? Number(frag[1]) : 0;
    const terminated = /^terminated\b/i.test(req.headers.get('subscription-state') ?? '');
    if (status >= 200) this.#waiting?.({ ok: status < 300, status, reason: (frag?.[2] ?? '').trim().slice(0, 100) });
    else if (terminated) this.#waiting?.({ ok: false, status, reason: 'the transfer subscription ended without a final status' });
  }
}

/**
 * The SIP URI a transfer destination stands for, at the far end's host: an E.164 number or an
 * `ext:`/`pbx:` extension becomes sip:<it>@host; a SIP URI stays as it is.
 */
export function referTarget(destination: string, host: string): string {
  const d = destination.trim();
  if (/^sips?:/i.test(d)) return d;
  const user = d.replace(/^(ext|pbx):/i, '').replace(/[^0-9A-Za-z+*#._-]/g, '');
  return `sip:${user}@${host}`;
}
