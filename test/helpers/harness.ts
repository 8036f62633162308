// One app on one fresh database per test file, for each engine under test.
// SQLite: a new file in a temp dir. PostgreSQL (when TEST_DATABASE_URL is set): a new database,
// dropped afterwards. Nothing of our own is mocked.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import crypto from 'node:crypto';
import { buildApp, type App, type AppDeps } from '../../src/app.ts';
import { loadConfig, type Config } from '../../src/config.ts';
import { openDatabase, type Database } from '../../src/db/index.ts';
import { migrateToLatest } from '../../src/db/migrate.ts';
import { SecretBox } from '../../src/lib/crypto.ts';
import { bootstrapAdmin } from '../../src/modules/tokens/service.ts';
import { createScratchPgDatabase } from './scratch-pg.ts';
import type { TaskQueue } from '../../src/modules/tasks/task-queue.ts';
import type { DeliveryQueue } from '../../src/modules/webhooks/delivery-queue.ts';
import type { TurnQueue } from '../../src/modules/conversations/turn-queue.ts';
import type { AnalysisQueue } from '../../src/modules/conversations/analysis-queue.ts';
import type { AdrQueue } from '../../src/modules/adr/adr-queue.ts';
import type { AgentTestQueue } from '../../src/modules/agent-tests/run-queue.ts';
import type { SipWorker } from '../../src/modules/sip/sip-worker.ts';
import { createPlatform, type Platform, type PlatformDeps, type Services } from '../../src/platform.ts';

export type Engine = 'sqlite' | 'postgres';
export const PG_URL = process.env.TEST_DATABASE_URL;
/**
 * This file on SQLite only: scripts/test.mjs sets it for a file marked `// @engines sqlite` (its
 * suites sit above the repositories, where the engines cannot differ; docs/testing.md) unless
 * TEST_ENGINES=all. A file run any other way runs on both engines when TEST_DATABASE_URL is set.
 */
const SQLITE_ONLY = process.env.CALLPLANE_TEST_ENGINES === 'sqlite';
export const ENGINES: Engine[] = PG_URL && !SQLITE_ONLY ? ['sqlite', 'postgres'] : ['sqlite'];
/** Engines not under test in this run (reported as skipped, never silently dropped). */
export const SKIPPED_ENGINES: Engine[] = PG_URL && !SQLITE_ONLY ? [] : ['postgres'];
/** Why the PostgreSQL half of a suite is skipped in this run. */
export const ENGINE_SKIP_REASON = PG_URL
  ? 'SQLite only: this file sits above the repositories (`// @engines sqlite`); TEST_ENGINES=all runs its PostgreSQL half'
  : 'set TEST_DATABASE_URL=postgres://… to run the PostgreSQL half';

export interface Reply { status: number; body: any; headers: Record<string, unknown> }
export interface CallOptions { token?: string | null; query?: Record<string, unknown>; body?: unknown; payload?: string; headers?: Record<string, string> }

export interface Harness {
  engine: Engine;
  app: App;
  database: Database;
  config: Config;
  box: SecretBox;
  partnerId: number;
  adminToken: string;
  /** The task queue of this harness; its runner runs only when started with `worker: true`. */
  tasks: TaskQueue;
  /** The webhook delivery queue of this harness; its worker runs only when started with `deliveries: true`. */
  deliveries: DeliveryQueue;
  /** The conversation-turn queue; its worker runs only when started with `turns: true`. */
  turns: TurnQueue;
  /** The analyses after conversations; its worker runs only when started with `analyses: true`. */
  analyses: AnalysisQueue;
  /** The activity-record export queue; its worker runs only when started with `adr: true`. */
  adr: AdrQueue;
  /** Agent test runs; its worker runs only when started with `agentTests: true`. */
  agentTests: AgentTestQueue;
  /** The SIP runtime (endpoint, registration owner), when started with `sip`. */
  sip?: SipWorker;
  /** The platform's services (the same the app's routes use). */
  services: Services;
  /** The voice activity detectors; `await vad.ready()` loads the Silero model before a call needs it. */
  vad: Platform['vad'];
  call(method: string, url: string, opts?: CallOptions): Promise<Reply>;
  /** A reseller under the partner, with its own token. */
  reseller(name?: string): Promise<{ id: number; token: string }>;
  /** An organization under a reseller, with its own token and its default agent. */
  organization(resellerId: number, body?: Record<string, unknown>): Promise<{ id: number; agentId: number; token: string }>;
  /** An agent account in an organization, with its own token. */
  agent(orgId: number, body?: Record<string, unknown>): Promise<{ id: number; token: string }>;
  tokenFor(accountId: number): Promise<string>;
  close(): Promise<void>;
}

export interface HarnessOptions {
  /** Run the task worker in the harness's process (as `--role all` does). */
  worker?: boolean;
  /** Shorter leases, heartbeats, carrier settings for tests. */
  runtime?: PlatformDeps['tasks'];
  /** Run the webhook delivery worker (deliveries and the task-event outbox) in the harness's process. */
  deliveries?: boolean;
  /** Shorter leases, a fast retry schedule … for delivery tests. */
  deliveryRuntime?: PlatformDeps['deliveries'];
  /**
   * Run a SIP runtime (listener on `host`, default 127.0.0.1, a free port; the owner of SIP
   * registrations; the endpoint calls over outbound routes use) in the harness's process.
   */
  sip?: Exclude<PlatformDeps['sip'], false>;
  /** How long SIP registration POST/DELETE wait for the owner (default 14 s). */
  sipWorkerWaitMs?: number;
  /** Run the conversation-turn worker (API messages and SMS the agent answers). */
  turns?: boolean;
  /** Run the number-release worker (a deleted organization's or agent's numbers), with these test settings. */
  numberReleases?: boolean | PlatformDeps['numberReleases'];
  /** Run the worker of analyses after conversations; `analysisRuntime` shortens its backoff. */
  analyses?: boolean;
  analysisRuntime?: PlatformDeps['analyses'];
  /** Run the activity-record export worker (window maker and shipper). */
  adr?: boolean;
  /** A moved clock, a fast retry schedule … for export tests. */
  adrRuntime?: PlatformDeps['adr'];
  /** Run the agent test runs' worker; `agentTestRuntime` shortens its leases. */
  agentTests?: boolean;
  agentTestRuntime?: PlatformDeps['agentTests'];
  /** A SIMULATED call's bounds (its turn and time limits). */
  simulatedCalls?: PlatformDeps['simulatedCalls'];
  /** How long a spoken turn may take before the caller hears an apology (default 10 s). */
  voiceTurnTimeoutMs?: number;
  /** Recognition of streamed Twilio calls restricted to these (deterministic tests). */
  voiceGrammar?: PlatformDeps['voiceGrammar'];
  /** The live feed's test settings (a shorter heartbeat and token recheck, a smaller buffer). */
  liveRuntime?: PlatformDeps['live'];
  /** The compilers of the app's route schemas (test/http/lazy-schemas.test.ts compiles them all). */
  schemas?: AppDeps['schemas'];
}

export async function startHarness(engine: Engine, env: Record<string, string> = {}, opts: HarnessOptions = {}): Promise<Harness> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'callplane-test-'));
  let drop = async () => {};
  let databaseUrl: string | undefined;
  if (engine === 'postgres') {
    const created = await createScratchPgDatabase(PG_URL!);
    databaseUrl = created.url;
    drop = created.drop;
  }
  const config = loadConfig({
    DATA_DIR: dataDir, ...(databaseUrl ? { DATABASE_URL: databaseUrl } : {}),
    // Every request of a test file comes from one address, mostly with one token: limits far above
    // what any suite sends, so the limiters run on every request without refusing any. Suites that
    // test the limits set their own (test/http/rate-limits.test.ts).
    CALLPLANE_RATE_LIMIT_PER_TOKEN: '1000000', CALLPLANE_RATE_LIMIT_PER_ADDRESS: '1000000',
    ...env,
  });
  const database = openDatabase({ databaseUrl, sqliteFile: path.join(dataDir, 'callplane.db'), poolSize: 5 });
  await migrateToLatest(database);
  const { partnerId, newToken } = await bootstrapAdmin(database.db, undefined);
  const box = new SecretBox(crypto.randomBytes(32));
  const platform = createPlatform({
    config, database, box,
    sip: opts.sip ? { host: '127.0.0.1', port: 0, ...opts.sip } : false,
    tasks: opts.runtime,
    deliveries: opts.deliveryRuntime,
    analyses: opts.analysisRuntime,
    adr: opts.adrRuntime,
    sipWorkerWaitMs: opts.sipWorkerWaitMs,
    voiceTurnTimeoutMs: opts.voiceTurnTimeoutMs,
    voiceGrammar: opts.voiceGrammar,
    numberReleases: typeof opts.numberReleases === 'object' ? opts.numberReleases : undefined,
    live: opts.liveRuntime,
    agentTests: opts.agentTestRuntime,
    simulatedCalls: opts.simulatedCalls,
  });
  const { tasks, deliveries, sip } = platform;
  if (opts.worker || opts.deliveries || opts.turns || opts.numberReleases || opts.analyses || opts.agentTests || sip) await platform.listen();
  if (sip) await sip.start();
  if (opts.worker) tasks.startWorker();
  if (opts.deliveries) deliveries.startWorker();
  if (opts.turns) platform.turns.startWorker();
  if (opts.numberReleases) platform.numberReleases.startWorker();
  if (opts.analyses) platform.analyses.startWorker();
  if (opts.adr) platform.adr.startWorker();
  if (opts.agentTests) platform.agentTests.startWorker();
  const app = await buildApp({ config, database, services: platform.services, schemas: opts.schemas, metrics: platform.metrics });
  await app.ready();
  const adminToken = newToken!;

  const call: Harness['call'] = async (method, url, opts = {}) => {
    const token = opts.token === undefined ? adminToken : opts.token;
    const query: Record<string, string> = {};
    for (const [k, v] of Object.entries(opts.query ?? {})) if (v !== undefined) query[k] = typeof v === 'object' && v !== null ? JSON.stringify(v) : String(v as string | number | boolean);
    if (token !== null) query.token = token;
    const res = await app.inject({
      method: method as any, url, query,
      ...(opts.payload !== undefined ? { payload: opts.payload } : opts.body !== undefined ? { payload: opts.body as any } : {}),
      headers: opts.headers,
    });
    let body: any = res.body;
    try { body = res.json(); } catch { /* not JSON */ }
    return { status: res.statusCode, body, headers: res.headers };
  };

  const tokenFor = async (accountId: number) => {
    const r = await call('POST', '/api/v2/tokens', { query: { targetAccountId: accountId }, body: { type: 'admin', description: 'test' } });
    if (r.status !== 200) throw new Error(`token for ${accountId}: ${r.status} ${JSON.stringify(r.body)}`);
    return r.body.token.token as string;
  };

  let n = 0;
  return {
    engine, app, database, config, box, partnerId, adminToken, call, tokenFor, tasks, deliveries, sip, turns: platform.turns, analyses: platform.analyses, adr: platform.adr, agentTests: platform.agentTests, services: platform.services, vad: platform.vad,
    async reseller(name) {
      const r = await call('POST', '/api/v2/createReseller', { query: { targetPartnerId: partnerId }, body: { resellerName: name ?? `Reseller ${++n}` } });
      if (r.status !== 201) throw new Error(`reseller: ${r.status} ${JSON.stringify(r.body)}`);
      return { id: r.body.reseller.id, token: await tokenFor(r.body.reseller.id) };
    },
    async organization(resellerId, body = {}) {
      const r = await call('POST', '/api/v2/createOrganization', { query: { targetResellerId: resellerId }, body: { orgName: `Org ${++n}`, ...body } });
      if (r.status !== 201) throw new Error(`organization: ${r.status} ${JSON.stringify(r.body)}`);
      const org = r.body.organization;
      return { id: org.id, agentId: org.defaultAccountId, token: await tokenFor(org.id) };
    },
    async agent(orgId, body = {}) {
      const r = await call('POST', '/api/v2/createAccount', { query: { targetOrganizationId: orgId }, body });
      if (r.status !== 201) throw new Error(`agent: ${r.status} ${JSON.stringify(r.body)}`);
      return { id: r.body.accountId, token: await tokenFor(r.body.accountId) };
    },
    async close() {
      await tasks.stop();
      await deliveries.stop();
      await platform.turns.stop();
      await platform.numberReleases.stop();
      await platform.analyses.stop();
      await platform.adr.stop();
      await platform.agentTests.stop();
      await sip?.stop();
      await platform.close();
      await app.close();
      await database.close();
      await drop();
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
