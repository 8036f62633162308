// What the parts of a worker's SIP runtime (sip-worker.ts composes them: registrations.ts,
// inbound.ts, captures.ts) are given: the worker's dependencies, and the state they read from it.
import type { Config } from '../../config.ts';
import type { Database } from '../../db/index.ts';
import type { PortPool } from '../../media/port-pool.ts';
import type { VoiceCalls } from '../../media/voice-transport.ts';
import type { SecretBox } from '../../lib/crypto.ts';
import type { Wakeups } from '../../queue/waker.ts';
import type { SipEndpoint, SipLog } from '../../sip/endpoint.ts';

export interface SipRuntimeLog extends SipLog {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

export interface SipWorkerDeps {
  database: Database;
  config: Config;
  box: SecretBox;
  log?: SipRuntimeLog;
  /** The process's one wake-up bus: registration API changes wake the owner; queued events wake deliveries. */
  wakeups: Wakeups;
  /** Listener address and port (default config.sipHost/sipPort); tests bind 127.0.0.x:0. */
  host?: string;
  port?: number;
  advertiseHost?: string;
  /** How often the owner loop looks at its registrations without being woken (default 1 s). */
  pollMs?: number;
  /** How long a registration stays ours without renewal (default config.sipLeaseMs; renewed every third). */
  leaseMs?: number;
  /** Bound of one REGISTER exchange (default 10 s). */
  registerTimeoutMs?: number;
  /** Backoff after a failed REGISTER: first delay and cap (defaults 10 s and 10 min). */
  retryMinMs?: number;
  retryMaxMs?: number;
  /** Registrations one process takes per turn. */
  claimBatch?: number;
  /** Who talks on calls (the agent runtime, from the composition root); absent: answered calls are held silent. */
  voice?: VoiceCalls;
  /** RTP ports (default config.rtpPortMin–rtpPortMax); tests take their own ranges. */
  rtpPorts?: { portMin: number; portMax: number };
  /** No RTP from the far end this long ends a call (default 30 s). */
  mediaTimeoutMs?: number;
}

/** The worker as its parts see it. */
export interface WorkerState {
  /** The process's SIP endpoint while the worker runs (undefined before start() and after stop()). */
  readonly endpoint: SipEndpoint | undefined;
  /** stop() has begun: nothing new is started. */
  readonly stopping: boolean;
  /** The process is draining (SIGTERM): new INVITEs are answered 503 with Retry-After; calls in progress go on. */
  readonly draining?: boolean;
  /** The process's RTP ports. */
  readonly ports: PortPool;
}

/** Whose the messages of a Call-ID are, for captures (captures.ts). */
export interface CallTracker {
  track(callId: string, orgId: number): void;
  untrack(callId: string): void;
}
