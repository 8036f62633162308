// The SIP side of a worker process: one SipEndpoint (our listener and client transactions) and
// the parts that put it to work, each in its own file:
//   registrations.ts  the registrations this process owns through a lease in the database (one
//                     owner per registration across processes; a crashed owner's registrations are
//                     taken over once its lease expires), kept registered, their status written
//   events.ts         the registration events those status changes record and queue as webhooks
//   inbound.ts        the inbound request policy (OPTIONS answered, INVITEs only from whitelisted
//                     addresses, answered by the SIP engine, src/sip/answer.ts, with the agent)
//   captures.ts       the capture of every SIP message of our calls and registrations for
//                     GET /api/v2/sip/captures
// This file starts and stops them together and is what the platform, the SIP carrier and the
// tests use.
import crypto from 'node:crypto';
import os from 'node:os';
import fs from 'node:fs';
import { PortPool } from '../../media/port-pool.ts';
import type { VoiceCalls } from '../../media/voice-transport.ts';
import { Waker } from '../../queue/waker.ts';
import { type SipEndpointOptions, SipEndpoint } from '../../sip/endpoint.ts';
import { addressRefusal, policyFromConfig } from '../../webhooks/ssrf.ts';
import { CAPTURE_FLUSH_MS, SipCaptures } from './captures.ts';
import { InboundCalls } from './inbound.ts';
import { RegistrationOwner } from './registrations.ts';
import { SIP_REGISTRATIONS } from './service.ts';
import type { SipWorkerDeps, WorkerState } from './worker-deps.ts';

export type { SipRuntimeLog, SipWorkerDeps } from './worker-deps.ts';

/** The first non-internal IPv4 address of the machine: what a 0.0.0.0 listener advertises by default. */
export function defaultAdvertiseHost(bound: string): string {
  if (bound !== '0.0.0.0' && bound !== '::') return bound;
  for (const list of Object.values(os.networkInterfaces())) {
    for (const i of list ?? []) if (i.family === 'IPv4' && !i.internal) return i.address;
  }
  return '127.0.0.1';
}

export class SipWorker implements WorkerState {
  readonly ownerId: string;
  #endpoint: SipEndpoint | undefined;
  #stopping = false;
  #draining = false;
  readonly #waker = new Waker();
  #loop: Promise<void> | undefined;
  #unsubscribe: (() => void) | undefined;
  #flushTimer: NodeJS.Timeout | undefined;
  readonly #pollMs: number;
  readonly #captures: SipCaptures;
  readonly #registrations: RegistrationOwner;
  readonly #inbound: InboundCalls;
  /** The RTP ports of this process's calls, inbound and outbound. */
  readonly ports: PortPool;

  constructor(readonly deps: SipWorkerDeps) {
    this.ports = new PortPool(deps.rtpPorts ?? { portMin: deps.config.rtpPortMin, portMax: deps.config.rtpPortMax });
    this.ownerId = `${os.hostname()}:${process.pid}:${crypto.randomBytes(4).toString('hex')}`;
    this.#pollMs = deps.pollMs ?? 1000;
    this.#captures = new SipCaptures(deps);
    this.#registrations = new RegistrationOwner({ ...deps, ownerId: this.ownerId, leaseMs: deps.leaseMs ?? deps.config.sipLeaseMs }, this, this.#captures);
    this.#inbound = new InboundCalls(deps, this, this.#captures);
  }

  /** Who talks on calls (the agent runtime). */
  get voice(): VoiceCalls | undefined {
    return this.deps.voice;
  }

  /** The process's SIP endpoint once started (calls are placed through it). */
  get endpoint(): SipEndpoint | undefined {
    return this.#endpoint;
  }

  /** stop() has begun. */
  get stopping(): boolean {
    return this.#stopping;
  }

  /** drain() has been called: new INVITEs are answered 503 (inbound.ts). */
  get draining(): boolean {
    return this.#draining;
  }

  /**
   * The process is stopping (SIGTERM): from now on new INVITEs are answered 503 with Retry-After;
   * calls in progress, registrations and outbound calls go on until stop().
   */
  drain(): void {
    this.#draining = true;
  }

  /** Bytes of messages held while nobody knows their organization yet (bounded; for tests and metrics). */
  get pendingCaptureBytes(): number {
    return this.#captures.pendingBytes;
  }

  /** Registrations this process runs now (ids). */
  get owned(): number[] {
    return this.#registrations.ids;
  }

  /**
   * Binds the listener and starts owning registrations. The API wakes the owner loop through the
   * process's wake-up bus (which PostgreSQL NOTIFY feeds from other processes).
   */
  async start(): Promise<void> {
    if (this.#endpoint) return;
    const { config, log } = this.deps;
    const host = this.deps.host ?? config.sipHost;
    const tls: SipEndpointOptions['tls'] = { rejectUnauthorized: config.sipTlsRejectUnauthorized };
    if (config.sipTlsCa) tls.ca = fs.readFileSync(config.sipTlsCa);
    // Registrars, proxies, routes and the targets their answers name: the policy of every outbound target.
    const policy = policyFromConfig(config);
    const endpoint = new SipEndpoint({
      host, port: this.deps.port ?? config.sipPort,
      refuseTarget: (address, name) => addressRefusal(address, policy, name, log),
      advertiseHost: this.deps.advertiseHost ?? config.sipAdvertiseHost ?? defaultAdvertiseHost(host),
      tls, log, userAgent: 'callplane',
      onRequest: (req, ctx) => this.#inbound.onRequest(req, ctx),
      onMessage: (dir, msg, remote, raw) => {
        if (this.#endpoint) this.#captures.capture(dir, msg, remote, raw, this.#endpoint.advertised);
      },
    });
    await endpoint.start();
    this.#endpoint = endpoint;
    this.#stopping = false;
    this.#draining = false;
    this.#unsubscribe = this.deps.wakeups.on(SIP_REGISTRATIONS, () => this.#waker.notify());
    this.#flushTimer = setInterval(() => void this.#captures.flush(), CAPTURE_FLUSH_MS);
    this.#flushTimer.unref();
    this.#loop = this.#run();
    log?.info({ owner: this.ownerId, ...endpoint.advertised }, 'SIP runtime started');
  }

  /** Look at the registrations now (a registration was created, changed or deleted). */
  notify(): void {
    this.#waker.notify();
  }

  /**
   * Stops: registrations stop refreshing (they are not un-REGISTERed: another worker takes them
   * over, and the registrar keeps the binding until it expires), leases are given back unless
   * `release` is false (a crash, in tests), answered inbound calls are ended, captures flushed.
   */
  async stop(opts: { release?: boolean } = {}): Promise<void> {
    if (!this.#endpoint) return;
    this.#stopping = true;
    this.#unsubscribe?.();
    this.#waker.notify();
    await this.#loop;
    await this.#registrations.stop(opts.release !== false);
    await this.#inbound.endAll();
    clearInterval(this.#flushTimer);
    await this.#captures.flush();
    await this.#endpoint.stop();
    this.#endpoint = undefined;
  }

  /** Messages of this Call-ID are the organization's (and so are those that arrived just before). */
  track(callId: string, orgId: number): void {
    this.#captures.track(callId, orgId);
  }

  /** The call or registration is over; late retransmissions are still captured for a while. */
  untrack(callId: string): void {
    this.#captures.untrack(callId);
  }

  /** Until stop(): a turn of the registrations, then captures' retention; again when woken or after pollMs. */
  async #run(): Promise<void> {
    while (!this.#stopping) {
      try {
        await this.#registrations.turn();
        if (!this.#stopping) await this.#captures.pruneIfDue();
      } catch (err) {
        this.deps.log?.error({ err }, 'SIP registration turn failed');
      }
      if (this.#stopping) break;
      await this.#waker.wait(this.#pollMs);
    }
  }
}
