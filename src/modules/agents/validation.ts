// The agent configuration's fields: each one's type, range and meaning for a phone call, in one
// table that makes both the OpenAPI schema of POST /api/v2/agent and the check every write runs
// (POST /agent, and a snapshot stored by POST /agent/{agentId}/versions/{versionId}).
// docs/agents.md lists the same ranges.
import { Type, type Static, type TOptional, type TSchema, type TUnsafe } from '@sinclair/typebox';
import safeRegex from 'safe-regex2';
import { Invalid } from '../../http/errors.ts';
import { E164_PATTERN } from '../../lib/phone.ts';
import { DEFAULT_MODEL, DEFAULT_THINKING_MODEL, DEFAULT_VOICE, VOICE_IDS } from './catalog.ts';

/**
 * An agent's configuration as the field table below types it: every field optional (a partial
 * update, or a snapshot written before a field existed), and other keys tolerated as `unknown`
 * (the store keeps what older versions wrote). Readers that need a field's default and range
 * resolved go through a reading of it (voice-settings.ts for calls), not through their own checks.
 */
export type AgentConfig = Partial<AgentFields> & Record<string, unknown>;

type Check = (value: unknown, field: string) => unknown;

interface Field {
  schema: TSchema;
  /** Returns the value to store (normalised) or throws Invalid naming the field. */
  check: Check;
  nullable?: boolean;
}

const fail = (field: string, what: string): never => { throw new Invalid(`${field} ${what}`); };

function str(opts: { min?: number; max: number; enum?: readonly string[]; test?: (v: string, field: string) => string }): Check {
  return (v, field) => {
    if (typeof v !== 'string') return fail(field, 'must be a string');
    if (opts.enum && !opts.enum.includes(v)) return fail(field, `must be one of: ${opts.enum.join(', ')}`);
    if (v.length < (opts.min ?? 0)) return fail(field, opts.min === 1 ? 'must not be empty' : `must be at least ${opts.min} characters long`);
    if (v.length > opts.max) return fail(field, `must be at most ${opts.max} characters long`);
    return opts.test ? opts.test(v, field) : v;
  };
}

function int(min: number, max: number): Check {
  return (v, field) => {
    if (typeof v !== 'number' || !Number.isInteger(v)) return fail(field, 'must be an integer');
    if (v < min || v > max) return fail(field, `must be between ${min} and ${max}`);
    return v;
  };
}

const bool: Check = (v, field) => (typeof v === 'boolean' ? v : fail(field, 'must be a boolean'));

function strings(maxItems: number, item: Check): Check {
  return (v, field) => {
    if (!Array.isArray(v)) return fail(field, 'must be an array');
    if (v.length > maxItems) return fail(field, `must have at most ${maxItems} items`);
    return v.map((x, i) => item(x, `${field}[${i}]`));
  };
}

function httpUrl(v: string, field: string): string {
  let u: URL;
  try { u = new URL(v); } catch { return fail(field, 'must be an http(s) URL'); }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') return fail(field, 'must be an http(s) URL');
  return v;
}

function timezone(v: string, field: string): string {
  try {
    return new Intl.DateTimeFormat('en-US', { timeZone: v }).resolvedOptions().timeZone;
  } catch {
    return fail(field, `must be an IANA time zone (such as America/Chicago), not ${JSON.stringify(v)}`);
  }
}

function language(v: string, field: string): string {
  if (v === 'multi') return v;
  try {
    const [tag] = Intl.getCanonicalLocales(v);
    if (tag) return tag;
  } catch { /* refused below */ }
  return fail(field, `must be a BCP-47 language tag (such as en-US) or multi, not ${JSON.stringify(v)}`);
}

export const MAX_REGEX_LENGTH = 500;

/** A JavaScript regular expression that compiles and cannot backtrack catastrophically. */
function regex(v: string, field: string): string {
  try { new RegExp(v); } catch (err) { return fail(field, `is not a valid regular expression: ${(err as Error).message}`); }
  if (!safeRegex(v)) return fail(field, 'could backtrack catastrophically (nested or overlapping repetition); simplify it');
  return v;
}

const DESTINATION = new RegExp(`^(${E164_PATTERN}|(ext|pbx):[0-9A-Za-z*#_.-]{1,32})$`);
const DTMF = /^[0-9*#A-Dw,]+$/;

function backgroundAudio(v: unknown, field: string): unknown {
  if (typeof v === 'string') return httpUrl(str({ min: 1, max: 2000 })(v, field) as string, field);
  if (!v || typeof v !== 'object' || Array.isArray(v)) return fail(field, 'must be a URL or an object with url');
  const o = v as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(o)) {
    const f = `${field}.${k}`;
    switch (k) {
      case 'url': out.url = httpUrl(str({ min: 1, max: 2000 })(o.url, f) as string, f); break;
      case 'loop': case 'startAfterGreeting': out[k] = bool(o[k], f); break;
      case 'gain': out.gain = int(-40, 20)(o.gain, f); break;
      case 'track': out.track = str({ max: 2, enum: ['bg', 'fx'] })(o.track, f); break;
      default: fail(f, 'is not allowed');
    }
  }
  if (out.url === undefined) fail(`${field}.url`, 'is required');
  return out;
}

function app(v: unknown, field: string): unknown {
  if (!v || typeof v !== 'object' || Array.isArray(v)) return fail(field, 'must be an object');
  const o = v as Record<string, unknown>;
  for (const k of Object.keys(o)) if (!['appId', 'version', 'instructions'].includes(k)) fail(`${field}.${k}`, 'is not allowed');
  return {
    appId: str({ min: 1, max: 100 })(o.appId ?? fail(`${field}.appId`, 'is required'), `${field}.appId`),
    version: str({ min: 1, max: 20 })(o.version ?? fail(`${field}.version`, 'is required'), `${field}.version`),
    instructions: str({ max: 10_000 })(o.instructions ?? fail(`${field}.instructions`, 'is required'), `${field}.instructions`),
  };
}

/** Names the built-in tools take (src/modules/conversations/tools.ts); a webhook action may not reuse one. */
const RESERVED_TOOL_NAMES = ['end_conversation', 'transfer_call', 'send_text', 'queue_follow_up', 'search_knowledge'];
const TOOL_NAME = /^[A-Za-z][A-Za-z0-9_]{0,47}$/;
const PARAM_TYPES = ['string', 'number', 'integer', 'boolean'] as const;

/** One parameter of a webhook action: a flat, typed value (no nesting: the model fills it, we check it). */
function actionParameter(v: unknown, field: string): unknown {
  if (!v || typeof v !== 'object' || Array.isArray(v)) return fail(field, 'must be an object with type');
  const o = v as Record<string, unknown>;
  for (const k of Object.keys(o)) if (!['type', 'description', 'enum', 'required'].includes(k)) fail(`${field}.${k}`, 'is not allowed');
  const out: Record<string, unknown> = { type: str({ max: 10, enum: PARAM_TYPES })(o.type ?? fail(`${field}.type`, 'is required'), `${field}.type`) };
  if (o.description !== undefined) out.description = str({ max: 500 })(o.description, `${field}.description`);
  if (o.enum !== undefined) {
    if (out.type !== 'string') fail(`${field}.enum`, 'applies only to string parameters');
    out.enum = strings(20, str({ min: 1, max: 100 }))(o.enum, `${field}.enum`);
  }
  if (o.required !== undefined) out.required = bool(o.required, `${field}.required`);
  return out;
}

/** A tool the agent may call that POSTs to the customer's URL (docs/conversations.md, Tools). */
function webhookAction(v: unknown, field: string): unknown {
  if (!v || typeof v !== 'object' || Array.isArray(v)) return fail(field, 'must be an object');
  const o = v as Record<string, unknown>;
  for (const k of Object.keys(o)) if (!['name', 'description', 'url', 'parameters', 'async', 'timeoutSeconds'].includes(k)) fail(`${field}.${k}`, 'is not allowed');
  const name = str({ min: 1, max: 48 })(o.name ?? fail(`${field}.name`, 'is required'), `${field}.name`) as string;
  if (!TOOL_NAME.test(name)) fail(`${field}.name`, 'must start with a letter and hold only letters, digits and _ (at most 48)');
  if (RESERVED_TOOL_NAMES.includes(name)) fail(`${field}.name`, `'${name}' is a built-in tool's name`);
  const url = httpUrl(str({ min: 1, max: 2000 })(o.url ?? fail(`${field}.url`, 'is required'), `${field}.url`) as string, `${field}.url`);
  const params: Record<string, unknown> = {};
  if (o.parameters !== undefined) {
    if (!o.parameters || typeof o.parameters !== 'object' || Array.isArray(o.parameters)) fail(`${field}.parameters`, 'must be an object of named parameters');
    const entries = Object.entries(o.parameters as Record<string, unknown>);
    if (entries.length > 20) fail(`${field}.parameters`, 'may have at most 20 parameters');
    for (const [p, spec] of entries) {
      if (!TOOL_NAME.test(p)) fail(`${field}.parameters.${p}`, 'must be a name of letters, digits and _');
      params[p] = actionParameter(spec, `${field}.parameters.${p}`);
    }
  }
  const isAsync = o.async === undefined ? false : bool(o.async, `${field}.async`);
  return {
    name, url, parameters: params, async: isAsync,
    description: str({ min: 1, max: 1000 })(o.description ?? fail(`${field}.description`, 'is required'), `${field}.description`),
    timeoutSeconds: o.timeoutSeconds === undefined ? (isAsync ? 120 : 10) : int(1, isAsync ? 600 : 30)(o.timeoutSeconds, `${field}.timeoutSeconds`),
  };
}

/**
 * The outcomes every conversation's analysis chooses from (docs/conversations.md, "After the
 * conversation"); an agent adds its own with `analysisOutcomes`.
 */
export const BASE_OUTCOMES: readonly { name: string; description: string }[] = [
  { name: 'resolved', description: 'what the person wanted was done or answered' },
  { name: 'callback-requested', description: 'the person asked to be called or contacted again later' },
  { name: 'transferred', description: 'the conversation was handed to someone else' },
  { name: 'not-interested', description: 'the person declined or said they were not interested' },
  { name: 'voicemail', description: 'an answering machine or voicemail greeting answered, not a person' },
  { name: 'no-answer', description: 'nobody answered, or the person never said anything' },
  { name: 'failed', description: 'the conversation could not reach any result (the agent could not help, trouble on the line)' },
];
/** Outcomes an agent may add, and fields it may have extracted, at most. */
export const MAX_ANALYSIS_OUTCOMES = 20;
export const MAX_ANALYSIS_FIELDS = 10;
const OUTCOME_NAME = /^[a-z][a-z0-9-]{0,39}$/;
const ANALYSIS_FIELD_NAME = /^[A-Za-z][A-Za-z0-9_]{0,39}$/;
export const ANALYSIS_FIELD_TYPES = ['string', 'number', 'boolean', 'enum'] as const;

/** One outcome of the agent's own: a name (a–z, 0–9, -) or {name, description}; never a built-in one. */
function analysisOutcome(v: unknown, field: string): unknown {
  const o: Record<string, unknown> = typeof v === 'string' ? { name: v } : v && typeof v === 'object' && !Array.isArray(v) ? v as Record<string, unknown> : fail(field, 'must be a name or an object with name and description');
  for (const k of Object.keys(o)) if (!['name', 'description'].includes(k)) fail(`${field}.${k}`, 'is not allowed');
  const f = typeof v === 'string' ? field : `${field}.name`;
  const name = str({ min: 1, max: 40 })(o.name ?? fail(f, 'is required'), f) as string;
  if (!OUTCOME_NAME.test(name)) fail(f, 'must start with a letter and hold only a-z, 0-9 and - (at most 40)');
  if (BASE_OUTCOMES.some((b) => b.name === name)) fail(f, `'${name}' is a built-in outcome`);
  return { name, ...(o.description !== undefined ? { description: str({ max: 300 })(o.description, `${field}.description`) } : {}) };
}

/**
 * The fields an agent has the analysis extract (a flat JSON schema of at most MAX_ANALYSIS_FIELDS):
 * `{"appointmentDate": "string", "budget": "number", "plan": {"type": "enum", "values": ["basic", "pro"]}}`,
 * stored as `{name: {type, description?, values?}}`.
 */
function analysisFields(v: unknown, field: string): unknown {
  if (!v || typeof v !== 'object' || Array.isArray(v)) return fail(field, 'must be an object of named fields');
  const entries = Object.entries(v as Record<string, unknown>);
  if (entries.length > MAX_ANALYSIS_FIELDS) fail(field, `may have at most ${MAX_ANALYSIS_FIELDS} fields`);
  const out: Record<string, unknown> = {};
  for (const [name, spec] of entries) {
    const f = `${field}.${name}`;
    if (!ANALYSIS_FIELD_NAME.test(name)) fail(f, 'must be a name of letters, digits and _ starting with a letter (at most 40)');
    const o: Record<string, unknown> = typeof spec === 'string' ? { type: spec } : spec && typeof spec === 'object' && !Array.isArray(spec) ? spec as Record<string, unknown> : fail(f, 'must be a type (string, number, boolean) or an object with type');
    for (const k of Object.keys(o)) if (!['type', 'description', 'values'].includes(k)) fail(`${f}.${k}`, 'is not allowed');
    const tf = typeof spec === 'string' ? f : `${f}.type`;
    const type = str({ max: 10, enum: ANALYSIS_FIELD_TYPES })(o.type ?? fail(tf, 'is required'), tf) as string;
    const field2: Record<string, unknown> = { type };
    if (o.description !== undefined) field2.description = str({ max: 300 })(o.description, `${f}.description`);
    if (type === 'enum') {
      const values = strings(20, str({ min: 1, max: 100 }))(o.values ?? fail(`${f}.values`, 'is required for an enum'), `${f}.values`) as string[];
      if (values.length === 0) fail(`${f}.values`, 'must name at least one value');
      field2.values = [...new Set(values)];
    } else if (o.values !== undefined) {
      fail(`${f}.values`, 'applies only to enum fields');
    }
    out[name] = field2;
  }
  return out;
}

function transferDestination(v: unknown, field: string): unknown {
  if (!v || typeof v !== 'object' || Array.isArray(v)) return fail(field, 'must be an object with name and destination');
  const o = v as Record<string, unknown>;
  for (const k of Object.keys(o)) if (!['name', 'destination'].includes(k)) fail(`${field}.${k}`, 'is not allowed');
  return {
    name: str({ min: 1, max: 100 })(o.name ?? fail(`${field}.name`, 'is required'), `${field}.name`),
    destination: str({ max: 40, test: (d, f) => (DESTINATION.test(d) ? d : fail(f, 'must be an E.164 number (+15551234567) or ext:/pbx: followed by an extension')) })(
      o.destination ?? fail(`${field}.destination`, 'is required'), `${field}.destination`),
  };
}

function unique(names: (x: unknown) => string, what: string, check: Check): Check {
  return (v, field) => {
    const out = check(v, field) as unknown[];
    const seen = new Set<string>();
    for (const x of out) {
      const n = names(x);
      if (seen.has(n)) fail(field, `names ${what} '${n}' twice`);
      seen.add(n);
    }
    return out;
  };
}

export const MAX_KNOWLEDGE_BASES = 20;
const KNOWLEDGE_BASE_ID = /^kb_[0-9A-Za-z]{1,61}$/;

/**
 * Knowledge base ids as the knowledge module issues them (`kb_…`), duplicates removed keeping the
 * first order. Whether each names a knowledge base of the agent's organization needs the database:
 * the agents service checks that on every write that sends the field (docs/agents.md).
 */
function knowledgeBases(v: unknown, field: string): string[] {
  const ids = strings(MAX_KNOWLEDGE_BASES, str({ min: 1, max: 64,
    test: (x, f) => (KNOWLEDGE_BASE_ID.test(x) ? x : fail(f, `must be a knowledge base id (kb_…), not ${JSON.stringify(x)}`)) }))(v, field) as string[];
  return [...new Set(ids)];
}

const S = (description: string, o: object = {}) => Type.String({ description, ...o });
const I = (description: string, minimum: number, maximum: number) => Type.Integer({ description, minimum, maximum });
const B = (description: string) => Type.Boolean({ description });
/** The schema with OpenAPI's `nullable`, typed as its value or null. */
const nullable = <T extends TSchema>(schema: T) => ({ ...schema, nullable: true }) as unknown as TUnsafe<Static<T> | null>;

export const FIELDS = {
  type: { schema: S('Type for this agent', { enum: ['chatAgent'] }), check: str({ max: 20, enum: ['chatAgent'] }) },
  title: { schema: S('Title for the agent', { minLength: 1, maxLength: 200 }), check: str({ min: 1, max: 200 }) },
  description: { schema: S('Some description', { maxLength: 2000 }), check: str({ max: 2000 }) },
  welcomeMessage: { schema: S('What the agent says first on a call', { maxLength: 2000 }), check: str({ max: 2000 }) },
  links: { schema: Type.Array(Type.String({ maxLength: 2000 }), { maxItems: 50, description: 'http(s) links the agent may reference' }),
    check: strings(50, (x, f) => httpUrl(str({ min: 1, max: 2000 })(x, f) as string, f)) },
  actions: { schema: Type.Array(Type.String({ maxLength: 100 }), { maxItems: 50, description: 'Actions the agent can take' }),
    check: strings(50, str({ min: 1, max: 100 })) },
  webhookActions: { schema: Type.Array(Type.Object({
    name: Type.String({ maxLength: 48 }), description: Type.String({ maxLength: 1000 }), url: Type.String({ maxLength: 2000 }),
    parameters: Type.Optional(Type.Record(Type.String(), Type.Object({
      type: Type.String({ enum: [...PARAM_TYPES] }), description: Type.Optional(Type.String()), enum: Type.Optional(Type.Array(Type.String())), required: Type.Optional(Type.Boolean()),
    }))),
    async: Type.Optional(Type.Boolean()), timeoutSeconds: Type.Optional(Type.Integer({ minimum: 1, maximum: 600 })),
  }), { maxItems: 20, description: 'Tools that POST to your URL (extension; docs/conversations.md)' }),
  check: unique((x) => (x as { name: string }).name, 'the action', strings(20, webhookAction)) },
  transferDestinations: { schema: Type.Array(Type.Object({ name: Type.String({ maxLength: 100 }), destination: Type.String({ maxLength: 40 }) }),
    { maxItems: 10, description: 'Where the transfer action may send a call (extension): E.164 numbers or ext:/pbx: extensions' }),
  check: unique((x) => (x as { name: string }).name, 'the destination', strings(10, transferDestination)) },
  timezone: { schema: S('IANA time zone the agent operates in', { maxLength: 64 }), check: str({ min: 1, max: 64, test: timezone }) },
  agentVoice: { schema: S('Voice (GET /api/v2/models/supported)', { enum: [...VOICE_IDS] }), check: str({ max: 64, enum: VOICE_IDS }) },
  agentLang: { schema: S('BCP-47 language tag, or multi', { maxLength: 35 }), check: str({ min: 1, max: 35, test: language }) },
  agentInstructions: { schema: S('Instructions for the agent', { maxLength: 100_000 }), check: str({ max: 100_000 }) },
  agentModel: { schema: S('LLM model: a model id GET /api/v2/models/supported lists for the organization', { maxLength: 200 }), check: str({ min: 1, max: 200 }) },
  agentThinking: { schema: nullable(S('Reasoning budget: low, or null for none', { maxLength: 3 })), nullable: true, check: str({ max: 3, enum: ['low'] }) },
  agentThinkingModel: { schema: S('Model for pauseAndThink reasoning: a model id GET /api/v2/models/supported lists for the organization', { maxLength: 200 }),
    check: str({ min: 1, max: 200 }) },
  postConvoForceThinking: { schema: B('Force a thinking model for post-conversation work'), check: bool },
  agentS2SEngine: { schema: nullable(S('Speech-to-speech engine: openai, gemini, or null', { maxLength: 10 })), nullable: true, check: str({ max: 10, enum: ['openai', 'gemini'] }) },
  agentSttEngine: { schema: S('Speech-to-text engine', { enum: ['google', 'deepgram', 'deepgramflux', 'openai'] }),
    check: str({ max: 20, enum: ['google', 'deepgram', 'deepgramflux', 'openai'] }) },
  agentSttSmartFormatting: { schema: B('Smart formatting of transcriptions'), check: bool },
  postAnswerDtmf: { schema: S('DTMF sent on answer: 0-9 * # A-D, w or , for a pause', { maxLength: 32 }),
    check: str({ max: 32, test: (v, f) => (v === '' || DTMF.test(v) ? v : fail(f, 'may hold only 0-9 * # A-D w ,')) }) },
  waitOnAnswer: { schema: I('Milliseconds before the greeting', 0, 10_000), check: int(0, 10_000) },
  backgroundAudio: { schema: Type.Union([Type.String({ maxLength: 2000 }), Type.Null(), Type.Object({
    url: Type.String({ maxLength: 2000 }), loop: Type.Optional(Type.Boolean()), gain: Type.Optional(Type.Integer({ description: 'dB, -40 to 20' })),
    startAfterGreeting: Type.Optional(Type.Boolean()), track: Type.Optional(Type.String({ enum: ['bg', 'fx'] })),
  })], { description: 'Background audio: an http(s) URL or {url, loop, gain (dB), startAfterGreeting, track}; null for none' }),
  nullable: true, check: backgroundAudio },
  interruptionWordCount: { schema: I('Words a caller speaks before it counts as an interruption', 1, 20), check: int(1, 20) },
  interruptionMinimumSpeakingTime: { schema: I('Seconds the agent speaks before it can be interrupted', 0, 30), check: int(0, 30) },
  speakingTimeout: { schema: I('Milliseconds of silence that end the caller\'s turn', 100, 10_000), check: int(100, 10_000) },
  speechProcessingDelay: { schema: I('Milliseconds before speech goes to the LLM', 0, 5000), check: int(0, 5000) },
  speechProcessingDelayInterruptionStep: { schema: I('Milliseconds of delay added per interruption', 0, 5000), check: int(0, 5000) },
  speechProcessingDelayMaxMultiplier: { schema: I('Interruptions that raise the delay, at most', 0, 10), check: int(0, 10) },
  callerResponseTimeout: { schema: I('Seconds of caller silence before "are you still there?"', 1, 120), check: int(1, 120) },
  callerResponseTimeoutHangupCounter: { schema: I('Times the agent asks before hanging up', 0, 10), check: int(0, 10) },
  noContactInjection: { schema: B('Leave the caller\'s contact card out of the context'), check: bool },
  noConvoHistory: { schema: B('Leave the caller\'s call history out of the context'), check: bool },
  analysisOutcomes: { schema: Type.Array(Type.Union([Type.String({ maxLength: 40 }), Type.Object({ name: Type.String({ maxLength: 40 }), description: Type.Optional(Type.String({ maxLength: 300 })) })]),
    { maxItems: MAX_ANALYSIS_OUTCOMES, description: 'Outcomes of the agent\'s own that the analysis after each conversation may choose, besides the built-in ones (extension; docs/agents.md)' }),
  check: unique((x) => (x as { name: string }).name, 'the outcome', strings(MAX_ANALYSIS_OUTCOMES, analysisOutcome)) },
  analysisFields: { schema: Type.Record(Type.String(), Type.Union([Type.String({ enum: [...ANALYSIS_FIELD_TYPES] }), Type.Object({
    type: Type.String({ enum: [...ANALYSIS_FIELD_TYPES] }), description: Type.Optional(Type.String({ maxLength: 300 })), values: Type.Optional(Type.Array(Type.String({ maxLength: 100 }), { maxItems: 20 })),
  })]), { description: `Fields the analysis after each conversation extracts (at most ${MAX_ANALYSIS_FIELDS}; string, number, boolean or enum; extension; docs/agents.md)` }),
  check: analysisFields },
  postCallAnalysis: {
    schema: Type.Union([Type.Boolean(), Type.Integer({ minimum: 0, maximum: 100 })], {
      description: 'The analysis after each conversation: true (default: every one), false (none), or the share of conversations analysed in percent, 0–100, chosen by the conversation id (extension; docs/agents.md)',
    }),
    check: (v, field) => (typeof v === 'boolean' ? v : typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= 100 ? v : fail(field, 'must be true, false or a whole percentage from 0 to 100')),
  },
  requireVerifiedCallerForTexts: { schema: B('Refuse send_text and queue_follow_up to an inbound caller whose caller ID was not verified (docs/conversations.md)'), check: bool },
  autoRecordingNotification: { schema: S('true, false or always', { enum: ['true', 'false', 'always'] }), check: str({ max: 6, enum: ['true', 'false', 'always'] }) },
  recordingNotificationPhrase: { schema: S('Phrase announcing the recording', { minLength: 1, maxLength: 500 }), check: str({ min: 1, max: 500 }) },
  preAnswerRingTime: { schema: nullable(I('Seconds of ringing before the agent answers', 1, 60)), nullable: true, check: int(1, 60) },
  preAnswerSkipProcessingResults: { schema: B('Pre-answer function results go straight to the context'), check: bool },
  cnamAutoRejectRegex: { schema: nullable(S('Regex on the inbound CNAM that rejects the call', { maxLength: MAX_REGEX_LENGTH })), nullable: true,
    check: str({ min: 1, max: MAX_REGEX_LENGTH, test: regex }) },
  cnamAutoRejectCode: { schema: I('SIP code of such a rejection', 400, 699), check: int(400, 699) },
  cnamAutoTransferRegex: { schema: nullable(S('Regex on the inbound CNAM that transfers the call', { maxLength: MAX_REGEX_LENGTH })), nullable: true,
    check: str({ min: 1, max: MAX_REGEX_LENGTH, test: regex }) },
  cnamAutoTransferDestination: { schema: nullable(S('E.164 number, ext:NNN or pbx:NNN', { maxLength: 40 })), nullable: true,
    check: str({ max: 40, test: (v, f) => (DESTINATION.test(v) ? v : fail(f, 'must be an E.164 number (+15551234567) or ext:/pbx: followed by an extension')) }) },
  confirmTransfers: { schema: B('Callee presses 1 to accept a transfer'), check: bool },
  monitorTransfers: { schema: B('Keep transcribing transferred calls'), check: bool },
  attendedTransfers: { schema: B('Agent stays on the line during transfer attempts'), check: bool },
  attendedTransferBridgeTrigger: { schema: nullable(S('null (Yes), any, or a regex', { maxLength: MAX_REGEX_LENGTH })), nullable: true,
    check: str({ min: 1, max: MAX_REGEX_LENGTH, test: (v, f) => (v === 'any' ? v : regex(v, f)) }) },
  transferConfirmTimeout: { schema: I('Seconds to wait for a transfer\'s confirmation', 5, 120), check: int(5, 120) },
  voicemailAction: { schema: S('What an outbound call does when a voicemail answers: hangup, leave-message or continue (extension; docs/voice.md, Voicemail)', { enum: ['hangup', 'leave-message', 'continue'] }),
    check: str({ max: 20, enum: ['hangup', 'leave-message', 'continue'] }) },
  voicemailMessage: { schema: S('The message left on a voicemail (extension); empty: the welcomeMessage', { maxLength: 1000 }), check: str({ max: 1000 }) },
  apps: { schema: Type.Array(Type.Object({
    appId: Type.String({ maxLength: 100 }), version: Type.String({ maxLength: 20 }), instructions: Type.String({ maxLength: 10_000 }),
  }), { maxItems: 50, description: 'Apps enabled for the agent' }), check: strings(50, app) },
  knowledgeBases: { schema: Type.Array(Type.String({ maxLength: 64, pattern: KNOWLEDGE_BASE_ID.source }), {
    maxItems: MAX_KNOWLEDGE_BASES,
    description: 'Ids of the organization\'s knowledge bases (kb_…) the agent retrieves from; duplicates are dropped',
  }), check: knowledgeBases },
} satisfies Record<string, Field>;

type FieldTable = typeof FIELDS;
/** Every field's value as its schema types it (the `Static` of the field table). */
export type AgentFields = { -readonly [K in keyof FieldTable]: Static<FieldTable[K]['schema']> };
export type AgentField = keyof FieldTable;

/** The fields naming a model: checkConfig checks their form, checkModels that the organization may use them. */
export const MODEL_FIELDS = ['agentModel', 'agentThinkingModel'] as const;

/** 400 naming the first model field whose model is not in `models` (the organization's catalog). */
export function checkModels(config: AgentConfig, models: ReadonlySet<string>, root = ''): void {
  for (const key of MODEL_FIELDS) {
    const v = config[key];
    if (typeof v === 'string' && !models.has(v)) {
      throw new Invalid(`${root}${key} ${JSON.stringify(v)} is not a model this organization can use (GET /api/v2/models/supported lists them)`);
    }
  }
}

/** A new agent's configuration (both slots). */
export function defaultConfig(title: string): AgentConfig {
  return {
    type: 'chatAgent', title: title.slice(0, 200), description: '', welcomeMessage: '', links: [], actions: [], webhookActions: [], transferDestinations: [],
    timezone: 'America/New_York', agentVoice: DEFAULT_VOICE, agentLang: 'en-US', agentInstructions: '',
    agentModel: DEFAULT_MODEL, agentThinking: null, agentThinkingModel: DEFAULT_THINKING_MODEL, postConvoForceThinking: false,
    agentS2SEngine: null, agentSttEngine: 'deepgram', agentSttSmartFormatting: true, postAnswerDtmf: '', waitOnAnswer: 0,
    backgroundAudio: null, interruptionWordCount: 3, interruptionMinimumSpeakingTime: 3, speakingTimeout: 1200,
    speechProcessingDelay: 500, speechProcessingDelayInterruptionStep: 500, speechProcessingDelayMaxMultiplier: 4,
    callerResponseTimeout: 13, callerResponseTimeoutHangupCounter: 3, noContactInjection: false, noConvoHistory: false,
    autoRecordingNotification: 'true', recordingNotificationPhrase: 'This call is being recorded.', preAnswerRingTime: null,
    preAnswerSkipProcessingResults: false, cnamAutoRejectRegex: null, cnamAutoRejectCode: 603, cnamAutoTransferRegex: null,
    cnamAutoTransferDestination: null, confirmTransfers: false, monitorTransfers: false, attendedTransfers: false,
    attendedTransferBridgeTrigger: null, transferConfirmTimeout: 30, apps: [], knowledgeBases: [],
    requireVerifiedCallerForTexts: false, voicemailAction: 'continue', voicemailMessage: '',
  };
}

/** The fields without a default (a new agent's configuration leaves them out): optional in an answer. */
type UnsetFields = 'analysisOutcomes' | 'analysisFields' | 'postCallAnalysis';
const UNSET: readonly UnsetFields[] = ['analysisOutcomes', 'analysisFields', 'postCallAnalysis'];
type FieldSchemas = { [K in Exclude<AgentField, UnsetFields>]: FieldTable[K]['schema'] } & { [K in UnsetFields]: TOptional<FieldTable[K]['schema']> };
const FIELD_SCHEMAS = Object.fromEntries(Object.entries(FIELDS).map(([k, f]) => [k, (UNSET as readonly string[]).includes(k) ? Type.Optional(f.schema) : f.schema])) as FieldSchemas;

/**
 * An agent configuration as the API answers it (a slot, a version's snapshot): every field, typed
 * as the field table types it (a configuration stored before a field existed answers its default;
 * the few without a default may be absent), other keys kept. The generated client types the agent
 * from this.
 */
export const AgentSettingsSchema = Type.Object(FIELD_SCHEMAS, { $id: 'AgentSettings', additionalProperties: true, description: 'The agent configuration (docs/agents.md)' });
/** AgentSettingsSchema by reference (src/app.ts adds it once, so the OpenAPI document and the client name it once). */
export const AgentSettingsRef = Type.Ref('AgentSettings');

/** The OpenAPI body of POST /api/v2/agent: every field optional (a partial update). */
export const AgentBody = Type.Object(
  Object.fromEntries(Object.entries(FIELDS as Record<string, Field>).map(([k, f]) => [k, Type.Optional(f.schema)])),
  { additionalProperties: true, description: 'Fields to change in the staging agent; fields not sent keep their value. Unknown fields are refused.' },
);

/**
 * Checks a partial configuration and returns it normalised; 400 naming the first unknown or
 * invalid field. `root` prefixes field names (`snapshot.` for a stored version).
 */
export function checkConfig(input: unknown, root = ''): AgentConfig {
  if (!input || typeof input !== 'object' || Array.isArray(input)) throw new Invalid(`${root || 'body'} must be an object`);
  const out: AgentConfig = {};
  for (const [key, value] of Object.entries(input as Record<string, unknown>)) {
    const name = `${root}${key}`;
    const field: Field | undefined = Object.hasOwn(FIELDS, key) ? (FIELDS as Record<string, Field>)[key] : undefined;
    if (!field) throw new Invalid(`${name} is not an agent field`);
    if (value === undefined) continue;
    if (value === null) {
      if (!field.nullable) throw new Invalid(`${name} must not be null`);
      out[key] = null;
      continue;
    }
    out[key] = field.check(value, name);
  }
  return out;
}
