// A client of the live feed (GET /api/v2/conversations/live) for tests: undici's fetch reading the
// response body as it arrives, parsed as Server-Sent Events (written from the WHATWG
// EventSource parsing rules, independently of the server's code).
import { waitFor } from './wait.ts';

export interface SseEvent { id?: string; event: string; data: any; at: number }

export interface LiveClient {
  status: number;
  headers: Headers;
  /** The JSON body of a refusal (non-200). */
  body?: any;
  /** Every event so far, in order (comments not included). */
  events: SseEvent[];
  /** Comment lines (`: ping`) received. */
  comments: string[];
  /** Resolves when the server ended the stream (or it failed). */
  ended: Promise<void>;
  isEnded(): boolean;
  /** Waits for an event matching `match` (after the `from`-th event), at most `timeoutMs`. */
  next(what: string, match: (e: SseEvent) => boolean, timeoutMs?: number, from?: number): Promise<SseEvent>;
  close(): void;
}

/**
 * Opens the feed at `baseUrl` with `token` (query parameter, or `Authorization: Bearer` with
 * `bearer`; none when `token` is empty, for `headers` that carry it, like a console cookie), with
 * any other request `headers` (Last-Event-ID).
 */
export async function openLive(baseUrl: string, token: string, query: Record<string, string | number> = {}, bearer = false, headers: Record<string, string> = {}): Promise<LiveClient> {
  const url = new URL('/api/v2/conversations/live', baseUrl);
  for (const [k, v] of Object.entries(query)) url.searchParams.set(k, String(v));
  if (!bearer && token) url.searchParams.set('token', token);
  const abort = new AbortController();
  const res = await fetch(url, { headers: { accept: 'text/event-stream', ...(bearer ? { authorization: `Bearer ${token}` } : {}), ...headers }, signal: abort.signal });
  const events: SseEvent[] = [];
  const comments: string[] = [];
  let done = false;
  if (res.status !== 200) {
    const body: unknown = await res.json().catch(() => undefined);
    return {
      status: res.status, headers: res.headers, body, events, comments, ended: Promise.resolve(), isEnded: () => true,
      next: () => Promise.reject(new Error(`the feed was refused: ${res.status}`)), close: () => {},
    };
  }
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  const ended = (async () => {
    let buffer = '';
    let event: { id?: string; event?: string; data: string[] } = { data: [] };
    try {
      for (;;) {
        const { value, done: finished } = await reader.read();
        if (finished) break;
        buffer += decoder.decode(value, { stream: true });
        let nl: number;
        while ((nl = buffer.search(/\r\n|\r|\n/)) >= 0) {
          const line = buffer.slice(0, nl);
          buffer = buffer.slice(nl + (buffer.startsWith('\r\n', nl) ? 2 : 1));
          if (line === '') {
            if (event.data.length > 0) {
              const text = event.data.join('\n');
              let data: unknown = text;
              try { data = JSON.parse(text); } catch { /* not JSON */ }
              events.push({ id: event.id, event: event.event ?? 'message', data, at: Date.now() });
            }
            event = { data: [] };
            continue;
          }
          if (line.startsWith(':')) { comments.push(line.slice(1).trim()); continue; }
          const colon = line.indexOf(':');
          const field = colon < 0 ? line : line.slice(0, colon);
          const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
          if (field === 'data') event.data.push(value);
          else if (field === 'event') event.event = value;
          else if (field === 'id') event.id = value;
        }
      }
    } catch { /* aborted or reset */ }
    done = true;
  })();
  return {
    status: res.status, headers: res.headers, events, comments, ended, isEnded: () => done,
    next: (what, match, timeoutMs = 10_000, from = 0) =>
      waitFor(what, async () => events.slice(from).find(match), timeoutMs, 10),
    close: () => abort.abort(),
  };
}
