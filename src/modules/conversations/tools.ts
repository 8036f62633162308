// The tools a conversation's model may call: only those the agent's live configuration grants
// (built-in actions named in `actions`, and its `webhookActions`), each with its arguments checked
// before it runs. A call to anything else is refused and the refusal is what the model sees.
import type { ConversationChannel } from '../../db/types.ts';
import type { ToolCall, ToolSpec } from '../../llm/types.ts';
import { isE164 } from '../../lib/phone.ts';
import { twilioDials } from '../../providers/twilio/twiml.ts';
import type { AgentSettings, WebhookAction } from '../agents/settings.ts';

export type { WebhookAction };

export interface TransferDestination {
  name: string;
  destination: string;
}

/** What running a tool did, besides the result the model reads. */
export type ToolEffect =
  | { kind: 'end'; reason: string }
  | { kind: 'transfer'; destination: string; name: string };

export interface ToolOutcome {
  /** What the model is told (JSON or text), bounded. */
  result: string;
  refused?: boolean;
  effect?: ToolEffect;
  /** An asynchronous automation: the turn waits for POST /agent/zapier/response. */
  wait?: { requestId: string; expiresAt: number };
}

/** Built-in tool → the `actions` names that grant it (compared case-insensitively, without - and _). */
const GRANTS: Record<string, readonly string[]> = {
  end_conversation: ['hangup', 'endcall', 'end', 'endconversation'],
  transfer_call: ['transfer'],
  send_text: ['sendtext', 'sms', 'text'],
  queue_follow_up: ['followup', 'task'],
  search_knowledge: ['knowledge', 'kb', 'searchknowledge'],
};

const norm = (s: string) => s.toLowerCase().replace(/[-_\s]/g, '');
const VOICE: readonly ConversationChannel[] = ['voice', 'sip', 'simulated'];

export interface ToolSetContext {
  config: AgentSettings;
  channel: ConversationChannel;
  counterpart: string;
}

/** The tools this conversation's model is offered, with their JSON Schemas. */
export function grantedTools(ctx: ToolSetContext): ToolSpec[] {
  const granted = new Set(ctx.config.actions.map(norm));
  const has = (tool: string) => GRANTS[tool]!.some((g) => granted.has(g));
  const tools: ToolSpec[] = [];
  if (has('end_conversation')) {
    tools.push({
      name: 'end_conversation', description: 'End the conversation (hang up a call) once it is complete or the person says goodbye.',
      parameters: { type: 'object', properties: { reason: { type: 'string', description: 'Why the conversation ends' } }, additionalProperties: false },
    });
  }
  // A `voice` call is carried by Twilio, which dials phone numbers only (twilioDials): ext:/pbx:
  // destinations (a PBX behind SIP) are not offered there, so the model cannot pick one.
  const destinations = transferDestinations(ctx.config).filter((d) => ctx.channel !== 'voice' || twilioDials(d.destination));
  if (has('transfer_call') && VOICE.includes(ctx.channel) && destinations.length > 0) {
    tools.push({
      name: 'transfer_call', description: 'Transfer the call to a person or department.',
      parameters: {
        type: 'object', properties: { destination: { type: 'string', enum: destinations.map((d) => d.name), description: 'Where to transfer the call' } },
        required: ['destination'], additionalProperties: false,
      },
    });
  }
  if (has('send_text') && isE164(ctx.counterpart)) {
    tools.push({
      name: 'send_text', description: 'Send a text message (SMS) to the person you are talking with.',
      parameters: { type: 'object', properties: { message: { type: 'string', maxLength: 1000 } }, required: ['message'], additionalProperties: false },
    });
  }
  if (has('queue_follow_up') && isE164(ctx.counterpart)) {
    tools.push({
      name: 'queue_follow_up', description: 'Schedule a follow-up call or text to the person you are talking with.',
      parameters: {
        type: 'object',
        properties: {
          type: { type: 'string', enum: ['call', 'text'] },
          delayMinutes: { type: 'integer', minimum: 1, maximum: 43_200, description: 'Minutes from now' },
          message: { type: 'string', maxLength: 1000, description: 'What the follow-up says or is about' },
        },
        required: ['type', 'delayMinutes', 'message'], additionalProperties: false,
      },
    });
  }
  if (has('search_knowledge') && knowledgeBases(ctx.config).length > 0) {
    tools.push({
      name: 'search_knowledge', description: 'Search the knowledge base for facts to answer the person.',
      parameters: { type: 'object', properties: { query: { type: 'string', maxLength: 500 } }, required: ['query'], additionalProperties: false },
    });
  }
  for (const a of webhookActions(ctx.config)) {
    const properties: Record<string, unknown> = {};
    const required: string[] = [];
    for (const [p, spec] of Object.entries(a.parameters)) {
      properties[p] = { type: spec.type, ...(spec.description ? { description: spec.description } : {}), ...(spec.enum ? { enum: spec.enum } : {}) };
      if (spec.required) required.push(p);
    }
    tools.push({ name: a.name, description: a.description, parameters: { type: 'object', properties, required, additionalProperties: false } });
  }
  return tools;
}

export const webhookActions = (c: AgentSettings): readonly WebhookAction[] => c.webhookActions;
export const transferDestinations = (c: AgentSettings): readonly TransferDestination[] => c.transferDestinations;
export const knowledgeBases = (c: AgentSettings): readonly string[] => c.knowledgeBases;

export type CheckedArgs = { ok: true; args: Record<string, unknown> } | { ok: false; message: string };

/**
 * The call's arguments checked against the tool's schema as offered (types, enums, required,
 * lengths, no other properties). Only the flat schemas grantedTools() makes are understood.
 */
export function checkArguments(call: ToolCall, tool: ToolSpec): CheckedArgs {
  let args: unknown;
  try {
    args = call.arguments.trim() === '' ? {} : JSON.parse(call.arguments);
  } catch {
    return { ok: false, message: 'arguments are not valid JSON' };
  }
  if (!args || typeof args !== 'object' || Array.isArray(args)) return { ok: false, message: 'arguments must be a JSON object' };
  const schema = tool.parameters as { properties?: Record<string, { type: string; enum?: string[]; maxLength?: number; minimum?: number; maximum?: number }>; required?: string[] };
  const props = schema.properties ?? {};
  const obj = args as Record<string, unknown>;
  for (const key of Object.keys(obj)) if (!Object.hasOwn(props, key)) return { ok: false, message: `argument '${key}' is not a parameter of ${tool.name}` };
  for (const r of schema.required ?? []) if (obj[r] === undefined || obj[r] === null) return { ok: false, message: `argument '${r}' is required` };
  for (const [key, spec] of Object.entries(props)) {
    const v = obj[key];
    if (v === undefined || v === null) continue;
    switch (spec.type) {
      case 'string':
        if (typeof v !== 'string') return { ok: false, message: `argument '${key}' must be a string` };
        if (v.length > (spec.maxLength ?? 2000)) return { ok: false, message: `argument '${key}' is too long` };
        if (spec.enum && !spec.enum.includes(v)) return { ok: false, message: `argument '${key}' must be one of: ${spec.enum.join(', ')}` };
        break;
      case 'integer':
      case 'number':
        if (typeof v !== 'number' || !Number.isFinite(v) || (spec.type === 'integer' && !Number.isInteger(v))) return { ok: false, message: `argument '${key}' must be ${spec.type === 'integer' ? 'an integer' : 'a number'}` };
        if ((spec.minimum !== undefined && v < spec.minimum) || (spec.maximum !== undefined && v > spec.maximum)) return { ok: false, message: `argument '${key}' is out of range` };
        break;
      case 'boolean':
        if (typeof v !== 'boolean') return { ok: false, message: `argument '${key}' must be true or false` };
        break;
      default:
        return { ok: false, message: `argument '${key}' has a type we do not check` };
    }
  }
  return { ok: true, args: obj };
}
