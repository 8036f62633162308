// The agent configuration's fields: each one's type, range and meaning for a phone call, declared
// once as a TypeBox schema carrying its limits, in one table that makes both the OpenAPI schema of
// POST /api/v2/agent and the check every write runs (POST /agent, and a snapshot stored by
// POST /agent/{agentId}/versions/{versionId}): each field's schema compiled on its first use
// (src/http/checker.ts), with the string formats of src/http/formats.ts. What a schema cannot say
// is a small step after it: normalising (a time zone's or language tag's spelling, a name's short
// form, defaults) and the rules across a value's parts (names unique in a list, an action's time
// limit that depends on whether it is async). docs/agents.md lists the same ranges.
import { Type, type Static, type TOptional, type TSchema, type TUnsafe } from '@sinclair/typebox';
import type { TypeCheck } from '@sinclair/typebox/compiler';
import { lazyCheck, refusalOf, refusing, StringEnum } from '../../http/checker.ts';
import { Invalid } from '../../http/errors.ts';
import { canonicalLanguageTag, canonicalTimeZone } from '../../http/formats.ts';
import { MAX_RETRY_ATTEMPTS, MAX_RETRY_DELAY_SEC, MAX_RETRY_DELAYS, RETRY_RESULTS, validateCallingWindow, validateRetryRules } from '../limits/calling-window.ts';
import { catalogVoice, DEFAULT_MODEL, DEFAULT_THINKING_MODEL, DEFAULT_VOICE, TTS_ENGINES, VOICE_ID_FORMS, VOICE_IDS, type TtsEngineName } from './catalog.ts';

/**
 * An agent's configuration as the field table below types it: every field optional (a partial
 * update, or a snapshot written before a field existed), and other keys tolerated as `unknown`
 * (the store keeps what older versions wrote). Readers that need a field's default and range
 * resolved go through a reading of it (voice-settings.ts for calls), not through their own checks.
 */
export type AgentConfig = Partial<AgentFields> & Record<string, unknown>;

interface Field {
  schema: TSchema;
  nullable?: boolean;
  /**
   * After the schema accepted the value: the value to store (normalised), or Invalid naming the
   * field for a rule across its parts. Without it, the value is stored as sent.
   */
  after?: (value: any, field: string) => unknown;
}

const fail = (field: string, what: string): never => { throw new Invalid(`${field} ${what}`); };

const S = (description: string, o: object = {}) => Type.String({ description, ...o });
const I = (description: string, minimum: number, maximum: number) => Type.Integer({ description, minimum, maximum });
const B = (description: string) => Type.Boolean({ description });
const E = <const T extends readonly string[]>(description: string, values: T) => StringEnum(values, { description });
/** The schema with OpenAPI's `nullable` (and null among an enum's values), typed as its value or null. */
const nullable = <T extends TSchema>(schema: T) => ({
  ...schema, nullable: true, ...(Array.isArray(schema.enum) ? { enum: [...(schema.enum as unknown[]), null] } : {}),
}) as unknown as TUnsafe<Static<T> | null>;
const HttpUrl = () => Type.String({ minLength: 1, maxLength: 2000, format: 'http-url' });

/** A list whose items' names (`name(item)`) must differ; its `what` is how a message calls one. */
function uniqueNames(what: string, name: (item: any) => string) {
  return (items: unknown[], field: string) => {
    const seen = new Set<string>();
    for (const n of items.map(name)) {
      if (seen.has(n)) fail(field, `names ${what} '${n}' twice`);
      seen.add(n);
    }
    return items;
  };
}

/** Names the built-in tools take (src/modules/conversations/tools.ts); a webhook action may not reuse one. */
const RESERVED_TOOL_NAMES = ['end_conversation', 'transfer_call', 'send_text', 'queue_follow_up', 'search_knowledge'];
const TOOL_NAME = '^[A-Za-z][A-Za-z0-9_]{0,47}$';
const PARAM_TYPES = ['string', 'number', 'integer', 'boolean'] as const;
/** An action's time limit, sync (the model waits) and async, at most and by default. */
const ACTION_TIMEOUT = { sync: { max: 30, default: 10 }, async: { max: 600, default: 120 } };

/** One parameter of a webhook action: a flat, typed value (no nesting: the model fills it, we check it). */
const ActionParameter = refusing(Type.Object({
  type: StringEnum(PARAM_TYPES),
  description: Type.Optional(Type.String({ maxLength: 500 })),
  enum: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 100 }), { maxItems: 20, description: 'For a string parameter: the values it may take' })),
  required: Type.Optional(Type.Boolean()),
}, { additionalProperties: false }), { type: 'must be an object with type' });

/** A tool the agent may call that POSTs to the customer's URL (docs/conversations.md, Tools). */
const WebhookActionSchema = refusing(Type.Object({
  name: refusing(Type.String({ minLength: 1, maxLength: 48, pattern: TOOL_NAME }), { value: 'must start with a letter and hold only letters, digits and _ (at most 48)' }),
  description: Type.String({ minLength: 1, maxLength: 1000 }),
  url: HttpUrl(),
  parameters: Type.Optional(refusing(Type.Record(Type.String({ pattern: TOOL_NAME }), ActionParameter, { maxProperties: 20, additionalProperties: false }), {
    type: 'must be an object of named parameters', value: 'may have at most 20 parameters', key: 'must be a name of letters, digits and _',
  })),
  async: Type.Optional(Type.Boolean()),
  timeoutSeconds: Type.Optional(Type.Integer({ minimum: 1, maximum: ACTION_TIMEOUT.async.max, description: `At most ${ACTION_TIMEOUT.sync.max} for a sync action` })),
}, { additionalProperties: false }), { type: 'must be an object' });
type WebhookActionInput = Static<typeof WebhookActionSchema>;

/** A checked action with its defaults, after the rules across its fields. */
function webhookAction(a: WebhookActionInput, field: string): unknown {
  if (RESERVED_TOOL_NAMES.includes(a.name)) fail(`${field}.name`, `'${a.name}' is a built-in tool's name`);
  for (const [p, spec] of Object.entries(a.parameters ?? {})) {
    if (spec.enum !== undefined && spec.type !== 'string') fail(`${field}.parameters.${p}.enum`, 'applies only to string parameters');
  }
  const isAsync = a.async ?? false;
  const limit = isAsync ? ACTION_TIMEOUT.async : ACTION_TIMEOUT.sync;
  if (a.timeoutSeconds !== undefined && a.timeoutSeconds > limit.max) fail(`${field}.timeoutSeconds`, `must be between 1 and ${limit.max}`);
  return {
    name: a.name, url: a.url, parameters: a.parameters ?? {}, async: isAsync, description: a.description,
    timeoutSeconds: a.timeoutSeconds ?? limit.default,
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
  { name: 'do-not-call', description: 'the person asked not to be called or texted again (take me off your list, remove my number): their number goes on the do-not-call list' },
  { name: 'voicemail', description: 'an answering machine or voicemail greeting answered, not a person' },
  { name: 'no-answer', description: 'nobody answered, or the person never said anything' },
  { name: 'failed', description: 'the conversation could not reach any result (the agent could not help, trouble on the line)' },
];
/** Outcomes an agent may add, and fields it may have extracted, at most. */
export const MAX_ANALYSIS_OUTCOMES = 20;
export const MAX_ANALYSIS_FIELDS = 10;
export const ANALYSIS_FIELD_TYPES = ['string', 'number', 'boolean', 'enum'] as const;

const OutcomeName = refusing(Type.String({ minLength: 1, maxLength: 40, pattern: '^[a-z][a-z0-9-]{0,39}$' }),
  { value: 'must start with a letter and hold only a-z, 0-9 and - (at most 40)' });
/** One outcome of the agent's own: a name (a–z, 0–9, -) or {name, description}. */
const AnalysisOutcome = refusing(Type.Union([OutcomeName, Type.Object({ name: OutcomeName, description: Type.Optional(Type.String({ maxLength: 300 })) }, { additionalProperties: false })]),
  { type: 'must be a name or an object with name and description' });

/** The outcomes as stored ({name, description?}), none a built-in one. */
function analysisOutcomes(items: Static<typeof AnalysisOutcome>[], field: string): unknown[] {
  return items.map((o, i) => {
    const out = typeof o === 'string' ? { name: o } : o;
    if (BASE_OUTCOMES.some((b) => b.name === out.name)) fail(typeof o === 'string' ? `${field}[${i}]` : `${field}[${i}].name`, `'${out.name}' is a built-in outcome`);
    return out;
  });
}

const AnalysisFieldType = StringEnum(ANALYSIS_FIELD_TYPES);
/**
 * The fields an agent has the analysis extract (a flat JSON schema of at most MAX_ANALYSIS_FIELDS):
 * `{"appointmentDate": "string", "budget": "number", "plan": {"type": "enum", "values": ["basic", "pro"]}}`,
 * stored as `{name: {type, description?, values?}}`.
 */
const AnalysisFields = refusing(Type.Record(Type.String({ pattern: '^[A-Za-z][A-Za-z0-9_]{0,39}$' }), refusing(Type.Union([AnalysisFieldType, Type.Object({
  type: AnalysisFieldType, description: Type.Optional(Type.String({ maxLength: 300 })),
  values: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 100 }), { minItems: 1, maxItems: 20 })),
}, { additionalProperties: false })]), { type: 'must be a type (string, number, boolean) or an object with type' }), {
  maxProperties: MAX_ANALYSIS_FIELDS,
  description: `Fields the analysis after each conversation extracts (at most ${MAX_ANALYSIS_FIELDS}; string, number, boolean or enum; extension; docs/agents.md)`,
  additionalProperties: false,
}), {
  type: 'must be an object of named fields', value: `may have at most ${MAX_ANALYSIS_FIELDS} fields`,
  key: 'must be a name of letters, digits and _ starting with a letter (at most 40)',
});

/** Each field as stored ({type, description?, values?}): values only for an enum, and required there, without duplicates. */
function analysisFields(fields: Static<typeof AnalysisFields>, field: string): unknown {
  return Object.fromEntries(Object.entries(fields).map(([name, spec]) => {
    const f = typeof spec === 'string' ? { type: spec } : spec;
    if (f.type === 'enum' && f.values === undefined) fail(`${field}.${name}.values`, 'is required for an enum');
    if (f.type !== 'enum' && f.values !== undefined) fail(`${field}.${name}.values`, 'applies only to enum fields');
    return [name, { ...f, ...(f.values ? { values: [...new Set(f.values)] } : {}) }];
  }));
}

export const MAX_KNOWLEDGE_BASES = 20;

/** The regular expressions a call is matched with: they compile and cannot backtrack catastrophically. */
export const MAX_REGEX_LENGTH = 500;
const Regex = (description: string) => nullable(S(description, { minLength: 1, maxLength: MAX_REGEX_LENGTH, format: 'safe-regex' }));
const Destination = { maxLength: 40, format: 'transfer-destination' };

/** A catalog voice (`en-US Female`) or an engine's voice id (letters, digits, - _ . + and the catalog's space). */
const VOICE_PATTERN = '^[A-Za-z0-9][A-Za-z0-9 _.+-]{0,99}$';

/** HH:MM from 00:00 to 23:59, or 24:00 (the end of a day). */
const CLOCK = '^(([01][0-9]|2[0-3]):[0-5][0-9]|24:00)$';
/** A campaign rule's own check (src/modules/limits/calling-window.ts) as the field table throws it. */
const checked = <T>(c: { ok: true; value: T } | { ok: false; message: string }): T => {
  if (!c.ok) throw new Invalid(c.message);
  return c.value;
};

const POST_CALL_ANALYSIS = 'must be true, false or a whole percentage from 0 to 100';

export const FIELDS = {
  type: { schema: E('Type for this agent', ['chatAgent']) },
  title: { schema: S('Title for the agent', { minLength: 1, maxLength: 200 }) },
  description: { schema: S('Some description', { maxLength: 2000 }) },
  welcomeMessage: { schema: S('What the agent says first on a call', { maxLength: 2000 }) },
  links: { schema: Type.Array(HttpUrl(), { maxItems: 50, description: 'http(s) links the agent may reference' }) },
  actions: { schema: Type.Array(Type.String({ minLength: 1, maxLength: 100 }), { maxItems: 50, description: 'Actions the agent can take' }) },
  webhookActions: { schema: Type.Array(WebhookActionSchema, { maxItems: 20, description: 'Tools that POST to your URL (extension; docs/conversations.md)' }),
    after: (v: WebhookActionInput[], f: string) => uniqueNames('the action', (a: WebhookActionInput) => a.name)(v.map((a, i) => webhookAction(a, `${f}[${i}]`)), f) },
  transferDestinations: { schema: Type.Array(refusing(Type.Object({ name: Type.String({ minLength: 1, maxLength: 100 }), destination: Type.String(Destination) }, { additionalProperties: false }),
    { type: 'must be an object with name and destination' }),
  { maxItems: 10, description: 'Where the transfer action may send a call (extension): E.164 numbers or ext:/pbx: extensions' }),
  after: uniqueNames('the destination', (d: { name: string }) => d.name) },
  timezone: { schema: S('IANA time zone the agent operates in', { minLength: 1, maxLength: 64, format: 'iana-timezone' }), after: canonicalTimeZone },
  agentVoice: { schema: refusing(S(`Voice: a catalog voice (${VOICE_IDS.join(', ')}; GET /api/v2/models/supported), or, with agentTtsEngine, that engine's own voice id (GET /api/v2/voices)`,
    { minLength: 1, maxLength: 100, pattern: VOICE_PATTERN }), { value: `must be a catalog voice (${VOICE_IDS.join(', ')}) or an engine's voice id` }) },
  agentTtsEngine: { schema: nullable(E('Text-to-speech engine (extension): espeak, openai, elevenlabs, cartesia or deepgram; null: the process\'s configured voice (docs/voice.md)', TTS_ENGINES)), nullable: true },
  agentLang: { schema: S('BCP-47 language tag, or multi', { minLength: 1, maxLength: 35, format: 'bcp47-or-multi' }), after: canonicalLanguageTag },
  agentInstructions: { schema: S('Instructions for the agent', { maxLength: 100_000 }) },
  agentModel: { schema: S('LLM model: a model id GET /api/v2/models/supported lists for the organization', { minLength: 1, maxLength: 200 }) },
  agentThinking: { schema: nullable(E('Reasoning budget: low, or null for none', ['low'])), nullable: true },
  agentThinkingModel: { schema: S('Model for pauseAndThink reasoning: a model id GET /api/v2/models/supported lists for the organization', { minLength: 1, maxLength: 200 }) },
  postConvoForceThinking: { schema: B('Force a thinking model for post-conversation work') },
  agentS2SEngine: { schema: nullable(E('Speech-to-speech engine: openai, gemini, or null', ['openai', 'gemini'])), nullable: true },
  agentSttEngine: { schema: E('Speech-to-text engine', ['google', 'deepgram', 'deepgramflux', 'openai']) },
  agentSttSmartFormatting: { schema: B('Smart formatting of transcriptions') },
  postAnswerDtmf: { schema: S('DTMF sent on answer: 0-9 * # A-D, w or , for a pause', { maxLength: 32, format: 'dtmf' }) },
  waitOnAnswer: { schema: I('Milliseconds before the greeting', 0, 10_000) },
  backgroundAudio: { schema: refusing(Type.Union([HttpUrl(), Type.Null(), Type.Object({
    url: HttpUrl(), loop: Type.Optional(Type.Boolean()), gain: Type.Optional(Type.Integer({ minimum: -40, maximum: 20, description: 'dB' })),
    startAfterGreeting: Type.Optional(Type.Boolean()), track: Type.Optional(StringEnum(['bg', 'fx'])),
  }, { additionalProperties: false })], { description: 'Background audio: an http(s) URL or {url, loop, gain (dB), startAfterGreeting, track}; null for none' }),
  { type: 'must be a URL or an object with url' }), nullable: true },
  interruptionWordCount: { schema: I('Words a caller speaks before it counts as an interruption', 1, 20) },
  interruptionMinimumSpeakingTime: { schema: I('Seconds the agent speaks before it can be interrupted', 0, 30) },
  speakingTimeout: { schema: I('Milliseconds of silence that end the caller\'s turn', 100, 10_000) },
  speechProcessingDelay: { schema: I('Milliseconds before speech goes to the LLM', 0, 5000) },
  speechProcessingDelayInterruptionStep: { schema: I('Milliseconds of delay added per interruption', 0, 5000) },
  speechProcessingDelayMaxMultiplier: { schema: I('Interruptions that raise the delay, at most', 0, 10) },
  callerResponseTimeout: { schema: I('Seconds of caller silence before "are you still there?"', 1, 120) },
  callerResponseTimeoutHangupCounter: { schema: I('Times the agent asks before hanging up', 0, 10) },
  noContactInjection: { schema: B('Leave the caller\'s contact card out of the context') },
  noConvoHistory: { schema: B('Leave the caller\'s call history out of the context') },
  analysisOutcomes: { schema: Type.Array(AnalysisOutcome, { maxItems: MAX_ANALYSIS_OUTCOMES,
    description: 'Outcomes of the agent\'s own that the analysis after each conversation may choose, besides the built-in ones (extension; docs/agents.md)' }),
  after: (v: Static<typeof AnalysisOutcome>[], f: string) => uniqueNames('the outcome', (o: { name: string }) => o.name)(analysisOutcomes(v, f), f) },
  analysisFields: { schema: AnalysisFields, after: analysisFields },
  postCallAnalysis: {
    schema: refusing(Type.Union([Type.Boolean(), refusing(Type.Integer({ minimum: 0, maximum: 100 }), { value: POST_CALL_ANALYSIS })], {
      description: 'The analysis after each conversation: true (default: every one), false (none), or the share of conversations analysed in percent, 0–100, chosen by the conversation id (extension; docs/agents.md)',
    }), { type: POST_CALL_ANALYSIS }),
  },
  testGate: { schema: B('POST /api/v2/agent/publish refuses (409) unless the latest test run of each of the agent\'s test suites on this staging configuration passed (extension; docs/testing-agents.md)') },
  requireVerifiedCallerForTexts: { schema: B('Refuse send_text and queue_follow_up to an inbound caller whose caller ID was not verified (docs/conversations.md)') },
  aiDisclosure: { schema: S('What the agent says first on every call and writes first in a text thread, before anything else: that the person is talking with an AI (extension; docs/campaigns.md); empty: none', { maxLength: 500 }) },
  recordingConsent: { schema: E('Recording consent on calls (extension; docs/campaigns.md): off; announce (recordingNotificationPhrase said at the start of every recorded call, whatever autoRecordingNotification says); ask (recordingConsentQuestion asked after the greeting: a "no" stops and discards the call\'s recording, recorded on the conversation)', ['off', 'announce', 'ask']) },
  recordingConsentQuestion: { schema: S('The question asked when recordingConsent is ask (extension)', { minLength: 1, maxLength: 500 }) },
  autoRecordingNotification: { schema: E('true, false or always', ['true', 'false', 'always']) },
  recordingNotificationPhrase: { schema: S('Phrase announcing the recording', { minLength: 1, maxLength: 500 }) },
  preAnswerRingTime: { schema: nullable(I('Seconds of ringing before the agent answers', 1, 60)), nullable: true },
  preAnswerSkipProcessingResults: { schema: B('Pre-answer function results go straight to the context') },
  cnamAutoRejectRegex: { schema: Regex('Regex on the inbound CNAM that rejects the call'), nullable: true },
  cnamAutoRejectCode: { schema: I('SIP code of such a rejection', 400, 699) },
  cnamAutoTransferRegex: { schema: Regex('Regex on the inbound CNAM that transfers the call'), nullable: true },
  cnamAutoTransferDestination: { schema: nullable(S('E.164 number, ext:NNN or pbx:NNN', Destination)), nullable: true },
  confirmTransfers: { schema: B('Callee presses 1 to accept a transfer') },
  monitorTransfers: { schema: B('Keep transcribing transferred calls') },
  attendedTransfers: { schema: B('Agent stays on the line during transfer attempts') },
  attendedTransferBridgeTrigger: { schema: Regex('null (Yes), any, or a regex'), nullable: true },
  transferConfirmTimeout: { schema: I('Seconds to wait for a transfer\'s confirmation', 5, 120) },
  voicemailAction: { schema: E('What an outbound call does when a voicemail answers: hangup, leave-message or continue (extension; docs/voice.md, Voicemail)', ['hangup', 'leave-message', 'continue']) },
  voicemailMessage: { schema: S('The message left on a voicemail (extension); empty: the welcomeMessage', { maxLength: 1000 }) },
  callingWindow: {
    schema: nullable(refusing(Type.Object({
      days: Type.Array(Type.Integer({ minimum: 0, maximum: 6 }), { minItems: 1, maxItems: 7, description: '0 = Sunday … 6 = Saturday' }),
      start: Type.String({ pattern: CLOCK, description: 'HH:MM' }),
      end: Type.String({ pattern: CLOCK, description: 'HH:MM, after start; 24:00 is the end of the day' }),
      timezone: Type.Optional(Type.String({ minLength: 1, maxLength: 64, format: 'iana-timezone', description: 'Read in this zone instead of the recipient\'s' })),
    }, { additionalProperties: false, description: 'When this agent\'s calls and texts may go out, in the recipient\'s local time (extension; docs/campaigns.md); null: the organization\'s callingWindow' }),
    { type: 'must be an object {days, start, end, timezone}' })),
    nullable: true,
    after: (v: unknown, f: string) => checked(validateCallingWindow(v, f)),
  },
  retryRules: {
    schema: nullable(refusing(Type.Object({
      on: Type.Array(StringEnum(RETRY_RESULTS), { maxItems: RETRY_RESULTS.length, description: 'Results that try again' }),
      delaysSec: Type.Array(Type.Integer({ minimum: 0, maximum: MAX_RETRY_DELAY_SEC }), { minItems: 1, maxItems: MAX_RETRY_DELAYS, description: 'Seconds before retry n: delaysSec[n − 1], the last repeating' }),
      maxAttempts: Type.Integer({ minimum: 1, maximum: MAX_RETRY_ATTEMPTS, description: 'Attempts in all, the first included' }),
    }, { additionalProperties: false, description: 'Which call results try again, after what delays, up to how many attempts, always within the calling window (extension; docs/campaigns.md); null: the organization\'s retries' }),
    { type: 'must be an object {on, delaysSec, maxAttempts}' })),
    nullable: true,
    after: (v: unknown, f: string) => checked(validateRetryRules(v, f)),
  },
  callerIdStrategy: { schema: E('The number a call goes out from: agent (the agent\'s own number, else the provider\'s) or nearest (the organization\'s number nearest the recipient: same area code, else time zone, else country; extension; docs/campaigns.md)', ['agent', 'nearest']) },
  apps: { schema: Type.Array(refusing(Type.Object({
    appId: Type.String({ minLength: 1, maxLength: 100 }), version: Type.String({ minLength: 1, maxLength: 20 }), instructions: Type.String({ maxLength: 10_000 }),
  }, { additionalProperties: false }), { type: 'must be an object' }), { maxItems: 50, description: 'Apps enabled for the agent' }) },
  knowledgeBases: {
    schema: Type.Array(refusing(Type.String({ minLength: 1, maxLength: 64, pattern: '^kb_[0-9A-Za-z]{1,61}$' }), { value: (v) => `must be a knowledge base id (kb_…), not ${JSON.stringify(v)}` }), {
      maxItems: MAX_KNOWLEDGE_BASES,
      description: 'Ids of the organization\'s knowledge bases (kb_…) the agent retrieves from; duplicates are dropped',
    }),
    // Whether each names a knowledge base of the agent's organization needs the database: the
    // agents service checks that on every write that sends the field (docs/agents.md).
    after: (ids: string[]) => [...new Set(ids)],
  },
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

/**
 * The rule across agentVoice and agentTtsEngine, on a whole configuration (what a write leaves
 * stored): a catalog voice goes with any engine (each has a default voice per language and
 * gender); any other voice is an engine's own voice id, so agentTtsEngine must name that engine
 * and the id must have its form. 400 naming agentVoice (under `root`).
 */
export function checkVoiceChoice(config: AgentConfig, root = ''): void {
  const voice = config.agentVoice;
  if (typeof voice !== 'string' || catalogVoice(voice)) return;
  const engine = config.agentTtsEngine as TtsEngineName | null | undefined;
  if (!engine) {
    throw new Invalid(`${root}agentVoice '${voice}' is not a catalog voice (${VOICE_IDS.join(', ')}); an engine's own voice id needs agentTtsEngine naming the engine`);
  }
  const form = VOICE_ID_FORMS[engine];
  if (!form.pattern.test(voice)) throw new Invalid(`${root}agentVoice '${voice}' is not a ${engine} voice id (such as ${form.example}), which agentTtsEngine ${engine} needs`);
}

/** What recordingConsent `ask` asks by default. */
export const DEFAULT_CONSENT_QUESTION = 'This call may be recorded. Is that all right with you?';

/** A new agent's configuration (both slots). */
export function defaultConfig(title: string): AgentConfig {
  return {
    type: 'chatAgent', title: title.slice(0, 200), description: '', welcomeMessage: '', links: [], actions: [], webhookActions: [], transferDestinations: [],
    timezone: 'America/New_York', agentVoice: DEFAULT_VOICE, agentTtsEngine: null, agentLang: 'en-US', agentInstructions: '',
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
    aiDisclosure: '', recordingConsent: 'off', recordingConsentQuestion: DEFAULT_CONSENT_QUESTION,
    callingWindow: null, retryRules: null, callerIdStrategy: 'agent',
  };
}

/** The fields without a default (a new agent's configuration leaves them out): optional in an answer. */
type UnsetFields = 'analysisOutcomes' | 'analysisFields' | 'postCallAnalysis' | 'testGate';
const UNSET: readonly UnsetFields[] = ['analysisOutcomes', 'analysisFields', 'postCallAnalysis', 'testGate'];
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

/** Each field's check, compiled the first time a value of the field is checked. */
const CHECKS = Object.fromEntries(Object.entries(FIELDS).map(([k, f]) => [k, lazyCheck(f.schema)])) as Record<AgentField, () => TypeCheck<TSchema>>;

/**
 * A value (not null) of one field, checked and normalised; Invalid naming `name` (the field, or
 * its part) when refused.
 */
export function checkField(key: AgentField, value: unknown, name: string = key): unknown {
  const refusal = refusalOf(CHECKS[key](), value, name);
  if (refusal !== undefined) throw new Invalid(refusal);
  const { after } = FIELDS[key] as Field;
  return after ? after(value, name) : value;
}

/**
 * Checks a partial configuration and returns it normalised; 400 naming the first unknown or
 * invalid field. `root` prefixes field names (`snapshot.` for a stored version).
 */
export function checkConfig(input: unknown, root = ''): AgentConfig {
  if (!input || typeof input !== 'object' || Array.isArray(input)) throw new Invalid(`${root || 'body'} must be an object`);
  const out: AgentConfig = {};
  for (const [key, value] of Object.entries(input as Record<string, unknown>)) {
    const name = `${root}${key}`;
    if (!Object.hasOwn(FIELDS, key)) throw new Invalid(`${name} is not an agent field`);
    if (value === undefined) continue;
    if (value === null) {
      if (!(FIELDS as Record<string, Field>)[key]!.nullable) throw new Invalid(`${name} must not be null`);
      out[key] = null;
      continue;
    }
    out[key] = checkField(key as AgentField, value, name);
  }
  return out;
}
