// A stand-in for an OpenAI-compatible model server (POST /v1/chat/completions, GET /v1/models) on
// 127.0.0.1, for the test suite only. The tests script its replies (text, tool calls, an error
// status, a delay), it streams them as server-sent events the way OpenAI does, and it records
// every request (headers and JSON body) so a test can check what the service sent the model, and
// whether the client gave it up before the reply's end.
// It also answers OpenAI's audio routes (transcriptions, speech): test/helpers/fake-audio.ts.
import http from 'node:http';
import { performance } from 'node:perf_hooks';
import type { AddressInfo } from 'node:net';
import { handleAudio, type FakeAudioState } from './fake-audio.ts';

export interface RecordedChat {
  headers: http.IncomingHttpHeaders;
  body: {
    model: string;
    stream?: boolean;
    messages: Array<{ role: string; content: string | null; tool_calls?: Array<{ id: string; function: { name: string; arguments: string } }>; tool_call_id?: string }>;
    tools?: Array<{ type: string; function: { name: string; description?: string; parameters?: unknown } }>;
    [k: string]: unknown;
  };
  at: number;
  /** performance.now() when the request had arrived, and when the reply's last byte was written. */
  t: number;
  doneT?: number;
  /** performance.now() when the client gave the request up (its connection closed before the reply's end). */
  abortedT?: number;
}

export interface ScriptedReply {
  text?: string;
  toolCalls?: Array<{ name: string; arguments: unknown; id?: string }>;
  /** Answer with this HTTP status (and an OpenAI-shaped error body) instead. */
  status?: number;
  /** Wait this long (ms) before answering. */
  delayMs?: number;
  /** Wait this long (ms) between the streamed pieces of the text (a model still writing). */
  pieceDelayMs?: number;
  /** Never answer: the request stays open until its connection closes (the client's process was killed). */
  hang?: boolean;
  usage?: { prompt_tokens: number; completion_tokens: number };
}

export interface FakeLlm extends FakeAudioState {
  url: string;
  /** The base URL a client is configured with (`…/v1`). */
  baseUrl: string;
  requests: RecordedChat[];
  modelListRequests: number;
  /** Replies used in order; when none is left the server answers `reply to: <last user message>`. */
  script: ScriptedReply[];
  /**
   * Answers a request from what it carries (its model, its messages) before the script is asked:
   * for conversations that run side by side, whose requests come in no fixed order. Undefined: the script answers.
   */
  respond?: (body: RecordedChat['body']) => ScriptedReply | undefined;
  models: string[];
  /**
   * Answer a request that asks for structured output (`response_format`) with a 400, as servers
   * without structured outputs do (the request is still recorded, and no scripted reply is used).
   */
  refuseResponseFormat: boolean;
  close(): Promise<void>;
}

function sse(res: http.ServerResponse, data: unknown) {
  res.write(`data: ${JSON.stringify(data)}\n\n`);
}

export async function startFakeLlm(opts: { models?: string[] } = {}): Promise<FakeLlm> {
  const state: Omit<FakeLlm, 'url' | 'baseUrl' | 'close'> = {
    requests: [], modelListRequests: 0, script: [], models: opts.models ?? ['fake-model'], refuseResponseFormat: false,
    audioRequests: [], audioScript: [], speechWavRate: 22_050,
  };
  let n = 0;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      void (async () => {
        if (req.method === 'GET' && req.url === '/v1/models') {
          state.modelListRequests++;
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ object: 'list', data: state.models.map((id) => ({ id, object: 'model', created: 0, owned_by: 'fake' })) }));
          return;
        }
        if (req.url?.startsWith('/v1/audio/') && await handleAudio(req, Buffer.concat(chunks), res, state)) return;
        if (req.method !== 'POST' || req.url !== '/v1/chat/completions') {
          res.writeHead(404).end();
          return;
        }
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as RecordedChat['body'];
        const recorded: RecordedChat = { headers: req.headers, body, at: Date.now(), t: performance.now() };
        state.requests.push(recorded);
        res.on('close', () => { if (!res.writableFinished) recorded.abortedT = performance.now(); });
        if (state.refuseResponseFormat && body.response_format !== undefined) {
          res.writeHead(400, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ error: { message: 'response_format is not supported by this server', type: 'invalid_request_error' } }));
          return;
        }
        const step = state.respond?.(body) ?? state.script.shift() ?? {};
        if (step.hang) return;
        if (step.delayMs) await new Promise((r) => setTimeout(r, step.delayMs));
        if (recorded.abortedT !== undefined) return;
        if (step.status) {
          res.writeHead(step.status, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ error: { message: `scripted failure ${step.status}`, type: 'server_error' } }));
          return;
        }
        const lastUser = [...body.messages].reverse().find((m) => m.role === 'user');
        const text = step.text ?? (step.toolCalls ? '' : `reply to: ${lastUser?.content ?? ''}`);
        const id = `chatcmpl-${++n}`;
        const base = { id, object: 'chat.completion.chunk', created: Math.floor(Date.now() / 1000), model: body.model };
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        // Text in a few pieces, as a real server streams it.
        const pieces = text.match(/.{1,12}/gs) ?? [];
        for (const p of pieces) {
          if (step.pieceDelayMs && p !== pieces[0]) await new Promise((r) => setTimeout(r, step.pieceDelayMs));
          sse(res, { ...base, choices: [{ index: 0, delta: { content: p }, finish_reason: null }] });
        }
        (step.toolCalls ?? []).forEach((c, i) => {
          const args = typeof c.arguments === 'string' ? c.arguments : JSON.stringify(c.arguments);
          const half = Math.ceil(args.length / 2);
          sse(res, { ...base, choices: [{ index: 0, delta: { tool_calls: [{ index: i, id: c.id ?? `call_${n}_${i}`, type: 'function', function: { name: c.name, arguments: args.slice(0, half) } }] }, finish_reason: null }] });
          sse(res, { ...base, choices: [{ index: 0, delta: { tool_calls: [{ index: i, function: { arguments: args.slice(half) } }] }, finish_reason: null }] });
        });
        sse(res, { ...base, choices: [{ index: 0, delta: {}, finish_reason: step.toolCalls?.length ? 'tool_calls' : 'stop' }] });
        if (body.stream_options) sse(res, { ...base, choices: [], usage: { ...(step.usage ?? { prompt_tokens: 11, completion_tokens: 7 }), total_tokens: 0 } });
        res.write('data: [DONE]\n\n');
        res.end(() => { recorded.doneT = performance.now(); });
      })();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const url = `http://127.0.0.1:${port}`;
  return Object.assign(state, {
    url,
    baseUrl: `${url}/v1`,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  });
}
