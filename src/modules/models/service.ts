// Which language model answers: the deployment's providers (configuration), an organization's
// own providers (bring your own key), and the SIMULATED engine when there is none. The catalog of
// GET /api/v2/models/supported and the models POST /api/v2/agent accepts come from here too.
import type { Config, LlmProviderConfig } from '../../config.ts';
import type { Db, LlmProviderRow } from '../../db/types.ts';
import type { Scope } from '../../http/auth.ts';
import { Conflict, Invalid, NotFound } from '../../http/errors.ts';
import { maskSecret, type SecretBox } from '../../lib/crypto.ts';
import { secretTargetRefusal, urlOrigin } from '../../lib/secret-target.ts';
import { toUnixSeconds } from '../../lib/time.ts';
import { OpenAICompatible } from '../../llm/openai-compatible.ts';
import { SIMULATED, SimulatedEngine } from '../../llm/simulated.ts';
import type { ChatEngine } from '../../llm/types.ts';
import { checkTargetUrl, lazyGuardedFetch, type TargetPolicy } from '../../webhooks/ssrf.ts';
import { accountRepo } from '../accounts/repository.ts';
import { assembleCatalog, MODEL_ID, ModelListCache, type Catalog, type CatalogSource } from './catalog.ts';
import { llmProviderRepo } from './repository.ts';
import { readJsonArray } from '../../db/json-columns.ts';

type Log = { warn(obj: object, msg: string): void };

export interface ModelsServiceDeps {
  config: Pick<Config, 'llmProviders' | 'llmDefaultModel' | 'llmTimeoutMs' | 'llmMaxRetries'>;
  db: Db;
  box: SecretBox;
  /** Where an organization's own providers may point (CALLPLANE_ALLOW_PRIVATE_TARGETS). */
  policy: TargetPolicy;
  log?: Log;
  now?: () => number;
  /** The longest a request waits for one provider's model list (default 3 s). */
  listWaitMs?: number;
}

/** What answers a conversation: the engine and the model name sent to it. */
export interface ModelChoice {
  engine: ChatEngine;
  model: string;
  /** The provider's name (`simulated` for the SIMULATED engine). */
  provider: string;
  /** True when it is the organization's own provider: its errors may be shown to the organization in full. */
  own?: boolean;
}

/** PUT /api/v2/llm/providers/{name}. */
export interface ProviderBody {
  baseUrl: string;
  /** Omitted: keep the stored key (a new provider has none; a baseUrl of another origin needs it again); null: remove it. */
  apiKey?: string | null;
  models: string[];
}

/** An organization's own providers, at most. */
export const MAX_ORG_PROVIDERS = 10;
export const MAX_PROVIDER_MODELS = 100;
export const MAX_BASE_URL_LENGTH = 2048;
export const MAX_API_KEY_LENGTH = 1000;
/** An organization provider's name: 1–40 of a–z, 0–9, `_`, `.`, `-`, starting with a letter or digit. */
export const PROVIDER_NAME = /^[a-z0-9][a-z0-9_.-]{0,39}$/;
/** Organization engines kept built (keyed by row, rebuilt when the row changes). */
const MAX_CACHED_ENGINES = 500;

const hasControl = (s: string) => [...s].some((c) => c.charCodeAt(0) < 0x20 || c.charCodeAt(0) === 0x7f);

/** The model a deployment falls back to when nothing names one. */
const FALLBACK_MODEL = 'gpt-4o-mini';

export function modelsService(deps: ModelsServiceDeps) {
  const { config, db, box, policy, log } = deps;
  const now = deps.now ?? Date.now;
  const simulated = new SimulatedEngine();
  const deployment = config.llmProviders.map((p: LlmProviderConfig) => ({
    config: p,
    engine: new OpenAICompatible({ name: p.name, baseUrl: p.baseUrl, apiKey: p.apiKey, timeoutMs: config.llmTimeoutMs, maxRetries: config.llmMaxRetries }),
  }));
  const lists = new ModelListCache({ now, waitMs: deps.listWaitMs, log });

  // An organization's provider is a customer URL: every request to it goes through the SSRF guard,
  // which resolves the name itself and refuses addresses the policy does not allow.
  const guarded = lazyGuardedFetch(policy, { log });

  const engines = new Map<number, { row: Pick<LlmProviderRow, 'updated_at' | 'base_url' | 'api_key' | 'name'>; engine: ChatEngine }>();
  /** The engine of an organization's provider, built once per version of its row. */
  function orgEngine(row: LlmProviderRow): ChatEngine {
    const hit = engines.get(row.id);
    if (hit && hit.row.updated_at === row.updated_at && hit.row.base_url === row.base_url && hit.row.api_key === row.api_key && hit.row.name === row.name) {
      return hit.engine;
    }
    const engine = new OpenAICompatible({
      name: row.name, baseUrl: row.base_url, apiKey: row.api_key ? box.open(row.api_key) : undefined,
      timeoutMs: config.llmTimeoutMs, maxRetries: config.llmMaxRetries, fetch: guarded.fetch,
    });
    engines.delete(row.id);
    engines.set(row.id, { row, engine });
    if (engines.size > MAX_CACHED_ENGINES) engines.delete(engines.keys().next().value!);
    return engine;
  }

  const modelsOf = (row: LlmProviderRow): string[] => readJsonArray(row.models).filter((m): m is string => typeof m === 'string');

  /** The deployment providers' listed models (cached), in provider order; null for one that failed or does not list. */
  const listed = () => Promise.all(deployment.map((d) => (d.config.listModels ? lists.get(d.engine) : Promise.resolve(null))));

  async function catalogOf(orgId: number | undefined): Promise<Catalog> {
    const [rows, lists] = await Promise.all([orgId === undefined ? [] : llmProviderRepo.list(db, orgId), listed()]);
    const sources: CatalogSource[] = [
      ...rows.map((r) => ({ provider: r.name, models: modelsOf(r) })),
      ...deployment.map((d) => ({ provider: d.config.name, models: d.config.models, reasoning: d.config.reasoningModels })),
      ...deployment.map((d, i) => ({ provider: d.config.name, models: lists[i] ?? [], reasoning: d.config.reasoningModels })),
    ];
    return assembleCatalog(sources);
  }

  /** The organization an operation names: an organization or agent token's own, else targetAccountId's. */
  async function orgOf(scope: Scope, targetAccountId: number | undefined): Promise<number | undefined> {
    if (targetAccountId === undefined) {
      return scope.actor.kind === 'organization' || scope.actor.kind === 'agent' ? scope.actor.org_id ?? undefined : undefined;
    }
    const account = await scope.account(targetAccountId, ['organization', 'agent']);
    return account.org_id ?? undefined;
  }

  const organization = (scope: Scope, targetAccountId: number | undefined) => scope.target(targetAccountId, ['organization']);

  function view(row: LlmProviderRow) {
    return {
      name: row.name,
      baseUrl: row.base_url,
      apiKey: row.api_key ? maskSecret(box.open(row.api_key)) : null,
      models: modelsOf(row),
      createdAt: toUnixSeconds(row.created_at),
      updatedAt: toUnixSeconds(row.updated_at),
    };
  }

  function checkName(name: string): string {
    if (!PROVIDER_NAME.test(name)) throw new Invalid(`name must be 1-40 lowercase letters, digits, '.', '_' or '-', starting with a letter or digit (got '${name.slice(0, 60)}')`);
    return name;
  }

  function checkBody(body: ProviderBody): { baseUrl: string; models: string[] } {
    const target = checkTargetUrl(body.baseUrl, policy);
    if (!target.ok) throw new Invalid(target.message.replace(/^url\b/, 'baseUrl'));
    if (target.url.search !== '' || target.url.hash !== '') throw new Invalid('baseUrl must not carry a query or a fragment (such as https://api.groq.com/openai/v1)');
    if (!Array.isArray(body.models) || body.models.length === 0) throw new Invalid('models must list at least one model id this provider serves');
    if (body.models.length > MAX_PROVIDER_MODELS) throw new Invalid(`models must have at most ${MAX_PROVIDER_MODELS} items`);
    body.models.forEach((m, i) => {
      if (typeof m !== 'string' || !MODEL_ID.test(m)) throw new Invalid(`models[${i}] must be a model id of 1-200 printable characters without spaces`);
    });
    if (typeof body.apiKey === 'string' && (body.apiKey.length === 0 || hasControl(body.apiKey))) {
      throw new Invalid('apiKey must be a non-empty string without control characters (null removes the key)');
    }
    return { baseUrl: body.baseUrl.trim().replace(/\/+$/, ''), models: [...new Set(body.models)] };
  }

  const self = {
    /** Closes the connections kept to organizations' own providers (at shutdown). */
    async close(): Promise<void> {
      engines.clear();
      await guarded.close();
    },

    /** True when no provider is configured: conversations run on the SIMULATED engine. */
    get simulatedOnly(): boolean {
      return deployment.length === 0;
    },

    /**
     * The engine for an agent's `agentModel`, in this order: the organization's own provider that
     * serves the model; a deployment provider that declares it, then one that lists it; the first
     * deployment provider with the deployment's model (CALLPLANE_LLM_MODEL, else its first declared
     * model, else the model asked for); else SIMULATED.
     */
    async resolve(orgId: number, agentModel: string | undefined): Promise<ModelChoice> {
      if (agentModel) {
        const own = (await llmProviderRepo.list(db, orgId)).find((r) => modelsOf(r).includes(agentModel));
        if (own) return { engine: orgEngine(own), model: agentModel, provider: own.name, own: true };
      }
      if (deployment.length === 0) return { engine: simulated, model: SIMULATED, provider: SIMULATED };
      if (agentModel) {
        const declared = deployment.find((d) => d.config.models.includes(agentModel));
        if (declared) return { engine: declared.engine, model: agentModel, provider: declared.config.name };
        // One provider at a time, in order: a provider that lists the model spares waiting for the next.
        for (const d of deployment) {
          if (d.config.listModels && (await lists.get(d.engine))?.includes(agentModel)) {
            return { engine: d.engine, model: agentModel, provider: d.config.name };
          }
        }
      }
      const first = deployment[0]!;
      const model = config.llmDefaultModel ?? first.config.models[0] ?? agentModel ?? FALLBACK_MODEL;
      return { engine: first.engine, model, provider: first.config.name };
    },

    /**
     * GET /api/v2/models/answering (extension): which engine would answer `model` for the organization
     * the operation names, and whether that is the SIMULATED engine (no provider configured), so a
     * form can say so before the first message. Nothing is asked of a provider beyond its cached list.
     */
    async answering(scope: Scope, targetAccountId: number | undefined, model: string) {
      const orgId = await orgOf(scope, targetAccountId);
      if (orgId === undefined) throw new Invalid('targetAccountId is required for a reseller or partner: the organization or agent whose model it is');
      const choice = await self.resolve(orgId, model);
      return { success: true, message: 'Success', model: choice.model, provider: choice.provider, simulated: choice.provider === SIMULATED, substituted: choice.model !== model };
    },

    /** GET /api/v2/models/supported: the catalog of the caller's organization (or the deployment's, for a reseller or partner without targetAccountId). */
    async supported(scope: Scope, targetAccountId: number | undefined): Promise<Catalog> {
      return catalogOf(await orgOf(scope, targetAccountId));
    },

    /** The model ids an organization's agents may name (agentModel, agentThinkingModel). */
    async modelIds(orgId: number): Promise<ReadonlySet<string>> {
      return new Set(Object.keys(await catalogOf(orgId)));
    },

    async listProviders(scope: Scope, targetAccountId: number | undefined) {
      const org = await organization(scope, targetAccountId);
      const rows = await llmProviderRepo.list(db, org.id);
      return { success: true, message: 'Success', providers: rows.map(view) };
    },

    /** Creates or replaces one of the organization's providers; `created` says which. */
    async putProvider(scope: Scope, targetAccountId: number | undefined, rawName: string, body: ProviderBody) {
      const name = checkName(rawName);
      const org = await organization(scope, targetAccountId);
      const checked = checkBody(body);
      const at = now();
      const { row, created } = await db.transaction().execute(async (tx) => {
        // Serialises one organization's writes, so the limit holds on PostgreSQL too.
        await accountRepo.lock(tx, org.id);
        const existing = await llmProviderRepo.find(tx, org.id, name);
        // The stored key goes only to the origin it was given for (docs/api.md, "Secrets and their targets").
        const refused = secretTargetRefusal({
          secret: 'apiKey', target: 'baseUrl', before: urlOrigin(existing?.base_url), after: urlOrigin(checked.baseUrl),
          keeps: body.apiKey === undefined && Boolean(existing?.api_key),
        });
        if (refused) throw new Invalid(refused);
        const apiKey = body.apiKey === undefined ? existing?.api_key ?? null : body.apiKey === null ? null : box.seal(body.apiKey);
        const write = { base_url: checked.baseUrl, api_key: apiKey, models: JSON.stringify(checked.models) };
        if (existing) return { row: await llmProviderRepo.update(tx, existing.id, write, Math.max(at, existing.updated_at + 1)), created: false };
        if ((await llmProviderRepo.count(tx, org.id)) >= MAX_ORG_PROVIDERS) {
          throw new Conflict(`An organization may have at most ${MAX_ORG_PROVIDERS} model providers; delete one first`);
        }
        return { row: await llmProviderRepo.insert(tx, org.id, name, write, at), created: true };
      });
      return { created, body: { success: true, message: created ? `Provider ${name} created` : `Provider ${name} updated`, provider: view(row) } };
    },

    async removeProvider(scope: Scope, targetAccountId: number | undefined, rawName: string) {
      const org = await organization(scope, targetAccountId);
      const removed = PROVIDER_NAME.test(rawName) ? await llmProviderRepo.remove(db, org.id, rawName) : 0;
      if (removed === 0) throw new NotFound(`Model provider ${rawName.slice(0, 60)} was not found`);
      return { success: true, message: `Provider ${rawName} deleted` };
    },
  };
  return self;
}

export type ModelsService = ReturnType<typeof modelsService>;
