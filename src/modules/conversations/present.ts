// Rooms, messages, transcripts and conversation logs in the contract's shapes (Messaging and
// Logs): times in unix seconds (and ISO where the contract shows a date), the room id as
// `<agent account id>:<room id>`, the agent as its `camp…` id. docs/conversations.md, "History".
import type { ConversationRow, MessageRow, RoomRow } from '../../db/types.ts';
import { bool } from '../../db/flags.ts';
import { toUnixSeconds } from '../../lib/time.ts';
import { agentIdOf } from '../agents/service.ts';
import type { LogRow } from './repository.ts';

/** The contract's roomId of a room row: `<account_id>:<id>`. */
export const roomKey = (room: Pick<RoomRow, 'account_id' | 'id'>) => `${room.account_id}:${room.id}`;

/** `call` for the voice channels, `message` for the others (logs' eventType, messages' type). */
export const eventTypeOf = (channel: ConversationRow['channel']): 'call' | 'message' =>
  (channel === 'voice' || channel === 'sip' ? 'call' : 'message');

/** A message's delivery as the contract says it: `success` once delivered (an inbound message reached us). */
export function messageStatus(status: MessageRow['status']): string {
  return status === 'received' ? 'success' : status;
}

function parseJson(text: string | null): unknown {
  if (text === null) return null;
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

/** Stored attachments ([{type, url}]) in the contract's form ({content-type, filename, content-url, attachmentType}). */
export function presentAttachments(stored: string) {
  const list = parseJson(stored);
  if (!Array.isArray(list)) return [];
  return list.flatMap((a: unknown) => {
    if (!a || typeof a !== 'object') return [];
    const { type, url } = a as Record<string, unknown>;
    if (typeof url !== 'string') return [];
    const kind = typeof type === 'string' ? type : 'file';
    let filename = '';
    try {
      filename = decodeURIComponent(new URL(url).pathname.split('/').pop() ?? '');
    } catch { /* not a URL we can name */ }
    return [{ 'content-type': kind.includes('/') ? kind : 'application/octet-stream', filename, 'content-url': url, attachmentType: kind }];
  });
}

/** The counterpart's name as a person reads it: its display name, else its address. */
export const counterpartName = (room: Pick<RoomRow, 'display_name' | 'counterpart'>) => room.display_name ?? room.counterpart;

export function presentRoom(room: RoomRow) {
  return {
    roomId: roomKey(room),
    name: counterpartName(room),
    // The contract's "userId of other user": the counterpart has no account, the room stands for it.
    id: room.id,
    ...(room.counterpart_kind === 'phone' ? { vidaPhoneNumber: room.counterpart } : {}),
    unregistered: true,
    unregisteredDisplayName: room.counterpart,
    lastMessage: room.last_message ?? '',
    lastMessageTimestamp: toUnixSeconds(room.last_message_at)!,
    chatAgentCampaignId: agentIdOf(room.account_id),
    accountId: room.account_id,
    counterpart: room.counterpart,
    counterpartKind: room.counterpart_kind,
    unread: room.unread,
    junk: bool(room.junk),
    junkReason: bool(room.junk) ? room.junk_reason : null,
    // The organization's own decision: true or false; null when the rules decide.
    junkOverride: room.junk_override === null ? null : bool(room.junk_override),
    createdAt: toUnixSeconds(room.created_at)!,
  };
}

type RoomSide = Pick<RoomRow, 'id' | 'account_id' | 'counterpart' | 'counterpart_kind' | 'display_name' | 'junk' | 'junk_reason'>;

/** Who said it and to whom: the agent is its account id, the counterpart (which has none) its room id. */
function parties(m: MessageRow, room: RoomSide, agentName: string) {
  const agent = { id: room.account_id, name: agentName, number: undefined as string | undefined };
  const other = { id: room.id, name: counterpartName(room), number: room.counterpart_kind === 'phone' ? room.counterpart : undefined };
  const [from, to] = m.direction === 'inbound' ? [other, agent] : [agent, other];
  return {
    from: from.id, fromUser: from.name, to: to.id, toUser: to.name,
    ...(from.number ? { fromNumber: from.number } : {}),
    ...(to.number ? { toNumber: to.number } : {}),
  };
}

function common(m: MessageRow, room: RoomSide, agentName: string) {
  return {
    ...parties(m, room, agentName),
    timestamp: toUnixSeconds(m.at)!,
    date: new Date(m.at).toISOString(),
    message: m.text,
    roomId: roomKey(room),
    status: messageStatus(m.status),
    uuid: m.id,
    source: m.source,
    direction: m.direction,
    conversationUuid: m.conversation_id,
  };
}

/** GET /api/v2/messages/{roomId}: the contract types `attachments` there as a string (JSON text). */
export function presentRoomMessage(m: MessageRow, room: RoomSide, agentName: string, roomInitiator: string | undefined) {
  return {
    ...common(m, room, agentName),
    attachments: JSON.stringify(presentAttachments(m.attachments)),
    gift: false,
    drip: false,
    ...(roomInitiator !== undefined ? { roomInitiator } : {}),
  };
}

/** GET /api/v2/messages/recent: `attachments` as an array, and the flags the contract lists that have a meaning here. */
export function presentRecentMessage(m: MessageRow, room: RoomSide, agentName: string, conversation: Pick<ConversationRow, 'messages_out' | 'duration_ms' | 'voicemail_recording'>) {
  const type = eventTypeOf(m.source);
  return {
    ...common(m, room, agentName),
    'content-type': 'text/plain',
    attachments: presentAttachments(m.attachments),
    aiAgent: m.direction === 'outbound',
    campaignId: agentIdOf(room.account_id),
    type,
    eventType: `${m.direction}-${type}`,
    // The conversation's replies from the agent, and a call's length in seconds once it ended.
    agentReplyCount: conversation.messages_out,
    ...(type === 'call' && conversation.duration_ms !== null ? { duration: Math.round(conversation.duration_ms / 1000) } : {}),
    targetInbox: bool(room.junk) ? 'junk' : 'inbox',
    cnamSpam: bool(room.junk) && room.junk_reason === 'cnamAutoRejectRegex',
    rate: 0,
    usdRate: 0,
    isLive: false,
    gift: false,
    notify: false,
    missedCall: false,
    bypassAgent: false,
    selfCall: false,
    callingUserIsContact: false,
    // A message left on a voicemail: where its recording is (docs/voice.md, Voicemail).
    ...(conversation.voicemail_recording ? { voicemailRecording: conversation.voicemail_recording } : {}),
  };
}

/** A tool call the agent ran, from the message's data ({name, arguments, result, refused, requestId}). */
function presentTool(m: MessageRow) {
  const d = parseJson(m.data);
  const o = d && typeof d === 'object' && !Array.isArray(d) ? d as Record<string, unknown> : {};
  return {
    name: typeof o.name === 'string' ? o.name : m.text.split(':')[0],
    ...(o.arguments !== undefined ? { arguments: o.arguments } : {}),
    ...(o.result !== undefined ? { result: o.result } : {}),
    refused: o.refused === true,
    ...(typeof o.requestId === 'string' ? { requestId: o.requestId } : {}),
  };
}

/** One line of a conversation's transcript (GET /api/v2/conversation/…, the batch): tool calls carry `tool`. */
export function presentTranscriptLine(m: MessageRow) {
  return {
    message: m.text,
    timestamp: toUnixSeconds(m.at)!,
    date: new Date(m.at).toISOString(),
    direction: m.direction,
    source: m.source,
    status: messageStatus(m.status),
    uuid: m.id,
    attachments: presentAttachments(m.attachments),
    ...(m.direction === 'tool' ? { tool: presentTool(m) } : {}),
  };
}

/** What a transcript says about its conversation. */
export function presentConversationSummary(c: ConversationRow) {
  return {
    uuid: c.id,
    roomId: `${c.account_id}:${c.room_id}`,
    channel: c.channel,
    direction: c.direction,
    eventType: eventTypeOf(c.channel),
    outcome: c.outcome ?? 'open',
    startedAt: toUnixSeconds(c.started_at)!,
    endedAt: toUnixSeconds(c.ended_at),
    answeredBy: c.answered_by ?? null,
    answeredByAt: c.answered_by_at != null ? c.answered_by_at / 1000 : null,
    voicemailRecording: c.voicemail_recording ?? null,
  };
}

/** Every field a log entry has, in order (`fields` picks from these; `transcript` only when asked). */
export const LOG_FIELDS = [
  'id', 'timestamp', 'account_id', 'org_id', 'eventType', 'uuid', 'roomId', 'agentId', 'channel', 'direction',
  'counterpart', 'counterpartName', 'outcome', 'outcomeDetail', 'durationMs', 'startedAt', 'endedAt',
  'engine', 'provider', 'model', 'modelCalls', 'tokensIn', 'tokensOut', 'messagesIn', 'messagesOut', 'taskId', 'transcript',
] as const;
export type LogField = typeof LOG_FIELDS[number];
/** The fields without `fields`: all but the transcript. */
export const DEFAULT_LOG_FIELDS: readonly LogField[] = LOG_FIELDS.filter((f) => f !== 'transcript');

export type LogValue = string | number | null;

/** One conversation as a log entry (every field but the transcript, which the caller adds). */
export function presentLog(c: LogRow): Record<Exclude<LogField, 'transcript'>, LogValue> {
  return {
    id: c.id,
    timestamp: new Date(c.started_at).toISOString(),
    account_id: c.account_id,
    org_id: c.org_id,
    eventType: eventTypeOf(c.channel),
    uuid: c.id,
    roomId: `${c.account_id}:${c.room_id}`,
    agentId: agentIdOf(c.account_id),
    channel: c.channel,
    direction: c.direction,
    counterpart: c.counterpart,
    counterpartName: c.display_name,
    outcome: c.outcome ?? 'open',
    outcomeDetail: c.outcome_detail,
    durationMs: c.duration_ms,
    startedAt: toUnixSeconds(c.started_at),
    endedAt: toUnixSeconds(c.ended_at),
    engine: c.engine,
    provider: c.provider,
    model: c.model,
    modelCalls: c.model_calls,
    tokensIn: c.tokens_in,
    tokensOut: c.tokens_out,
    messagesIn: c.messages_in,
    messagesOut: c.messages_out,
    taskId: c.task_id,
  };
}

/** Transcript lines joined for a log entry: `direction: text`, at most `maxChars` characters. */
export function transcriptText(lines: readonly MessageRow[], maxChars: number, more: boolean): string {
  let out = '';
  for (const m of lines) {
    const line = `${m.direction}: ${m.text.replace(/\r\n?|\n/g, ' ')}`;
    if (out.length + line.length + 1 > maxChars) return `${out}${out ? '\n' : ''}… [truncated]`;
    out += (out ? '\n' : '') + line;
  }
  return more ? `${out}\n… [truncated]` : out;
}
