// Draining a process's calls on SIGTERM (docs/deploy.md): a worker's SIP calls and an API
// process's Twilio Media Streams run to their end for up to CALLPLANE_DRAIN_SECONDS, then those
// still up end politely (the agent's closing line and a hang-up).

/** Longest the closing lines of calls still up at the end of the drain may take. */
export const WRAP_UP_MS = 15_000;

/** What a drain needs of the calls a process carries. */
export interface DrainableCalls {
  readonly active?: number;
  wrapUpAll?(): Promise<void>;
}

/**
 * Waits for the calls to end by themselves, up to `drainMs`; those still up then end politely,
 * for up to WRAP_UP_MS.
 */
export async function drainCalls(calls: DrainableCalls, drainMs: number, log: { info(obj: object, msg: string): void }): Promise<void> {
  const until = Date.now() + drainMs;
  if (calls.active) log.info({ calls: calls.active, drainSeconds: drainMs / 1000 }, 'draining: waiting for calls in progress to end');
  while ((calls.active ?? 0) > 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 100));
  if (!calls.active || !calls.wrapUpAll) return;
  log.info({ calls: calls.active }, 'draining: the drain time has passed; ending the calls still up with a closing line');
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([calls.wrapUpAll(), new Promise((r) => { timer = setTimeout(r, WRAP_UP_MS); })]);
  clearTimeout(timer);
}
