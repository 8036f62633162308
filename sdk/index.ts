// @callplane/client: a typed client of the callplane API. The types (`paths`, `components`) are
// generated from the OpenAPI document our routes make (schema.d.ts, `npm run sdk:generate`);
// requests go through openapi-fetch, so every path, parameter, body and answer is checked by the
// compiler. This file is the only hand-written part; client.js and client.d.ts are it compiled
// (by `npm run sdk:generate`), for plain Node and the compiled `callplane` command.
import createFetchClient, { type Client, type ClientOptions, type Middleware } from 'openapi-fetch';
import type { components, operations, paths } from './schema.js';

export type { components, operations, paths };

/** The client: openapi-fetch's, typed by our paths (`client.GET('/api/v2/tasks/{taskId}', …)`). */
export type CallplaneClient = Client<paths>;

export interface CallplaneClientOptions {
  /** Where the service answers, e.g. `http://localhost:8080` (no `/api/v2`: the paths carry it). */
  baseUrl: string;
  /** An API token (`cpl_…`) of the account to act as; sent as `Authorization: Bearer`. */
  token: string;
  /** Another fetch (tests, proxies); the global one by default. */
  fetch?: ClientOptions['fetch'];
  /** Headers sent with every request (a `User-Agent`, an `X-Request-Id`). */
  headers?: Record<string, string>;
}

/** Every error answer of the API has this shape (docs/api.md, "Errors"). */
export interface ErrorBody {
  success: false;
  message: string;
  requestId?: string;
  [key: string]: unknown;
}

/**
 * An answer that was not a success: `status` is the HTTP status, `success` is false and `message`
 * is the API's message (naming the field, for a 400). `body` is the whole error answer.
 */
export class CallplaneError extends Error {
  readonly success = false as const;
  readonly status: number;
  readonly requestId: string | undefined;
  readonly body: ErrorBody;

  constructor(status: number, body: ErrorBody) {
    super(body.message);
    this.name = 'CallplaneError';
    this.status = status;
    this.body = body;
    this.requestId = body.requestId;
  }
}

/** Makes a client for one service and one token. */
export function createCallplaneClient(options: CallplaneClientOptions): CallplaneClient {
  if (!/^https?:\/\//i.test(options.baseUrl)) throw new TypeError(`baseUrl must be an http(s) URL (got '${options.baseUrl}')`);
  if (!options.token) throw new TypeError('token is required');
  const client = createFetchClient<paths>({
    baseUrl: options.baseUrl.replace(/\/+$/, ''),
    fetch: options.fetch,
    headers: options.headers,
  });
  const auth: Middleware = {
    onRequest({ request }) {
      request.headers.set('authorization', `Bearer ${options.token}`);
      return request;
    },
  };
  client.use(auth);
  return client;
}

/** What every openapi-fetch call answers. */
interface FetchResult<T> {
  data?: T;
  error?: unknown;
  response: Response;
}

/** The error body of an answer, whatever the server sent (a proxy's HTML page included). */
function errorBody(response: Response, error: unknown): ErrorBody {
  if (error && typeof error === 'object' && typeof (error as { message?: unknown }).message === 'string') {
    return { ...(error as Record<string, unknown>), success: false, message: (error as { message: string }).message };
  }
  const text = typeof error === 'string' && error.trim() ? `: ${error.trim().slice(0, 200)}` : '';
  return { success: false, message: `${response.status} ${response.statusText}${text}` };
}

/**
 * The data of a successful answer, or a `CallplaneError` thrown for any other:
 * `const { task } = await ok(client.GET('/api/v2/tasks/{taskId}', { params: { path: { taskId } } }));`
 */
export async function ok<T>(call: Promise<FetchResult<T>>): Promise<T> {
  const { data, error, response } = await call;
  if (!response.ok) throw new CallplaneError(response.status, errorBody(response, error));
  return data as T;
}

/** A line of a conversation, as GET /api/v2/conversation/{roomId}/{uuid} answers its lines. */
export interface TranscriptLine {
  uuid: string;
  message: string;
  /** Unix seconds. */
  timestamp: number;
  /** ISO 8601, to the millisecond. */
  date: string;
  /** inbound (the person), outbound (the agent) or tool (a tool the agent ran: see `tool`). */
  direction: 'inbound' | 'outbound' | 'tool';
  /** The channel: api, sms, voice, web or sip. */
  source: string;
  status: string;
  attachments: { 'content-type': string; filename: string; 'content-url': string; attachmentType: string }[];
  tool?: { name: string; arguments?: unknown; result?: unknown; refused: boolean; requestId?: string };
}

/** A conversation on the live feed (docs/conversations.md, "Live feed"). */
export interface LiveConversation {
  uuid: string;
  /** With `uuid`, names the conversation for GET /api/v2/conversation/{roomId}/{uuid}. */
  roomId: string;
  /** The agent account, and its agent id (camp…). */
  accountId: number;
  agentId: string;
  orgId: number;
  channel: 'api' | 'sms' | 'voice' | 'web' | 'sip';
  direction: 'inbound' | 'outbound';
  /** call (voice, sip) or message. */
  eventType: 'call' | 'message';
  counterpart: string;
  counterpartName: string | null;
  taskId: string | null;
  /** open while it lasts. */
  outcome: string;
  outcomeDetail: string | null;
  startedAt: number;
  endedAt: number | null;
  duration: number | null;
  answeredBy: string | null;
  answeredByAt: number | null;
  messagesIn: number;
  messagesOut: number;
}

/** The live feed's events, by name. */
export type LiveEvent =
  /** `truncated`: what the snapshot's limits cut; `resumeFailed`: why a Last-Event-ID could not be resumed from. */
  | { event: 'snapshot'; id?: string; data: { calls: (LiveConversation & { messages: TranscriptLine[] })[]; truncated?: string; resumeFailed?: string } }
  /** A reconnect with Last-Event-ID resumed: the `replayed` events missed since come next (no snapshot). */
  | { event: 'resumed'; id?: string; data: { lastEventId: string; replayed: number } }
  | { event: 'conversation'; id?: string; data: LiveConversation }
  | { event: 'message'; id?: string; data: { conversationId: string; roomId: string; accountId: number; message: TranscriptLine } }
  | { event: 'closed'; id?: string; data: { message: string } };

/**
 * Follows the live feed (GET /api/v2/conversations/live, Server-Sent Events): yields its events as
 * they come — `snapshot` first (and again whenever the server starts over), then `conversation`
 * and `message`, and `closed` when the server ends it — until the stream ends or `signal` aborts.
 * A refusal (401, 403, 404, 429) is thrown as a CallplaneError before the first event. To
 * reconnect, call it again with `lastEventId` (the `id` of the last event received): the server
 * resumes with `resumed` and the events missed when it still holds them, else sends a snapshot.
 */
export async function* liveEvents(client: CallplaneClient, query: { targetAccountId?: number } = {}, signal?: AbortSignal, lastEventId?: string): AsyncGenerator<LiveEvent> {
  const headers: Record<string, string> = { accept: 'text/event-stream', ...(lastEventId ? { 'last-event-id': lastEventId } : {}) };
  const { response, error } = await client.GET('/api/v2/conversations/live', { params: { query }, parseAs: 'stream', signal, headers });
  if (!response.ok || !response.body) throw new CallplaneError(response.status, errorBody(response, error));
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  let name = 'message';
  let id: string | undefined;
  let data: string[] = [];
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true });
      for (let nl = buffer.search(/\r\n|\r|\n/); nl >= 0; nl = buffer.search(/\r\n|\r|\n/)) {
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + (buffer.startsWith('\r\n', nl) ? 2 : 1));
        if (line === '') {
          if (data.length > 0) yield { event: name, id, data: JSON.parse(data.join('\n')) as unknown } as LiveEvent;
          name = 'message';
          data = [];
          continue;
        }
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        const text = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
        if (field === 'data') data.push(text);
        else if (field === 'event') name = text;
        else if (field === 'id') id = text;
      }
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
}
