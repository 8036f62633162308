// Chat completions over the OpenAI-compatible protocol through the `openai` client with a
// configurable base URL: OpenAI, Groq, Together, vLLM, Ollama, llama.cpp's server, LM Studio, and
// the OpenAI-compatible endpoints of Anthropic and Google all speak it. The client times requests
// out and retries 408/409/429/5xx with exponential backoff (honouring Retry-After); what still
// fails becomes a ModelError that names the provider.
import { lazyClient, openaiSdk, type OpenAI } from '../lib/openai-sdk.ts';
import type { ChatCompletionChunk, ChatCompletionMessageParam, ChatCompletionTool } from 'openai/resources/chat/completions';
import { ModelError, type ChatEngine, type ChatMessage, type ChatRequest, type ChatResult, type ToolCall } from './types.ts';

export interface OpenAICompatibleOptions {
  name: string;
  baseUrl: string;
  apiKey: string | undefined;
  timeoutMs: number;
  maxRetries: number;
  /** How requests leave the process (an organization's own provider goes through the SSRF guard). */
  fetch?: (input: string | URL | Request, init?: RequestInit) => Promise<Response>;
}

/** Bounds on what a model's reply may grow to before we stop reading it. */
const MAX_REPLY_CHARS = 32_000;
const MAX_TOOL_CALLS = 8;
const MAX_ARGUMENT_CHARS = 16_000;

function toWire(m: ChatMessage): ChatCompletionMessageParam {
  switch (m.role) {
    case 'system': return { role: 'system', content: m.content };
    case 'user': return { role: 'user', content: m.content };
    case 'tool': return { role: 'tool', tool_call_id: m.toolCallId, content: m.content };
    case 'assistant':
      return m.toolCalls?.length
        ? {
          role: 'assistant', content: m.content || null,
          tool_calls: m.toolCalls.map((c) => ({ id: c.id, type: 'function' as const, function: { name: c.name, arguments: c.arguments } })),
        }
        : { role: 'assistant', content: m.content };
  }
}

/**
 * An error's message followed by its causes' (at most three): the client reports a refused or
 * failed connection as "Connection error." and keeps the reason (a refused address, a reset) in
 * `cause`.
 */
function describe(err: Error): string {
  const parts = [err.message];
  let cause = (err as { cause?: unknown }).cause;
  for (let i = 0; cause instanceof Error && i < 3; i++) {
    const text = withoutAddress(cause);
    if (!parts.includes(text)) parts.push(text);
    cause = (cause as { cause?: unknown }).cause;
  }
  return parts.join(': ');
}

/**
 * A socket error's message without the address the provider's name resolved to ("connect
 * ECONNREFUSED 10.1.2.3:8080" says "connect ECONNREFUSED"): an organization's own provider's errors
 * are the organization's to read, what its names resolve to on our side is not.
 */
function withoutAddress(err: Error): string {
  const { address, port } = err as { address?: unknown; port?: unknown };
  if (typeof address !== 'string' || address === '') return err.message;
  const at = typeof port === 'number' ? [`${address}:${port}`, `[${address}]:${port}`, address] : [address];
  let text = err.message;
  for (const a of at) text = text.split(` ${a}`).join('');
  return text;
}

export class OpenAICompatible implements ChatEngine {
  readonly simulated = false;
  readonly name: string;
  private readonly client: () => Promise<OpenAI>;

  constructor(opts: OpenAICompatibleOptions) {
    this.name = opts.name;
    this.client = lazyClient({
      baseURL: opts.baseUrl,
      // Local servers (Ollama, llama.cpp) take no key; the client insists on one.
      apiKey: opts.apiKey ?? 'no-key',
      timeout: opts.timeoutMs,
      maxRetries: opts.maxRetries,
      ...(opts.fetch ? { fetch: opts.fetch } : {}),
    });
  }

  /** The `openai` package (about 0.1 s to load, issue 34: it was in the first spoken turn's time to the first token) and the client, ahead of the first chat. */
  warm(): void {
    this.client().catch(() => { /* the chat that follows reports it */ });
  }

  async chat(req: ChatRequest): Promise<ChatResult> {
    const tools: ChatCompletionTool[] | undefined = req.tools?.length
      ? req.tools.map((t) => ({ type: 'function' as const, function: { name: t.name, description: t.description, parameters: t.parameters } }))
      : undefined;
    let text = '';
    let finishReason = 'stop';
    let model = req.model;
    let usage = { input: 0, output: 0 };
    const calls = new Map<number, ToolCall>();
    try {
      const stream = await (await this.client()).chat.completions.create({
        model: req.model,
        messages: req.messages.map(toWire),
        ...(tools ? { tools } : {}),
        ...(req.maxTokens !== undefined ? { max_tokens: req.maxTokens } : {}),
        ...(req.temperature !== undefined ? { temperature: req.temperature } : {}),
        ...(req.responseFormat ? {
          response_format: { type: 'json_schema' as const, json_schema: { name: req.responseFormat.name, schema: req.responseFormat.schema, strict: true } },
        } : {}),
        stream: true,
        stream_options: { include_usage: true },
      }, { signal: req.signal });
      for await (const chunk of stream as AsyncIterable<ChatCompletionChunk>) {
        if (chunk.model) model = chunk.model;
        if (chunk.usage) usage = { input: chunk.usage.prompt_tokens ?? 0, output: chunk.usage.completion_tokens ?? 0 };
        const choice = chunk.choices?.[0];
        if (!choice) continue;
        const delta = choice.delta;
        if (delta?.content) {
          if (text.length + delta.content.length > MAX_REPLY_CHARS) throw new ModelError(this.name, `the reply grew past ${MAX_REPLY_CHARS} characters`);
          text += delta.content;
          req.onText?.(delta.content);
        }
        for (const tc of delta?.tool_calls ?? []) {
          const at = calls.get(tc.index) ?? { id: '', name: '', arguments: '' };
          if (tc.id) at.id = tc.id;
          if (tc.function?.name) at.name += tc.function.name;
          if (tc.function?.arguments) at.arguments += tc.function.arguments;
          if (at.arguments.length > MAX_ARGUMENT_CHARS) throw new ModelError(this.name, `a tool call's arguments grew past ${MAX_ARGUMENT_CHARS} characters`);
          calls.set(tc.index, at);
          if (calls.size > MAX_TOOL_CALLS) throw new ModelError(this.name, `the reply asked for more than ${MAX_TOOL_CALLS} tool calls`);
        }
        if (choice.finish_reason) finishReason = choice.finish_reason;
      }
    } catch (err) {
      if (err instanceof ModelError) throw err;
      if (req.signal?.aborted) throw err;
      const { APIError } = await openaiSdk();
      if (err instanceof APIError) throw new ModelError(this.name, `${err.status ?? 'no status'} ${describe(err)}`, err.status as number | undefined);
      throw new ModelError(this.name, describe(err as Error));
    }
    const toolCalls = [...calls.entries()].sort(([a], [b]) => a - b)
      .map(([i, c]) => ({ ...c, id: c.id || `call_${i}` }))
      .filter((c) => c.name !== '');
    return { text, toolCalls, usage, finishReason, model };
  }

  async listModels(signal?: AbortSignal): Promise<string[]> {
    try {
      const ids: string[] = [];
      for await (const m of (await this.client()).models.list({ signal })) {
        ids.push(m.id);
        if (ids.length >= 1000) break;
      }
      return ids;
    } catch (err) {
      const { APIError } = await openaiSdk();
      if (err instanceof APIError) throw new ModelError(this.name, `listing models: ${err.status ?? 'no status'} ${describe(err)}`, err.status as number | undefined);
      throw new ModelError(this.name, `listing models: ${describe(err as Error)}`);
    }
  }
}
