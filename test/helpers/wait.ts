// Small waits shared by the tests: poll until a condition holds, sleep, find a free TCP port.
import net from 'node:net';

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * `p`, or what `timedOut()` returns (or throws) when `p` has not settled within `ms`. The timer is
 * cleared as soon as the race is decided: a `Promise.race` with a plain sleep leaves its timer
 * running, and that timer keeps the test file's process alive after its last test.
 */
export async function within<T, U>(p: Promise<T>, ms: number, timedOut: () => U): Promise<T | U> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<U>((resolve, reject) => {
    timer = setTimeout(() => { try { resolve(timedOut()); } catch (err) { reject(err as Error); } }, ms);
  });
  try {
    return await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** Polls `fn` every `everyMs` until it returns a truthy value, which is returned; throws after `timeoutMs`. */
export async function waitFor<T>(what: string, fn: () => Promise<T | undefined | false>, timeoutMs = 20_000, everyMs = 20): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}

/** A TCP port free on 127.0.0.1 right now (for a server a test starts next). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}
