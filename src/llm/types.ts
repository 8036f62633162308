// What the conversation engine asks of a language model, independent of who serves it: a chat
// completion over messages, with tools the model may call, streamed as text arrives.

export interface ToolCall {
  id: string;
  name: string;
  /** The model's JSON arguments, as it sent them (validated by the tool before it runs). */
  arguments: string;
}

export type ChatMessage =
  | { role: 'system'; content: string }
  | { role: 'user'; content: string }
  | { role: 'assistant'; content: string; toolCalls?: ToolCall[] }
  | { role: 'tool'; toolCallId: string; content: string };

export interface ToolSpec {
  name: string;
  description: string;
  /** JSON Schema of the arguments object. */
  parameters: Record<string, unknown>;
}

export interface ChatRequest {
  model: string;
  messages: ChatMessage[];
  tools?: ToolSpec[];
  maxTokens?: number;
  temperature?: number;
  /**
   * Ask for one JSON object of this JSON Schema (`response_format: json_schema`, strict). A
   * provider without structured outputs may refuse the request (a 400) or ignore it: callers that
   * set it still check the answer themselves.
   */
  responseFormat?: { name: string; schema: Record<string, unknown> };
  signal?: AbortSignal;
  /** Text as it streams in (voice speaks sentence by sentence from here). */
  onText?: (delta: string) => void;
}

export interface Usage {
  input: number;
  output: number;
}

export interface ChatResult {
  text: string;
  toolCalls: ToolCall[];
  usage: Usage;
  finishReason: string;
  /** The model that answered, as the provider named it. */
  model: string;
}

/** A provider of chat completions. */
export interface ChatEngine {
  /** The provider's name, shown in errors and conversation records. */
  readonly name: string;
  /** True for the SIMULATED engine (no provider configured): every reply says so. */
  readonly simulated: boolean;
  chat(req: ChatRequest): Promise<ChatResult>;
  /** The models the provider lists (GET /models), when it can. */
  listModels(signal?: AbortSignal): Promise<string[]>;
  /**
   * Loads in the background what its first chat would otherwise load on the way (the client
   * library): a call does it as it is answered, so the caller's first turn does not wait for it.
   */
  warm?(): void;
}

/** A model request that failed; says which provider and whether trying later may help. */
export class ModelError extends Error {
  constructor(readonly provider: string, message: string, readonly status?: number) {
    super(`model provider '${provider}' failed: ${message}`);
  }
}
