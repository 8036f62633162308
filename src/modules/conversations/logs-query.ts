// GET /api/v2/logs: its query parameters checked and turned into a LogFilter, a page and the
// fields to show. Every parameter is declared; any other one is refused with a 400 naming it
// (the contract's "any other query parameters are treated as filters" has no list, and a filter
// that is silently ignored answers with the wrong rows). docs/conversations.md, "Logs and CSV export".
import type { ConversationOutcome, ConversationRow } from '../../db/types.ts';
import { Invalid } from '../../http/errors.ts';
import { MAX_ACCOUNT_ID } from '../../http/schemas.ts';
import { accountIdOf } from '../agents/service.ts';
import { DEFAULT_LOG_FIELDS, eventTypeOf, LOG_FIELDS, type LogField } from './present.ts';
import type { LogFilter } from './repository.ts';
import { normaliseAddress } from './service.ts';

/** Filters, each an equality on the log field of that name (comma lists where the values are a closed set). */
export const LOG_FILTERS = [
  'agentId', 'direction', 'channel', 'eventType', 'outcome', 'roomId', 'counterpart', 'engine', 'provider', 'model', 'taskId',
] as const;
/** Every query parameter GET /api/v2/logs takes (`token` is the API token, as on every operation). */
export const LOG_PARAMETERS: readonly string[] = [
  'token', 'targetAccountId', 'start', 'end', 'fields', 'format', 'page', 'pageSize', 'includeFields', 'includeTest', ...LOG_FILTERS,
];

export const LOG_MAX_PAGE_SIZE = 10_000;
export const LOG_DEFAULT_PAGE_SIZE = 20;
/** The default window: the 7 days before `end`. */
export const LOG_DEFAULT_WINDOW_S = 7 * 86_400;
/** The largest unix second we take (9999-12-31T23:59:59Z). */
export const MAX_UNIX_SECONDS = 253_402_300_799;

const DIRECTIONS: readonly ConversationRow['direction'][] = ['inbound', 'outbound'];
const CHANNELS: readonly ConversationRow['channel'][] = ['api', 'sms', 'voice', 'web', 'sip', 'test', 'simulated'];
const ENGINES: readonly ConversationRow['engine'][] = ['model', 'simulated'];
const OUTCOMES: readonly (ConversationOutcome | 'open')[] = ['open', 'completed', 'ended_by_agent', 'transferred', 'no_response', 'hung_up', 'failed', 'voicemail'];
const EVENT_TYPES = ['call', 'message'] as const;

export interface LogsQuery {
  targetAccountId?: number;
  start?: number;
  end?: number;
  fields?: string;
  format?: string;
  page?: number;
  pageSize?: number;
  includeFields?: string;
  agentId?: string;
  direction?: string;
  channel?: string;
  eventType?: string;
  outcome?: string;
  roomId?: string;
  counterpart?: string;
  engine?: string;
  provider?: string;
  model?: string;
  taskId?: string;
  /** true or 1: also the staging test chat's conversations (channel test), left out unless named. */
  includeTest?: string;
}

export interface ParsedLogs {
  /** Milliseconds, inclusive: start's first and end's last millisecond. */
  from: number;
  to: number;
  start: number;
  end: number;
  fields: LogField[];
  format: 'json' | 'csv';
  page: number;
  pageSize: number;
  /** Whether page or pageSize was given (a CSV export is then that page only). */
  paged: boolean;
  includeFields: boolean;
  /** The filters contradict each other: no conversation can match (no query is needed). */
  matchesNothing: boolean;
  /** The agent the `agentId` filter names (its account id), still to be checked against the caller's scope. */
  agentId?: number;
  /** The room the `roomId` filter names, still to be checked against the caller's scope. */
  room?: { accountId: number; id: number };
  filter: Omit<LogFilter, 'orgId' | 'accountId' | 'from' | 'to' | 'roomId'>;
}

const TRUE = new Set(['1', 'true', 'yes', 'on']);
const FALSE = new Set(['0', 'false', 'no', 'off', '']);

/** A truthy/falsy query value (`includeFields=1`, `true`, `yes`); anything else is a 400 naming it. */
export function truthy(value: string | undefined, name: string): boolean {
  if (value === undefined) return false;
  const v = value.trim().toLowerCase();
  if (TRUE.has(v)) return true;
  if (FALSE.has(v)) return false;
  throw new Invalid(`${name} must be true or false (or 1 or 0)`);
}

/** A comma list of values from a closed set; 400 naming the parameter and the values it takes. */
function oneOf<T extends string>(value: string | undefined, name: string, allowed: readonly T[]): T[] | undefined {
  if (value === undefined) return undefined;
  const items = [...new Set(value.split(',').map((v) => v.trim()).filter(Boolean))];
  if (items.length === 0) throw new Invalid(`${name} must not be empty`);
  for (const item of items) {
    if (!(allowed as readonly string[]).includes(item)) throw new Invalid(`${name} must be one of: ${allowed.join(', ')} (a comma list for several)`);
  }
  return items as T[];
}

function text(value: string | undefined, name: string, max = 200): string | undefined {
  if (value === undefined) return undefined;
  const v = value.trim();
  if (v === '') throw new Invalid(`${name} must not be empty`);
  if (v.length > max) throw new Invalid(`${name} must be at most ${max} characters long`);
  return v;
}

/** `<accountId>:<roomId>` → its two ids; undefined for anything else. */
export function parseRoomKey(value: string): { accountId: number; id: number } | undefined {
  const m = /^([1-9]\d{0,9}):([1-9]\d{0,9})$/.exec(value.trim());
  if (!m) return undefined;
  const accountId = Number(m[1]);
  const id = Number(m[2]);
  // Both are 32-bit serials on PostgreSQL: a larger number names nothing (and would fail in the query).
  if (accountId > MAX_ACCOUNT_ID || id > MAX_ACCOUNT_ID) return undefined;
  return { accountId, id };
}

/** The fields `fields` names (comma list), in the order given, each once; unknown names are a 400 naming `fields`. */
export function parseFields(value: string | undefined): LogField[] {
  if (value === undefined) return [...DEFAULT_LOG_FIELDS];
  const names = [...new Set(value.split(',').map((f) => f.trim()).filter(Boolean))];
  if (names.length === 0) throw new Invalid('fields must name at least one field');
  const unknown = names.filter((n) => !(LOG_FIELDS as readonly string[]).includes(n));
  if (unknown.length) throw new Invalid(`fields: unknown field${unknown.length > 1 ? 's' : ''} ${unknown.slice(0, 10).join(', ')}; the fields are ${LOG_FIELDS.join(', ')}`);
  return names as LogField[];
}

/**
 * Checks the query of GET /api/v2/logs. `keys` are the parameter names the request carried:
 * any that is not one of LOG_PARAMETERS is a 400 naming it. `nowMs` sets the default window.
 */
export function parseLogsQuery(q: LogsQuery, keys: readonly string[], nowMs: number): ParsedLogs {
  const unknown = keys.filter((k) => !LOG_PARAMETERS.includes(k));
  if (unknown.length) {
    const shown = unknown.slice(0, 10).map((k) => k.slice(0, 60));
    throw new Invalid(`unknown query parameter${unknown.length > 1 ? 's' : ''} ${shown.join(', ')}: the logs filter on ${LOG_FILTERS.join(', ')}`);
  }
  const end = q.end ?? Math.floor(nowMs / 1000);
  const start = q.start ?? Math.max(0, end - LOG_DEFAULT_WINDOW_S);
  if (start > end) throw new Invalid(`start (${start}) must not be after end (${end})`);
  const format = q.format ?? 'json';
  if (format !== 'json' && format !== 'csv') throw new Invalid('format must be one of: json, csv');

  let agentId: number | undefined;
  if (q.agentId !== undefined) {
    agentId = accountIdOf(q.agentId.trim());
    if (agentId === undefined || agentId > MAX_ACCOUNT_ID) throw new Invalid('agentId must be an agent id (camp<accountId>) or an account id');
  }
  let room: { accountId: number; id: number } | undefined;
  if (q.roomId !== undefined) {
    room = parseRoomKey(q.roomId);
    if (!room) throw new Invalid('roomId must be <accountId>:<roomId>, as the logs and the inbox show it');
  }
  const counterpart = text(q.counterpart, 'counterpart', 256);
  const eventTypes = oneOf(q.eventType, 'eventType', EVENT_TYPES);
  let channels = oneOf(q.channel, 'channel', CHANNELS);
  // The staging test chat's sessions are left out unless asked for (channel=test or includeTest).
  if (channels === undefined && !truthy(q.includeTest, 'includeTest')) channels = CHANNELS.filter((c) => c !== 'test');
  if (eventTypes) {
    // eventType is the channel's kind: call (voice, sip) or message (api, sms, web).
    const ofType = CHANNELS.filter((c) => eventTypes.includes(eventTypeOf(c)));
    channels = channels ? channels.filter((c) => ofType.includes(c)) : ofType;
  }
  return {
    from: start * 1000,
    to: end * 1000 + 999,
    start,
    end,
    fields: parseFields(q.fields),
    format,
    page: q.page ?? 1,
    pageSize: q.pageSize ?? LOG_DEFAULT_PAGE_SIZE,
    paged: q.page !== undefined || q.pageSize !== undefined,
    includeFields: truthy(q.includeFields, 'includeFields'),
    // channel and eventType given that no channel satisfies both.
    matchesNothing: channels !== undefined && channels.length === 0,
    agentId,
    room,
    filter: {
      directions: oneOf(q.direction, 'direction', DIRECTIONS),
      channels,
      outcomes: oneOf(q.outcome, 'outcome', OUTCOMES),
      engines: oneOf(q.engine, 'engine', ENGINES),
      counterpart: counterpart === undefined ? undefined : normaliseAddress(counterpart).address,
      provider: text(q.provider, 'provider'),
      model: text(q.model, 'model'),
      taskId: text(q.taskId, 'taskId'),
    },
  };
}
