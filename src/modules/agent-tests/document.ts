// An agent test suite as a document (docs/testing-agents.md, "The suite document"): its settings
// and scenarios, each with the simulated caller's persona, the task's context and variables, a
// turn limit, tool mocks and checks. What a customer keeps in a repository as YAML or JSON is
// this document; the API takes and answers the same. `checkSuite` checks a parsed document by
// hand so every refusal names the path of the field inside it (`scenarios[2].checks[0].said`);
// parsing the text (YAML or JSON, whose cost grows with what is sent) runs in a worker thread with
// heap and time limits (document-worker.ts, src/lib/worker-task.ts).
import safeRegex from 'safe-regex2';
import { stringify } from 'yaml';
import { Invalid, HttpError } from '../../http/errors.ts';
import { runWorkerTask, WorkerLimitError, WorkerTaskError, workerEntry } from '../../lib/worker-task.ts';

export const LIMITS = Object.freeze({
  nameChars: 200,
  descriptionChars: 2000,
  scenarios: 100,
  checks: 30,
  mocks: 30,
  personaChars: 4000,
  openingChars: 1000,
  contextChars: 4000,
  variables: 50,
  variableChars: 1000,
  patternChars: 200,
  criterionChars: 1000,
  maxTurns: 30,
  iterations: 20,
  concurrency: 8,
  /** The text of an imported suite (YAML or JSON), in bytes. */
  documentBytes: 512 * 1024,
  /** The JSON of one mock's argument match or result. */
  mockJsonChars: 4000,
});
export const DEFAULT_MAX_TURNS = 8;

export type Json = string | number | boolean | null | Json[] | { [k: string]: Json };

export interface Persona {
  /** Who the caller is, what they want, how they talk. */
  instructions: string;
  /** BCP-47 tag the caller speaks (default: the agent's agentLang). */
  language?: string;
  /** Voice mode's voice for the caller (stored now; text mode does not use it). */
  voice?: string;
  /** The caller's first line, said as written; without it the caller's model writes it. */
  opening?: string;
}

export interface ToolMock {
  tool: string;
  /** A subset of the call's arguments that must match (deep equality of each given key); none: any call. */
  args?: Record<string, Json>;
  /** What the tool answers the agent (text, or JSON sent as its text). */
  result: Json;
}

export type Check =
  | { toolCalled: { name: string; args?: Record<string, Json>; not?: boolean } }
  | { said: string }
  | { neverSaid: string }
  | { outcome: string }
  | { analysis: { field: string; equals: Json } }
  | { endedCall: boolean }
  | { maxTurns: number }
  | { turnLatencyMs: number }
  | { judge: string };

export const CHECK_KINDS = ['toolCalled', 'said', 'neverSaid', 'outcome', 'analysis', 'endedCall', 'maxTurns', 'turnLatencyMs', 'judge'] as const;
export type CheckKind = typeof CHECK_KINDS[number];

export interface Scenario {
  name: string;
  persona: Persona;
  /** The task's context, as a real task carries it (what the conversation is about). */
  context?: string;
  /** The task's variables, as a real task carries them. */
  variables?: Record<string, string | number | boolean>;
  /** The caller's number as the agent sees it (default +15550100000), so texting tools are offered as on a call. */
  callerNumber?: string;
  /** Agent turns at most before the conversation is cut off (default DEFAULT_MAX_TURNS). */
  maxTurns?: number;
  toolMocks?: ToolMock[];
  checks: Check[];
}

export interface SuiteSettings {
  /** The model playing the caller (one the organization's providers serve); default the agent's agentModel. */
  callerModel?: string;
  /** The model judging `judge` checks; default the agent's agentModel. */
  judgeModel?: string;
  /** Runs of each scenario (default 1). */
  iterations?: number;
  /** Scenario conversations of a run at once (default 4). */
  concurrency?: number;
}

export interface SuiteDocument {
  name: string;
  description?: string;
  settings?: SuiteSettings;
  scenarios: Scenario[];
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const fail = (path: string, what: string): never => { throw new Invalid(`${path} ${what}`); };

function text(v: unknown, path: string, max: number, opts: { optional?: boolean; min?: number } = {}): string | undefined {
  if (v === undefined && opts.optional) return undefined;
  if (typeof v !== 'string') return fail(path, 'must be a string');
  const t = v.trim();
  if (t.length < (opts.min ?? 1)) fail(path, 'must not be empty');
  if ([...t].length > max) fail(path, `must be at most ${max} characters long`);
  return t;
}

function integer(v: unknown, path: string, min: number, max: number): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) fail(path, `must be an integer from ${min} to ${max}`);
  return v as number;
}

function onlyKeys(o: Record<string, unknown>, path: string, keys: readonly string[]): void {
  for (const k of Object.keys(o)) if (!keys.includes(k)) fail(path ? `${path}.${k}` : k, `is not a field of ${path || 'the suite'} (fields: ${keys.join(', ')})`);
}

function json(v: unknown, path: string): Json {
  let s: string | undefined;
  try {
    s = JSON.stringify(v);
  } catch {
    return fail(path, 'must be JSON');
  }
  if (s === undefined) return fail(path, 'must be JSON');
  if (s.length > LIMITS.mockJsonChars) fail(path, `must be at most ${LIMITS.mockJsonChars} characters as JSON`);
  return JSON.parse(s) as Json;
}

/** A said/neverSaid pattern: a regular expression (case-insensitive) that compiles and cannot backtrack catastrophically. */
export function compilePattern(pattern: string, path = 'pattern'): RegExp {
  if (pattern.length > LIMITS.patternChars) fail(path, `must be at most ${LIMITS.patternChars} characters long`);
  let re: RegExp;
  try {
    re = new RegExp(pattern, 'iu');
  } catch (err) {
    return fail(path, `is not a valid regular expression: ${(err as Error).message}`);
  }
  if (!safeRegex(re)) fail(path, 'could backtrack catastrophically (nested or overlapping repetition); simplify it');
  return re;
}

function checkCheck(v: unknown, path: string): Check {
  if (!isObject(v)) return fail(path, `must be an object with one of: ${CHECK_KINDS.join(', ')}`);
  const keys = Object.keys(v);
  if (keys.length !== 1 || !(CHECK_KINDS as readonly string[]).includes(keys[0]!)) {
    fail(path, `must have exactly one of: ${CHECK_KINDS.join(', ')}`);
  }
  const kind = keys[0] as CheckKind;
  const value = v[kind];
  const p = `${path}.${kind}`;
  switch (kind) {
    case 'toolCalled': {
      const o = typeof value === 'string' ? { name: value } : value;
      if (!isObject(o)) return fail(p, 'must be a tool name or {name, args?, not?}');
      onlyKeys(o, p, ['name', 'args', 'not']);
      const name = text(o.name, `${p}.name`, 64)!;
      if (o.args !== undefined && !isObject(o.args)) fail(`${p}.args`, 'must be an object (a subset of the call\'s arguments)');
      if (o.not !== undefined && typeof o.not !== 'boolean') fail(`${p}.not`, 'must be true or false');
      return { toolCalled: { name, ...(o.args !== undefined ? { args: json(o.args, `${p}.args`) as Record<string, Json> } : {}), ...(o.not ? { not: true } : {}) } };
    }
    case 'said':
    case 'neverSaid': {
      const pattern = text(value, p, LIMITS.patternChars)!;
      compilePattern(pattern, p);
      return kind === 'said' ? { said: pattern } : { neverSaid: pattern };
    }
    case 'outcome':
      return { outcome: text(value, p, 100)! };
    case 'analysis': {
      if (!isObject(value)) return fail(p, 'must be {field, equals}');
      onlyKeys(value, p, ['field', 'equals']);
      if (!('equals' in value)) fail(`${p}.equals`, 'is required');
      return { analysis: { field: text(value.field, `${p}.field`, 100)!, equals: json(value.equals, `${p}.equals`) } };
    }
    case 'endedCall':
      if (typeof value !== 'boolean') fail(p, 'must be true or false');
      return { endedCall: value as boolean };
    case 'maxTurns':
      return { maxTurns: integer(value, p, 1, LIMITS.maxTurns) };
    case 'turnLatencyMs':
      return { turnLatencyMs: integer(value, p, 1, 60_000) };
    case 'judge':
      return { judge: text(value, p, LIMITS.criterionChars)! };
  }
}

function checkScenario(v: unknown, path: string): Scenario {
  if (!isObject(v)) return fail(path, 'must be an object');
  onlyKeys(v, path, ['name', 'persona', 'context', 'variables', 'callerNumber', 'maxTurns', 'toolMocks', 'checks']);
  const name = text(v.name, `${path}.name`, LIMITS.nameChars)!;
  const p = v.persona;
  if (!isObject(p)) return fail(`${path}.persona`, 'must be an object with instructions');
  onlyKeys(p, `${path}.persona`, ['instructions', 'language', 'voice', 'opening']);
  const persona: Persona = { instructions: text(p.instructions, `${path}.persona.instructions`, LIMITS.personaChars)! };
  const language = text(p.language, `${path}.persona.language`, 35, { optional: true });
  if (language !== undefined) {
    if (!/^[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8})*$/.test(language)) fail(`${path}.persona.language`, 'must be a BCP-47 language tag such as en-US');
    persona.language = language;
  }
  const voice = text(p.voice, `${path}.persona.voice`, 100, { optional: true });
  if (voice !== undefined) persona.voice = voice;
  const opening = text(p.opening, `${path}.persona.opening`, LIMITS.openingChars, { optional: true });
  if (opening !== undefined) persona.opening = opening;
  const out: Scenario = { name, persona, checks: [] };
  const context = text(v.context, `${path}.context`, LIMITS.contextChars, { optional: true });
  if (context !== undefined) out.context = context;
  if (v.variables !== undefined) {
    if (!isObject(v.variables)) fail(`${path}.variables`, 'must be an object of names and values');
    const entries = Object.entries(v.variables as Record<string, unknown>);
    if (entries.length > LIMITS.variables) fail(`${path}.variables`, `must have at most ${LIMITS.variables} entries`);
    out.variables = {};
    for (const [k, x] of entries) {
      if (!/^[A-Za-z_][A-Za-z0-9_]{0,63}$/.test(k)) fail(`${path}.variables.${k}`, 'is not a variable name (letters, digits and _)');
      if (typeof x === 'string') out.variables[k] = text(x, `${path}.variables.${k}`, LIMITS.variableChars, { min: 0 })!;
      else if (typeof x === 'number' || typeof x === 'boolean') out.variables[k] = x;
      else fail(`${path}.variables.${k}`, 'must be a string, number or boolean');
    }
  }
  if (v.callerNumber !== undefined) {
    if (typeof v.callerNumber !== 'string' || !/^\+[1-9]\d{6,14}$/.test(v.callerNumber)) fail(`${path}.callerNumber`, 'must be an E.164 number such as +15550100000');
    out.callerNumber = v.callerNumber as string;
  }
  if (v.maxTurns !== undefined) out.maxTurns = integer(v.maxTurns, `${path}.maxTurns`, 1, LIMITS.maxTurns);
  if (v.toolMocks !== undefined) {
    if (!Array.isArray(v.toolMocks)) fail(`${path}.toolMocks`, 'must be a list');
    const mocks = v.toolMocks as unknown[];
    if (mocks.length > LIMITS.mocks) fail(`${path}.toolMocks`, `must have at most ${LIMITS.mocks} mocks`);
    out.toolMocks = mocks.map((m, i) => {
      const mp = `${path}.toolMocks[${i}]`;
      if (!isObject(m)) return fail(mp, 'must be {tool, args?, result}');
      onlyKeys(m, mp, ['tool', 'args', 'result']);
      const tool = text(m.tool, `${mp}.tool`, 64)!;
      if (m.args !== undefined && !isObject(m.args)) fail(`${mp}.args`, 'must be an object (a subset of the call\'s arguments)');
      if (!('result' in m)) fail(`${mp}.result`, 'is required (what the tool answers the agent)');
      return { tool, ...(m.args !== undefined ? { args: json(m.args, `${mp}.args`) as Record<string, Json> } : {}), result: json(m.result, `${mp}.result`) };
    });
  }
  if (!Array.isArray(v.checks)) return fail(`${path}.checks`, 'must be a list');
  if (v.checks.length > LIMITS.checks) fail(`${path}.checks`, `must have at most ${LIMITS.checks} checks`);
  out.checks = v.checks.map((c, i) => checkCheck(c, `${path}.checks[${i}]`));
  return out;
}

/** The suite document checked and normalised (trimmed text, defaults left unset); 400 naming the path of the first bad field. */
export function checkSuite(v: unknown): SuiteDocument {
  if (!isObject(v)) return fail('suite', 'must be an object with name and scenarios');
  onlyKeys(v, '', ['name', 'description', 'settings', 'scenarios']);
  const out: SuiteDocument = { name: text(v.name, 'name', LIMITS.nameChars)!, scenarios: [] };
  const description = text(v.description, 'description', LIMITS.descriptionChars, { optional: true, min: 0 });
  if (description) out.description = description;
  if (v.settings !== undefined) {
    const s = v.settings;
    if (!isObject(s)) return fail('settings', 'must be an object');
    onlyKeys(s, 'settings', ['callerModel', 'judgeModel', 'iterations', 'concurrency']);
    const settings: SuiteSettings = {};
    const callerModel = text(s.callerModel, 'settings.callerModel', 200, { optional: true });
    if (callerModel) settings.callerModel = callerModel;
    const judgeModel = text(s.judgeModel, 'settings.judgeModel', 200, { optional: true });
    if (judgeModel) settings.judgeModel = judgeModel;
    if (s.iterations !== undefined) settings.iterations = integer(s.iterations, 'settings.iterations', 1, LIMITS.iterations);
    if (s.concurrency !== undefined) settings.concurrency = integer(s.concurrency, 'settings.concurrency', 1, LIMITS.concurrency);
    if (Object.keys(settings).length > 0) out.settings = settings;
  }
  if (!Array.isArray(v.scenarios)) return fail('scenarios', 'must be a list');
  if (v.scenarios.length > LIMITS.scenarios) fail('scenarios', `must have at most ${LIMITS.scenarios} scenarios`);
  const names = new Set<string>();
  out.scenarios = v.scenarios.map((s, i) => {
    const scenario = checkScenario(s, `scenarios[${i}]`);
    if (names.has(scenario.name)) fail(`scenarios[${i}].name`, `repeats the scenario name '${scenario.name}' (names must differ within a suite)`);
    names.add(scenario.name);
    return scenario;
  });
  return out;
}

export type DocumentFormat = 'yaml' | 'json';

/** What document-worker.ts is given. */
export interface ParseTask { text: string; format: DocumentFormat }

const PARSE_WORKER = workerEntry(import.meta.url, './document-worker');
const PARSE_HEAP_MB = 64;
const PARSE_TIMEOUT_MS = 5000;

/** A suite's text (YAML or JSON) parsed in a worker thread, then checked; 400 naming what is wrong. */
export async function parseSuite(textBody: string, format: DocumentFormat): Promise<SuiteDocument> {
  if (Buffer.byteLength(textBody, 'utf8') > LIMITS.documentBytes) throw new Invalid(`document must be at most ${LIMITS.documentBytes / 1024} KB`);
  let parsed: unknown;
  try {
    parsed = await runWorkerTask<ParseTask, unknown>(PARSE_WORKER, { text: textBody, format }, { maxHeapMb: PARSE_HEAP_MB, timeoutMs: PARSE_TIMEOUT_MS });
  } catch (err) {
    if (err instanceof WorkerLimitError) {
      if (err.limit === 'busy' || err.limit === 'stopped') throw new HttpError(503, `document cannot be read now: ${err.message}`);
      throw new HttpError(413, `document could not be read within the ${err.limit === 'memory' ? `memory limit (${PARSE_HEAP_MB} MB)` : `time limit (${PARSE_TIMEOUT_MS / 1000} s)`}`);
    }
    if (err instanceof WorkerTaskError && err.code === 'syntax') throw new Invalid(`document is not valid ${format === 'yaml' ? 'YAML' : 'JSON'}: ${err.message.slice(0, 300)}`);
    throw err;
  }
  return checkSuite(parsed);
}

/** The document as text to keep in a repository (our own checked, bounded document: stringified here). */
export function formatSuite(doc: SuiteDocument, format: DocumentFormat): string {
  return format === 'json' ? `${JSON.stringify(doc, null, 2)}\n` : stringify(doc, { lineWidth: 0 });
}
