// Which language model answers: the deployment's providers (configuration), an organization's
// own providers (bring your own key), and the SIMULATED engine when there is none. The catalog of
// GET /api/v2/models/supported and the models POST /api/v2/agent accepts come from here too.
import type { Config, LlmProviderConfig } from '../../config.ts';
import { OpenAICompatible } from '../../llm/openai-compatible.ts';
import { SIMULATED, SimulatedEngine } from '../../llm/simulated.ts';
import type { ChatEngine } from '../../llm/types.ts';

export interface ModelsServiceDeps {
  config: Pick<Config, 'llmProviders' | 'llmDefaultModel' | 'llmTimeoutMs' | 'llmMaxRetries'>;
}

/** What answers a conversation: the engine and the model name sent to it. */
export interface ModelChoice {
  engine: ChatEngine;
  model: string;
  /** The provider's name (`simulated` for the SIMULATED engine). */
  provider: string;
}

export function modelsService(deps: ModelsServiceDeps) {
  const { config } = deps;
  const simulated = new SimulatedEngine();
  const deployment = config.llmProviders.map((p: LlmProviderConfig) => ({
    config: p,
    engine: new OpenAICompatible({ name: p.name, baseUrl: p.baseUrl, apiKey: p.apiKey, timeoutMs: config.llmTimeoutMs, maxRetries: config.llmMaxRetries }),
  }));

  return {
    /** True when no provider is configured: conversations run on the SIMULATED engine. */
    get simulatedOnly(): boolean {
      return deployment.length === 0;
    },

    /**
     * The engine for an agent's `agentModel`: the first deployment provider that declares the model;
     * else the first provider with the deployment's default model (CALLPLANE_LLM_MODEL, else the
     * model asked for); else SIMULATED.
     */
    resolve(_orgId: number, agentModel: string | undefined): Promise<ModelChoice> {
      if (deployment.length === 0) return Promise.resolve({ engine: simulated, model: SIMULATED, provider: SIMULATED });
      const declared = agentModel ? deployment.find((d) => d.config.models.includes(agentModel)) : undefined;
      if (declared && agentModel) return Promise.resolve({ engine: declared.engine, model: agentModel, provider: declared.config.name });
      const first = deployment[0]!;
      const model = config.llmDefaultModel ?? first.config.models[0] ?? agentModel ?? 'gpt-4o-mini';
      return Promise.resolve({ engine: first.engine, model, provider: first.config.name });
    },
  };
}

export type ModelsService = ReturnType<typeof modelsService>;
