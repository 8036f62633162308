// Agents: each agent account's configuration in two slots (staging, edited by POST /api/v2/agent;
// live, the contract's "default", changed only by publish and by restoring a version to it) and
// its stored versions. The agent id is `camp<accountId>` (docs/agents.md); either form is accepted.
import type { Transaction } from 'kysely';
import type { AccountRow, DB, Db, Executor } from '../../db/types.ts';
import type { Scope } from '../../http/auth.ts';
import { numberHolders } from '../phone-numbers/holders.ts';
import { isUniqueViolation } from '../../db/errors.ts';
import { readJsonObject } from '../../db/json-columns.ts';
import { Conflict, Invalid, NotFound } from '../../http/errors.ts';
import { accountRepo } from '../accounts/repository.ts';
import { knowledgeRepo } from '../knowledge/repository.ts';
import { presentNumber } from '../phone-numbers/present.ts';
import { phoneNumberRepo } from '../phone-numbers/repository.ts';
import type { ModelsService } from '../models/service.ts';
import { recordAgentEvent, type AgentEventType } from './events.ts';
import { agentRepo, urlRepo, versionRepo, type AgentRow } from './repository.ts';
import { FIELD_ALIASES, reviewAgent, reviewFields, type FieldInput } from './review.ts';
import { resolveAgentSettings, type AgentSettings } from './settings.ts';
import { normaliseSlug } from './slug.ts';
import { checkConfig, checkModels, checkVoiceChoice, defaultConfig, FIELDS, MODEL_FIELDS, type AgentConfig, type AgentField } from './validation.ts';

export type Slot = 'staging' | 'default';

export interface AgentServiceDeps {
  db: Db;
  /** Wakes this process's delivery worker after an event was queued. */
  wakeDeliveries: () => void;
  /** The organization's model catalog (which models an agent may name) and the model that reviews. */
  models: Pick<ModelsService, 'modelIds' | 'resolve'>;
  /**
   * The agent tests' publish gate (a port: agent-tests is above agents, docs/testing-agents.md):
   * asked, in the publish's transaction, about an agent whose staging configuration has testGate
   * on; what it answers is why the publish is refused (409), undefined when it may go.
   */
  publishGate?: PublishGate;
  /**
   * The tasks an agent's calling window holds (a port: tasks is above agents, docs/campaigns.md):
   * when a publish or a restore changes the live window, `recheck` makes them due again in that
   * transaction, and `wake` tells this process's task queue after the commit.
   */
  heldTasks?: HeldTasks;
  now?: () => number;
}

export type PublishGate = (tx: Executor, account: AccountRow, staging: AgentSettings) => Promise<string | undefined>;

export interface HeldTasks {
  recheck: (tx: Transaction<DB>, agent: AccountRow, now: number) => Promise<void>;
  wake: () => void;
}

/** The calling window a stored configuration sets (its JSON, for comparing two), or 'null'. */
const windowOf = (config: string): string => JSON.stringify(readJsonObject(config).callingWindow ?? null);

export const agentIdOf = (accountId: number) => `camp${accountId}`;

/** `camp42` or `42` → 42; anything else is no agent (404). */
export function accountIdOf(agentId: string): number | undefined {
  const m = /^(?:camp)?([1-9]\d{0,9})$/.exec(agentId);
  return m ? Number(m[1]) : undefined;
}

export const MAX_TITLE = 200;

/** POST /api/v2/agent/autoReviewAgentConfiguration. */
export interface ReviewBody {
  mode?: string;
  agentId?: string;
  /** Accepted and ignored: callplane has no agent templates. */
  templateId?: string;
  fields?: Array<{ key: string; value?: string }>;
}

function checkTitle(title: string, field = 'title'): string {
  const t = title.trim();
  if (t === '') throw new Invalid(`${field} must not be empty`);
  if (t.length > MAX_TITLE) throw new Invalid(`${field} must be at most ${MAX_TITLE} characters long`);
  return t;
}

/** A versionId path parameter: the epoch-ms score, a positive integer. */
function parseVersionId(v: string): number {
  if (!/^[1-9]\d{0,15}$/.test(v) || !Number.isSafeInteger(Number(v))) throw new NotFound(`versionId ${v} was not found`);
  return Number(v);
}

export function agentService(deps: AgentServiceDeps) {
  const { db, wakeDeliveries, models } = deps;
  const clock = deps.now ?? Date.now;

  /** The agent an operation without an agentId acts on: the token's own, else targetAccountId, else the organization's default agent. */
  async function resolve(scope: Scope, targetAccountId: number | undefined): Promise<AccountRow> {
    const account = await scope.target(targetAccountId, ['organization', 'agent']);
    if (account.kind === 'agent') return account;
    const id = await accountRepo.firstAgentId(db, account.id);
    if (id === null) throw new NotFound(`organization ${account.id} has no agent account`);
    return scope.account(id, ['agent']);
  }

  /** The agent a path's agentId names, within the caller's subtree (another tenant's: 404). */
  async function named(scope: Scope, agentId: string): Promise<AccountRow> {
    const id = accountIdOf(agentId);
    if (id === undefined) throw new NotFound(`agentId ${agentId} was not found`);
    try {
      return await scope.account(id, ['agent'], 'agentId');
    } catch (err) {
      if (err instanceof NotFound) throw new NotFound(`agentId ${agentId} was not found`);
      throw err;
    }
  }

  /**
   * The agent `targetUsername` names (Agent URLs): its username as GET /api/v2/account shows it
   * (email, or `account-<id>`), its agent id (`camp<id>`) or account id, case-insensitive; without
   * one, the agent operations without an agentId act on. Outside the caller's subtree: 404.
   */
  async function byUsername(scope: Scope, targetUsername: string | undefined): Promise<AccountRow> {
    const name = targetUsername?.trim().toLowerCase() ?? '';
    if (name === '') return resolve(scope, undefined);
    const notFound = () => new NotFound(`targetUsername ${targetUsername} was not found`);
    const idMatch = /^(?:camp|account-)?([1-9]\d{0,9})$/.exec(name);
    let id: number | undefined = idMatch ? Number(idMatch[1]) : undefined;
    if (id === undefined && name.includes('@')) {
      const mine = (await accountRepo.agentsByEmail(db, name)).filter((a) => scope.contains(a));
      if (mine.length > 1) throw new Invalid(`targetUsername ${targetUsername} names ${mine.length} agents: name one as account-<id>`);
      id = mine[0]?.id;
    }
    if (id === undefined) throw notFound();
    try {
      return await scope.account(id, ['agent'], 'targetUsername');
    } catch (err) {
      if (err instanceof NotFound) throw notFound();
      throw err;
    }
  }

  /**
   * A stored configuration, with the default of every field it lacks: configurations stored
   * before a field existed (knowledgeBases) read as if they had its default.
   */
  const parse = (account: AccountRow, json: string): AgentConfig => ({ ...defaultConfig(account.name), ...readJsonObject(json) });

  async function slots(account: AccountRow, ex: Executor = db): Promise<{ staging: AgentConfig; live: AgentConfig; row?: AgentRow }> {
    const row = await agentRepo.find(ex, account.id);
    if (!row) {
      const initial = defaultConfig(account.name);
      return { staging: initial, live: initial };
    }
    return { staging: parse(account, row.staging), live: parse(account, row.live), row };
  }

  /** What a transaction did that matters after its commit. */
  interface Effects { queued: boolean; tasks?: boolean }

  /** Runs `fn` in a transaction with the agent's row locked (created when missing); wakes deliveries after commit. */
  async function locked<T>(account: AccountRow, fn: (tx: Transaction<DB>, row: AgentRow, now: number, fx: Effects) => Promise<T>): Promise<T> {
    const fx: Effects = { queued: false };
    const result = await db.transaction().execute(async (tx) => {
      const now = clock();
      const row = await agentRepo.lockOrCreate(tx, account.id, account.org_id!, JSON.stringify(defaultConfig(account.name)), now);
      return fn(tx, row, now, fx);
    });
    if (fx.queued) wakeDeliveries();
    if (fx.tasks) deps.heldTasks?.wake();
    return result;
  }

  /** The next versionId: now, or one past the agent's last when that is not earlier (call with the row locked). */
  async function nextVersionId(tx: Executor, accountId: number, now: number): Promise<number> {
    return Math.max(now, (await versionRepo.lastVersionId(tx, accountId)) + 1);
  }

  async function storeVersion(tx: Executor, accountId: number, title: string | undefined, snapshot: string, now: number): Promise<{ versionId: number; title: string }> {
    const versionId = await nextVersionId(tx, accountId, now);
    const t = title ?? `Auto-${versionId}`;
    await versionRepo.insert(tx, { account_id: accountId, version_id: versionId, title: t, snapshot, created_at: now, updated_at: now });
    return { versionId, title: t };
  }

  /** Replaces live with `next`, keeping the replaced live as an automatic version, and queues the `agent` event. */
  async function setLive(tx: Transaction<DB>, account: AccountRow, row: AgentRow, next: string, type: AgentEventType, source: 'staging' | number, now: number, fx: Effects) {
    const previous = await storeVersion(tx, account.id, undefined, row.live, now);
    await agentRepo.update(tx, account.id, { live: next, published_at: now }, now);
    // Its tasks held by the old window are looked at again under the new one at once, not at the
    // opening the old one named.
    if (deps.heldTasks && windowOf(row.live) !== windowOf(next)) {
      await deps.heldTasks.recheck(tx, account, now);
      fx.tasks = true;
    }
    if (await recordAgentEvent(tx, account.org_id!, type, { agentId: agentIdOf(account.id), accountId: account.id, source, previousVersionId: previous.versionId }, now)) {
      fx.queued = true;
    }
    return previous;
  }

  async function versionOf(tx: Executor, account: AccountRow, raw: string) {
    const versionId = parseVersionId(raw);
    const v = await versionRepo.find(tx, account.id, versionId);
    if (!v) throw new NotFound(`versionId ${raw} was not found`);
    return v;
  }

  /**
   * The knowledge bases a write names must be knowledge bases of the agent's own organization
   * (not the caller's: a reseller editing an organization's agent names that organization's);
   * 400 naming the field and every id that is not. Only what the write sends is checked: a
   * knowledge base deleted since an agent named it stays in the stored configuration (retrieval
   * leaves it out) until a write sends the list again, and then it is refused (docs/agents.md).
   */
  async function checkKnowledgeBases(tx: Executor, account: AccountRow, config: AgentConfig, root = ''): Promise<void> {
    const ids = config.knowledgeBases as string[] | undefined;
    if (!ids || ids.length === 0) return;
    const found = new Set(await knowledgeRepo.existingBases(tx, account.org_id!, ids));
    const missing = ids.filter((id) => !found.has(id)).map((id) => `'${id}'`);
    if (missing.length === 1) throw new Invalid(`${root}knowledgeBases: ${missing[0]} is not a knowledge base of this organization`);
    if (missing.length > 1) throw new Invalid(`${root}knowledgeBases: ${missing.join(', ')} are not knowledge bases of this organization`);
  }

  const present = (account: AccountRow, config: AgentConfig) => ({ id: agentIdOf(account.id), accountId: account.id, ...config });

  /** 400 unless every model the configuration names is in the organization's catalog (computed once, only when one is named). */
  async function checkModelsOf(account: AccountRow, config: AgentConfig, root = ''): Promise<void> {
    if (!MODEL_FIELDS.some((k) => typeof config[k] === 'string')) return;
    checkModels(config, await models.modelIds(account.org_id!), root);
  }

  /** A configuration value as the review shows it: text as is, anything else as JSON. */
  const shown = (v: unknown) => (typeof v === 'string' ? v : v === undefined ? '' : JSON.stringify(v));

  return {
    /**
     * The agent a message names (receiveMessage's targetAgent): its account id, agent id
     * (`camp…`), username, or a phone number one of the caller's organizations owns (the agent
     * holding it; a number configured as its provider's phoneNumber: the organization's first
     * agent), as numberHolders finds it. Outside the caller's subtree: 404 naming `field`.
     */
    async named(scope: Scope, name: string, field: string): Promise<AccountRow> {
      const text = name.trim();
      if (/^\+?[\d\s().-]{7,20}$/.test(text) && text.replace(/\D/g, '').length >= 7 && !/^[1-9]\d{0,9}$/.test(text)) {
        for (const holder of await numberHolders(db, text)) {
          const agentId = holder.agentId ?? await accountRepo.firstAgentId(db, holder.orgId);
          if (agentId === null) continue;
          try {
            return await scope.account(agentId, ['agent'], field);
          } catch (err) {
            if (!(err instanceof NotFound)) throw err;
          }
        }
        throw new NotFound(`${field} ${name} was not found`);
      }
      try {
        return await byUsername(scope, text === '' ? '-' : text);
      } catch (err) {
        if (err instanceof NotFound) throw new NotFound(`${field} ${name} was not found`);
        throw err;
      }
    },

    /**
     * The agent a public page's slug names (docs/agents.md, Agent URLs), in any case; undefined
     * when the slug is not a usable one, nobody holds it, or the agent or an account above it is
     * suspended (a public page tells none of these apart).
     */
    async bySlug(rawSlug: string): Promise<{ account: AccountRow; slug: string } | undefined> {
      let slug: string;
      try {
        slug = normaliseSlug(rawSlug);
      } catch {
        return undefined;
      }
      const id = await urlRepo.holder(db, slug);
      const found = id === undefined ? undefined : await accountRepo.findWithSuspension(db, id);
      if (!found || found.account.kind !== 'agent' || found.suspended) return undefined;
      return { account: found.account, slug };
    },

    /** The agent's live settings, what conversations use (the defaults until its first write). */
    async liveConfig(account: AccountRow, ex: Executor = db): Promise<AgentSettings> {
      return resolveAgentSettings((await slots(account, ex)).live);
    },

    /** The agent a path's agentId names (in the caller's subtree) and its STAGING settings: what a test chat talks with. */
    async staged(scope: Scope, agentId: string): Promise<{ account: AccountRow; config: AgentSettings }> {
      const account = await named(scope, agentId);
      return { account, config: resolveAgentSettings((await slots(account)).staging) };
    },

    /** The agent a path's agentId names (in the caller's subtree): 404 otherwise. */
    agent: (scope: Scope, agentId: string): Promise<AccountRow> => named(scope, agentId),

    /**
     * The configuration an agent test talks to (docs/testing-agents.md): the agent's staging or
     * live slot, or a stored version (404 naming `version` when the agent has no such version).
     */
    async testTarget(account: AccountRow, target: 'staging' | 'live' | number): Promise<AgentSettings> {
      if (target === 'staging' || target === 'live') {
        const s = await slots(account);
        return resolveAgentSettings(target === 'staging' ? s.staging : s.live);
      }
      const v = await versionRepo.find(db, account.id, target);
      if (!v) throw new NotFound(`version ${target} was not found among agent ${agentIdOf(account.id)}'s versions`);
      return resolveAgentSettings(parse(account, v.snapshot));
    },

    /** Checks (and normalises) a partial configuration as POST /api/v2/agent takes it; 400 naming the field. */
    checkConfig: (body: unknown) => checkConfig(body),

    async getSlot(scope: Scope, slot: Slot, targetAccountId?: number) {
      const account = await resolve(scope, targetAccountId);
      const s = await slots(account);
      return { success: true, agent: present(account, slot === 'staging' ? s.staging : s.live) };
    },

    async get(scope: Scope, agentId: string) {
      const account = await named(scope, agentId);
      const [s, numbers] = await Promise.all([slots(account), phoneNumberRepo.listForOrg(db, account.org_id!, account.id)]);
      return {
        success: true, message: 'Success',
        // Extension: the numbers this agent holds (docs/numbers.md); the contract's answer has none.
        phoneNumbers: numbers.map(presentNumber),
        sponsorship: {
          ...present(account, s.live), staging: s.staging,
          publishedAt: s.row?.published_at != null ? Math.floor(s.row.published_at / 1000) : null,
        },
      };
    },

    async update(scope: Scope, body: unknown, targetAccountId?: number) {
      const patch = checkConfig(body);
      const account = await resolve(scope, targetAccountId);
      await checkModelsOf(account, patch);
      await locked(account, async (tx, row, now) => {
        await checkKnowledgeBases(tx, account, patch);
        const staging = { ...parse(account, row.staging), ...patch };
        if (patch.agentVoice !== undefined || patch.agentTtsEngine !== undefined) checkVoiceChoice(staging);
        await agentRepo.update(tx, account.id, { staging: JSON.stringify(staging) }, now);
      });
      return { success: true, message: 'Agent updated.', campaignId: agentIdOf(account.id) };
    },

    async publish(scope: Scope, targetAccountId?: number) {
      const account = await resolve(scope, targetAccountId);
      const previous = await locked(account, async (tx, row, now, fx) => {
        const staging = resolveAgentSettings(parse(account, row.staging));
        if (staging.testGate && deps.publishGate) {
          const refused = await deps.publishGate(tx, account, staging);
          if (refused !== undefined) throw new Conflict(refused);
        }
        return setLive(tx, account, row, row.staging, 'agent.published', 'staging', now, fx);
      });
      return { success: true, message: `Agent ${agentIdOf(account.id)} published`, previousVersionId: previous.versionId };
    },

    async revert(scope: Scope, targetAccountId?: number) {
      const account = await resolve(scope, targetAccountId);
      await locked(account, (tx, row, now) => agentRepo.update(tx, account.id, { staging: row.live }, now));
      return { success: true, message: `Agent ${agentIdOf(account.id)} unpublished` };
    },

    async listVersions(scope: Scope, agentId: string, includeData: boolean) {
      const account = await named(scope, agentId);
      const rows = await versionRepo.list(db, account.id, includeData);
      return {
        success: true,
        versions: rows.map((r) => ({
          title: r.title, versionId: r.version_id, createdAt: Math.floor(r.created_at / 1000), updatedAt: Math.floor(r.updated_at / 1000),
          ...(r.snapshot !== undefined ? { snapshot: parse(account, r.snapshot) } : {}),
        })),
      };
    },

    async createVersion(scope: Scope, agentId: string, title: string, source: Slot) {
      const t = checkTitle(title);
      const account = await named(scope, agentId);
      const created = await locked(account, (tx, row, now) => storeVersion(tx, account.id, t, source === 'staging' ? row.staging : row.live, now));
      return { success: true, createdVersion: created };
    },

    async replaceVersion(scope: Scope, agentId: string, versionId: string, snapshot: unknown) {
      const checked = checkConfig(snapshot, 'snapshot.');
      const account = await named(scope, agentId);
      checkVoiceChoice({ ...defaultConfig(account.name), ...checked }, 'snapshot.');
      await checkModelsOf(account, checked, 'snapshot.');
      const id = await locked(account, async (tx, _row, now) => {
        const v = await versionOf(tx, account, versionId);
        await checkKnowledgeBases(tx, account, checked, 'snapshot.');
        await versionRepo.update(tx, account.id, v.version_id, { snapshot: JSON.stringify({ ...defaultConfig(account.name), ...checked }) }, now);
        return v.version_id;
      });
      return { success: true, versionId: id };
    },

    async restoreVersion(scope: Scope, agentId: string, versionId: string, target: Slot) {
      const account = await named(scope, agentId);
      const restored = await locked(account, async (tx, row, now, fx) => {
        const v = await versionOf(tx, account, versionId);
        if (target === 'staging') await agentRepo.update(tx, account.id, { staging: v.snapshot }, now);
        else await setLive(tx, account, row, v.snapshot, 'agent.restored', v.version_id, now, fx);
        return parse(account, v.snapshot);
      });
      return { success: true, restored: present(account, restored), target };
    },

    /** Whether `slug` is free for the named agent (its own slug is): never says who holds it. */
    async checkUrl(scope: Scope, targetUsername: string | undefined, rawSlug: string) {
      const slug = normaliseSlug(rawSlug);
      const account = await byUsername(scope, targetUsername);
      const holder = await urlRepo.holder(db, slug);
      return { success: true, available: holder === undefined || holder === account.id, slug };
    },

    async getUrl(scope: Scope, targetUsername: string | undefined) {
      const account = await byUsername(scope, targetUsername);
      const slug = await urlRepo.slugOf(db, account.id);
      if (slug === undefined) throw new NotFound(`agent ${agentIdOf(account.id)} has no agent URL yet (POST /api/v2/agentUrl sets one)`);
      return { success: true, slug };
    },

    /** Sets (or replaces) the agent's slug; the unique index settles races: the loser is 409. */
    async setUrl(scope: Scope, targetUsername: string | undefined, rawSlug: string) {
      const slug = normaliseSlug(rawSlug);
      const account = await byUsername(scope, targetUsername);
      try {
        await urlRepo.set(db, account.id, slug, clock());
      } catch (err) {
        if (isUniqueViolation(err)) throw new Conflict(`slug ${slug} is not available`);
        throw err;
      }
      return { success: true, slug };
    },

    /**
     * autoReviewAgentConfiguration. `agent` mode reviews the named agent's staging configuration;
     * `fields` mode reviews `fields` (their values read from the agent's staging configuration when
     * agentId is given). The agent's model (resolved like a conversation's) reviews; SIMULATED: rules.
     */
    async review(scope: Scope, body: ReviewBody, targetAccountId?: number) {
      const mode = body.mode ?? 'fields';
      if (mode === 'agent') {
        if (body.agentId === undefined || body.agentId === '') throw new Invalid('agentId is required in agent mode');
        const account = await named(scope, body.agentId);
        const staging = resolveAgentSettings((await slots(account)).staging);
        return reviewAgent(await models.resolve(account.org_id!, staging.agentModel), agentIdOf(account.id), staging);
      }
      if (mode !== 'fields') throw new Invalid('mode must be one of: fields, agent');
      const fields = body.fields ?? [];
      if (fields.length === 0) throw new Invalid('fields is required in fields mode: [{key, value}] (with agentId, values are read from the agent)');
      const byAgent = body.agentId !== undefined && body.agentId !== '';
      const account = byAgent ? await named(scope, body.agentId!) : await resolve(scope, targetAccountId);
      const staging = resolveAgentSettings((await slots(account)).staging);
      const items: FieldInput[] = fields.map((f, i) => {
        const alias = FIELD_ALIASES[f.key];
        const field = alias ?? (Object.hasOwn(FIELDS, f.key) ? f.key : undefined);
        if (!byAgent) return { key: f.key, field, value: f.value ?? '' };
        if (!field) {
          throw new Invalid(`fields[${i}].key ${JSON.stringify(f.key)} is not a field of agent ${agentIdOf(account.id)} (agent fields, or greeting and instructions)`);
        }
        return { key: f.key, field, value: shown(staging[field as AgentField]) };
      });
      return reviewFields(await models.resolve(account.org_id!, staging.agentModel), items, byAgent ? staging : undefined, staging.agentModel);
    },

    async renameVersion(scope: Scope, agentId: string, versionId: string, title: string) {
      const t = checkTitle(title);
      const account = await named(scope, agentId);
      const id = await locked(account, async (tx, _row, now) => {
        const v = await versionOf(tx, account, versionId);
        await versionRepo.update(tx, account.id, v.version_id, { title: t }, now);
        return v.version_id;
      });
      return { success: true, versionId: id, newTitle: t };
    },
  };
}

export type AgentService = ReturnType<typeof agentService>;
