// An agent's configuration as everything that runs it reads it: every field present, typed, and
// with its default, resolved once from what is stored. A stored configuration may predate a field
// or its range (a snapshot restored from long ago), so each field is taken as the field table
// checks it (validation.ts, checkField), an integer outside its range is clamped into it, and
// anything else the table refuses reads as the field's default. Readers (prompts, tools, analysis, every voice
// path) take these settings and never re-read the stored JSON themselves.
import crypto from 'node:crypto';
import { Invalid } from '../../http/errors.ts';
import { checkField, defaultConfig, FIELDS, type AgentConfig, type AgentField, type AgentFields } from './validation.ts';

/** One extraction field of the analysis, as the field table normalises it. */
export interface AnalysisFieldSpec { type: 'string' | 'number' | 'boolean' | 'enum'; description?: string; values?: string[] }

/** A tool that POSTs to the customer's URL, as the field table normalises it (defaults filled in). */
export interface WebhookAction {
  name: string;
  description: string;
  url: string;
  parameters: Record<string, { type: 'string' | 'number' | 'integer' | 'boolean'; description?: string; enum?: string[]; required?: boolean }>;
  async: boolean;
  timeoutSeconds: number;
}

/** Fields the field table normalises into a narrower shape than its schema types (a name for `{name}`). */
interface Normalised {
  analysisOutcomes: { name: string; description?: string }[];
  analysisFields: Record<string, AnalysisFieldSpec>;
  webhookActions: WebhookAction[];
  /** true: every conversation; false: none; a number: that percentage of them. */
  postCallAnalysis: boolean | number;
}

/** Every field of an agent, resolved (see the top of this file). */
export type AgentSettings = Readonly<Omit<{ [K in AgentField]-?: Exclude<AgentFields[K], undefined> }, keyof Normalised> & Normalised>;

const DEFAULTS: Required<AgentConfig> = { ...defaultConfig(''), analysisOutcomes: [], analysisFields: {}, postCallAnalysis: true, testGate: false } as Required<AgentConfig>;
const KEYS = Object.keys(FIELDS) as AgentField[];
/** Settings already resolved: resolving them again is free (voiceSettings takes either). */
const resolved = new WeakSet<object>();

function field(key: AgentField, value: unknown): unknown {
  if (value === undefined) return DEFAULTS[key];
  const f = FIELDS[key] as { nullable?: boolean; schema: { type?: string; minimum?: number; maximum?: number } };
  if (value === null) return f.nullable ? null : DEFAULTS[key];
  if (f.schema.type === 'integer' && typeof value === 'number' && Number.isInteger(value)) {
    return Math.min(Math.max(value, f.schema.minimum ?? -Infinity), f.schema.maximum ?? Infinity);
  }
  try {
    return checkField(key, value);
  } catch (err) {
    if (err instanceof Invalid) return DEFAULTS[key];
    throw err;
  }
}

/**
 * The agent's settings from a stored (or partial) configuration: every field with its default.
 * Other keys the store kept are dropped: nothing reads them.
 */
export function resolveAgentSettings(config: AgentConfig | AgentSettings): AgentSettings {
  if (resolved.has(config)) return config as AgentSettings;
  const out = Object.fromEntries(KEYS.map((k) => [k, field(k, (config as AgentConfig)[k])])) as unknown as AgentSettings;
  resolved.add(out);
  return out;
}

/** The settings of a call or conversation without an agent: every default. */
export const DEFAULT_SETTINGS: AgentSettings = resolveAgentSettings({});

/**
 * The hash of a configuration as it runs (its resolved settings, testGate left out: turning the
 * gate on is no change to what is tested). An agent test run keeps the hash of the configuration it
 * talked to; the publish gate compares it with the staging configuration's (docs/testing-agents.md).
 */
export function configHash(config: AgentConfig | AgentSettings): string {
  const { testGate: _gate, ...rest } = resolveAgentSettings(config);
  return crypto.createHash('sha256').update(JSON.stringify(rest)).digest('hex');
}
