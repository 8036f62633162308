// The live feed (GET /api/v2/conversations/live, Server-Sent Events) followed for a page: fetch with
// the console's header (an EventSource could not send it), the events read by sse.ts, and a new connection with growing waits whenever the stream drops or the
// server ends it. The first connection starts with a snapshot, which replaces what the page held; a
// new one sends the last event's id (Last-Event-ID) and resumes (`resumed`, then what was missed)
// when the server still holds what came since, else starts with a snapshot again.
import { api, CallplaneError } from '../../api.ts';
import type { ErrorBody, LiveConversation, LiveEvent, TranscriptLine } from '../../../../sdk/index.ts';
import { readSse } from './sse.ts';

export type { LiveConversation, TranscriptLine };

export type FeedStatus =
  | { state: 'connecting' }
  | { state: 'connected'; since: number }
  | { state: 'reconnecting'; attempt: number; inSeconds: number; reason: string }
  | { state: 'stopped'; reason: string };

export interface LiveCall extends LiveConversation {
  messages: TranscriptLine[];
  /** Seen in progress, then missing from a later snapshot: it ended while the page was reconnecting. */
  gone?: boolean;
}

/** Waits between attempts: 1, 2, 4, 8, 16, then 30 s (a successful snapshot starts over). */
export function backoffSeconds(attempt: number): number {
  return Math.min(30, 2 ** Math.max(0, attempt - 1));
}

/** Ended conversations the page keeps showing (the newest first); older ones are in the inbox. */
export const KEEP_ENDED = 20;

function trim(calls: LiveCall[]): LiveCall[] {
  let ended = 0;
  return calls.filter((c) => c.endedAt === null && !c.gone ? true : ++ended <= KEEP_ENDED);
}

/** The page's calls after one event (a new array; the calls it changes are new objects). */
export function applyEvent(calls: LiveCall[], e: LiveEvent): LiveCall[] {
  switch (e.event) {
    case 'snapshot': {
      const fresh = new Map(e.data.calls.map((c) => [c.uuid, c]));
      // What ended before (or while) the stream dropped stays on the page with its transcript.
      const kept = calls.filter((c) => !fresh.has(c.uuid)).map((c) => c.endedAt !== null || c.gone ? c : { ...c, gone: true }).slice(0, KEEP_ENDED);
      return [...e.data.calls.map((c) => ({ ...c, messages: [...c.messages] })), ...kept];
    }
    case 'conversation': {
      const i = calls.findIndex((c) => c.uuid === e.data.uuid);
      if (i < 0) return trim([{ ...e.data, messages: [] }, ...calls]);
      const next = [...calls];
      next[i] = { ...calls[i]!, ...e.data, messages: calls[i]!.messages, gone: false };
      return trim(next);
    }
    case 'message': {
      const { conversationId, message } = e.data;
      const i = calls.findIndex((c) => c.uuid === conversationId);
      if (i < 0) return calls; // its conversation event comes first; a line of one we never saw is left to the snapshot
      const call = calls[i]!;
      const at = call.messages.findIndex((m) => m.uuid === message.uuid);
      const messages = at < 0 ? [...call.messages, message] : call.messages.map((m, j) => j === at ? message : m);
      const next = [...calls];
      next[i] = { ...call, messages };
      return next;
    }
    default:
      return calls;
  }
}

/** One connection to the feed: its events, parsed; a refusal is thrown as a CallplaneError with the API's message. */
async function* liveFeedEvents(target: { targetAccountId?: number }, signal: AbortSignal, lastEventId: string | undefined): AsyncGenerator<LiveEvent> {
  const { response, error } = await api.GET('/api/v2/conversations/live', {
    params: { query: target }, parseAs: 'stream', signal,
    headers: { accept: 'text/event-stream', ...(lastEventId ? { 'last-event-id': lastEventId } : {}) },
  });
  if (!response.ok || !response.body) {
    const message = (error as { message?: unknown } | undefined)?.message;
    const body: ErrorBody = { success: false, message: typeof message === 'string' ? message : `${response.status} ${response.statusText}` };
    throw new CallplaneError(response.status, body);
  }
  for await (const e of readSse(response.body)) {
    yield { event: e.event, id: e.id, data: JSON.parse(e.data) as unknown } as LiveEvent;
  }
}

/**
 * Follows the feed until `signal` aborts: `onEvent` for each event, `onStatus` when the connection
 * changes. A refusal that waiting will not cure (401, 403, 404) stops it; anything else retries.
 */
export async function followLive(opts: {
  target: { targetAccountId?: number };
  signal: AbortSignal;
  onEvent: (e: LiveEvent) => void;
  onStatus: (s: FeedStatus) => void;
  /** For tests of the page: seconds instead of the default waits. */
  backoff?: (attempt: number) => number;
}): Promise<void> {
  const { signal } = opts;
  const wait = opts.backoff ?? backoffSeconds;
  let attempt = 0;
  /** The id of the last event received: a reconnect resumes from it. */
  let lastEventId: string | undefined;
  opts.onStatus({ state: 'connecting' });
  while (!signal.aborted) {
    let reason = 'the connection dropped';
    try {
      for await (const e of liveFeedEvents(opts.target, signal, lastEventId)) {
        if (e.id) lastEventId = e.id;
        if (e.event === 'snapshot' || e.event === 'resumed') {
          attempt = 0;
          opts.onStatus({ state: 'connected', since: Date.now() });
        }
        if (e.event === 'closed') reason = `the server ended the feed: ${e.data.message}`;
        opts.onEvent(e);
      }
    } catch (err) {
      if (signal.aborted) return;
      if (err instanceof CallplaneError && [401, 403, 404].includes(err.status)) {
        opts.onStatus({ state: 'stopped', reason: err.message });
        return;
      }
      reason = err instanceof Error ? err.message : String(err);
    }
    if (signal.aborted) return;
    attempt += 1;
    const seconds = wait(attempt);
    opts.onStatus({ state: 'reconnecting', attempt, inSeconds: seconds, reason });
    await new Promise<void>((resolve) => {
      const t = setTimeout(resolve, seconds * 1000);
      signal.addEventListener('abort', () => { clearTimeout(t); resolve(); }, { once: true });
    });
  }
}
