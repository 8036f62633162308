export const nowMs = (): number => Date.now();
export const toUnixSeconds = (ms: number | null | undefined): number | null =>
  ms === null || ms === undefined ? null : Math.floor(ms / 1000);

/**
 * `p`, or what `timedOut()` returns (or throws) when `p` has not settled within `ms`. The timer is
 * cleared as soon as the race is decided: a `Promise.race` with a plain sleep leaves its timer
 * running, which keeps a stopped process (or a test file's) alive until it fires.
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
