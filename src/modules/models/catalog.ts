// The model catalog (GET /api/v2/models/supported, and the ids POST /api/v2/agent accepts): the
// hosted platform's model names with their nominal providers, the deployment's providers' declared
// and listed models, and an organization's own providers' models. Also what we know of each
// model's context size (the agent review's "too long for the model" rule).

/** One of the hosted platform's models, with its nominal provider: always in the catalog. */
export interface ModelEntry {
  id: string;
  provider: string;
  /** Whether it reasons before answering (agentThinking, agentThinkingModel). */
  thinking: boolean;
}

export const MODELS: readonly ModelEntry[] = [
  { id: 'gpt-4o-2024-08-06', provider: 'openai', thinking: false },
  { id: 'gpt-4o-mini', provider: 'openai', thinking: false },
  { id: 'gpt-4.1', provider: 'openai', thinking: false },
  { id: 'gpt-4.1-mini', provider: 'openai', thinking: false },
  { id: 'gpt-5', provider: 'openai', thinking: true },
  { id: 'gpt-5-mini', provider: 'openai', thinking: true },
  { id: 'gpt-5.2', provider: 'openai', thinking: true },
  { id: 'claude-sonnet-4-5', provider: 'anthropic', thinking: true },
  { id: 'claude-haiku-4-5', provider: 'anthropic', thinking: true },
  { id: 'gemini-2.5-flash', provider: 'google', thinking: true },
  { id: 'gemini-2.5-pro', provider: 'google', thinking: true },
];

/** One model of GET /api/v2/models/supported. */
export interface CatalogEntry {
  provider: string;
  canReason: boolean;
}

export type Catalog = Record<string, CatalogEntry>;

/** A source of model ids a provider lists (GET /models). */
export interface ModelLister {
  readonly name: string;
  listModels(signal?: AbortSignal): Promise<string[]>;
}

/** How long a provider's list is used before it is asked again. */
export const LIST_TTL_MS = 5 * 60_000;
/** How long a provider whose listing failed is left out before it is asked again. */
export const LIST_FAILURE_TTL_MS = 30_000;
/** The longest a request waits for one provider's list. */
export const LIST_WAIT_MS = 3_000;
/** Listed ids kept per provider. */
export const MAX_LISTED = 1000;

/** A model id as we accept it from a provider or an organization: 1–200 printable characters, no spaces. */
export const MODEL_ID = /^[\x21-\x7e]{1,200}$/;

type Log = { warn(obj: object, msg: string): void };

/**
 * Each provider's listed models, cached for LIST_TTL_MS per provider. A provider that fails (or
 * takes longer than the wait) is logged and left out for LIST_FAILURE_TTL_MS; callers waiting for
 * the same provider share one request.
 */
export class ModelListCache {
  readonly #entries = new Map<string, { at: number; ttl: number; models: readonly string[] | null }>();
  readonly #inflight = new Map<string, Promise<readonly string[] | null>>();
  readonly #now: () => number;
  readonly #waitMs: number;
  readonly #log: Log | undefined;

  constructor(opts: { now?: () => number; waitMs?: number; log?: Log } = {}) {
    this.#now = opts.now ?? Date.now;
    this.#waitMs = opts.waitMs ?? LIST_WAIT_MS;
    this.#log = opts.log;
  }

  /** The provider's models (cached), or null when its listing failed. */
  async get(lister: ModelLister): Promise<readonly string[] | null> {
    const hit = this.#entries.get(lister.name);
    if (hit && this.#now() - hit.at < hit.ttl) return hit.models;
    let pending = this.#inflight.get(lister.name);
    if (!pending) {
      pending = this.#ask(lister).finally(() => this.#inflight.delete(lister.name));
      this.#inflight.set(lister.name, pending);
    }
    return pending;
  }

  /** The cached list when fresh (never asks the provider). */
  peek(name: string): readonly string[] | null | undefined {
    const hit = this.#entries.get(name);
    return hit && this.#now() - hit.at < hit.ttl ? hit.models : undefined;
  }

  async #ask(lister: ModelLister): Promise<readonly string[] | null> {
    const abort = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        abort.abort();
        reject(new Error(`no answer within ${this.#waitMs} ms`));
      }, this.#waitMs);
    });
    try {
      const ids = await Promise.race([lister.listModels(abort.signal), timeout]);
      const models = [...new Set(ids.filter((id) => typeof id === 'string' && MODEL_ID.test(id)))].slice(0, MAX_LISTED);
      this.#entries.set(lister.name, { at: this.#now(), ttl: LIST_TTL_MS, models });
      return models;
    } catch (err) {
      this.#log?.warn({ provider: lister.name, error: (err as Error).message }, 'model provider could not list its models; they are left out of the catalog');
      this.#entries.set(lister.name, { at: this.#now(), ttl: LIST_FAILURE_TTL_MS, models: null });
      return null;
    } finally {
      clearTimeout(timer);
    }
  }
}

/** What one provider contributes to the catalog. */
export interface CatalogSource {
  provider: string;
  models: readonly string[];
  reasoning?: readonly string[];
}

/**
 * The catalog, each id shown with the provider that would serve it (resolution order: the
 * organization's own providers, then the deployment's declared, then listed models, then the
 * hosted platform's nominal provider). canReason is true when any source says so.
 * `sources` come in that order, highest precedence first.
 */
export function assembleCatalog(sources: readonly CatalogSource[]): Catalog {
  const out = new Map<string, CatalogEntry>();
  const reasons = new Set<string>();
  for (const m of MODELS) {
    out.set(m.id, { provider: m.provider, canReason: m.thinking });
    if (m.thinking) reasons.add(m.id);
  }
  for (const s of sources) for (const id of s.reasoning ?? []) reasons.add(id);
  for (const s of [...sources].reverse()) {
    for (const id of s.models) out.set(id, { provider: s.provider, canReason: false });
  }
  for (const [id, e] of out) e.canReason = reasons.has(id);
  // fromEntries defines own properties, so an id such as __proto__ is just a key.
  return Object.fromEntries(out);
}

/** Context windows in tokens, by model id prefix (longest prefix wins); unknown models get DEFAULT_CONTEXT_TOKENS. */
const CONTEXT_TOKENS: ReadonlyArray<[prefix: string, tokens: number]> = [
  ['gpt-4.1', 1_047_576],
  ['gpt-4o', 128_000],
  ['gpt-4-turbo', 128_000],
  ['gpt-4', 8_192],
  ['gpt-3.5-turbo', 16_385],
  ['gpt-5', 400_000],
  ['gpt-oss', 131_072],
  ['openai/gpt-oss', 131_072],
  ['o1', 200_000],
  ['o3', 200_000],
  ['o4', 200_000],
  ['claude', 200_000],
  ['gemini', 1_048_576],
  ['llama3.1', 128_000],
  ['llama3.2', 128_000],
  ['llama3.3', 128_000],
  ['llama-3.1', 128_000],
  ['llama-3.2', 128_000],
  ['llama-3.3', 128_000],
  ['meta-llama/llama-3', 128_000],
  ['llama3', 8_192],
  ['mistral', 32_768],
  ['mixtral', 32_768],
  ['qwen', 32_768],
  ['deepseek', 64_000],
];
export const DEFAULT_CONTEXT_TOKENS = 8_192;

/** The context window of a model, in tokens (a conservative default for models we do not know). */
export function contextTokensOf(model: string): number {
  const id = model.toLowerCase();
  let best: [string, number] | undefined;
  for (const entry of CONTEXT_TOKENS) {
    if (id.startsWith(entry[0]) && (!best || entry[0].length > best[0].length)) best = entry;
  }
  return best?.[1] ?? DEFAULT_CONTEXT_TOKENS;
}

/** About four characters a token: the estimate the review uses. */
export const estimateTokens = (chars: number) => Math.ceil(chars / 4);
