// The UDP ports calls take their RTP on: even ports of a configured range (CALLPLANE_RTP_PORT_MIN
// to _MAX), each held by one call from bind to close. RTP takes the even port and leaves the odd
// one above it for RTCP (RFC 3550 §11), so a range of N ports carries N/2 calls.
import dgram from 'node:dgram';
import net from 'node:net';

export interface PortRange {
  /** Lowest port, even. */
  portMin: number;
  /** Highest port, even, above portMin. */
  portMax: number;
}

/** Every port of the range is held by a call (or taken by another process). */
export class PortsExhaustedError extends Error {
  constructor(range: PortRange) {
    super(`no free RTP port between ${range.portMin} and ${range.portMax}`);
    this.name = 'PortsExhaustedError';
  }
}

/** A socket bound to a port of the pool; `release()` closes it and gives the port back (once). */
export interface BoundPort {
  socket: dgram.Socket;
  port: number;
  release(): Promise<void>;
}

export function checkPortRange(r: PortRange): string | null {
  const { portMin, portMax } = r;
  if (!Number.isInteger(portMin) || !Number.isInteger(portMax)) return 'the RTP ports must be integers';
  if (portMin < 1024 || portMax > 65534) return 'the RTP ports must be within 1024-65534 (RTCP takes the odd port above each)';
  if (portMin % 2 !== 0 || portMax % 2 !== 0) return 'the RTP ports must be even';
  if (portMin >= portMax) return 'the lowest RTP port must be below the highest';
  return null;
}

/**
 * Hands out the even ports of a range, each to one holder at a time. Ports are taken round robin
 * from where the last one was found, so a port just given back is the last to be reused (late
 * packets of an ended call do not reach the next one). A port another process holds is skipped.
 */
export class PortPool {
  readonly range: Readonly<PortRange>;
  private readonly held = new Set<number>();
  private next: number;

  constructor(range: PortRange) {
    const bad = checkPortRange(range);
    if (bad) throw new RangeError(bad);
    this.range = Object.freeze({ ...range });
    const slots = this.capacity;
    this.next = range.portMin + 2 * Math.floor(Math.random() * slots);
  }

  /** How many ports the range holds. */
  get capacity(): number {
    return (this.range.portMax - this.range.portMin) / 2 + 1;
  }

  /** How many ports are held now. */
  get inUse(): number {
    return this.held.size;
  }

  /** Whether `port` is held by someone now. */
  isHeld(port: number): boolean {
    return this.held.has(port);
  }

  /** Takes a free port (not bound yet), or null when every port is held. */
  acquire(): number | null {
    const { portMin, portMax } = this.range;
    for (let i = 0; i < this.capacity; i++) {
      const port = this.next;
      this.next = port + 2 > portMax ? portMin : port + 2;
      if (!this.held.has(port)) {
        this.held.add(port);
        return port;
      }
    }
    return null;
  }

  /** Gives a port back (a port not held is ignored). */
  release(port: number): void {
    this.held.delete(port);
  }

  /**
   * Binds a UDP socket on `host` to a free port of the range: tries each free port at most once,
   * skipping those another process has bound, and rejects with PortsExhaustedError when none is
   * left. Any other bind error (an address not on this machine) rejects at once.
   */
  async bind(host: string): Promise<BoundPort> {
    for (let tries = 0; tries < this.capacity; tries++) {
      const port = this.acquire();
      if (port === null) break;
      const socket = dgram.createSocket({ type: net.isIPv6(host) ? 'udp6' : 'udp4' });
      try {
        await new Promise<void>((resolve, reject) => {
          socket.once('error', reject);
          socket.bind({ address: host, port, exclusive: true }, () => {
            socket.off('error', reject);
            resolve();
          });
        });
      } catch (err) {
        this.release(port);
        try { socket.close(); } catch { /* never bound */ }
        if ((err as NodeJS.ErrnoException).code === 'EADDRINUSE') continue;
        throw err;
      }
      let released: Promise<void> | undefined;
      return {
        socket, port,
        release: () => {
          released ??= new Promise<void>((resolve) => {
            try {
              socket.close(() => resolve());
            } catch {
              resolve(); // closed already
            }
          }).finally(() => this.release(port));
          return released;
        },
      };
    }
    throw new PortsExhaustedError(this.range);
  }
}
