// Rooms, messages, transcripts and conversation logs in the contract's shapes (Messaging and
// Logs): times in unix seconds (and ISO where the contract shows a date), the room id as
// `<agent account id>:<room id>`, the agent as its `camp…` id. docs/conversations.md, "History".
import type { ConversationRow, MessageRow, RoomRow, TurnLatencyRow } from '../../db/types.ts';
import { bool } from '../../db/flags.ts';
import { toUnixSeconds } from '../../lib/time.ts';
import { agentIdOf } from '../agents/service.ts';
import { missedCall, SKIPPED_ANALYSIS, type AnalysisAnswer } from './analysis.ts';
import type { AnalysisView, LiveConversationRow, LogRow } from './repository.ts';
import { readJson } from '../../db/json-columns.ts';

/** The contract's roomId of a room row: `<account_id>:<id>`. */
export const roomKey = (room: Pick<RoomRow, 'account_id' | 'id'>) => `${room.account_id}:${room.id}`;

/** `call` for the voice channels, `message` for the others (logs' eventType, messages' type). */
export const eventTypeOf = (channel: ConversationRow['channel']): 'call' | 'message' =>
  (channel === 'voice' || channel === 'sip' || channel === 'simulated' ? 'call' : 'message');

/** A message's delivery as the contract says it: `success` once delivered (an inbound message reached us). */
export function messageStatus(status: MessageRow['status']): string {
  return status === 'received' ? 'success' : status;
}

const parseJson = (text: string | null): unknown => readJson(text, null);

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

/**
 * The analysis's status: pending (queued or running), done, failed, skipped (the agent's
 * postCallAnalysis); undefined when there is none (open, or ended before analyses existed).
 */
export function analysisStatus(state: AnalysisView['analysis_state'], error?: string | null): 'pending' | 'done' | 'failed' | 'skipped' | undefined {
  if (state === null) return undefined;
  if (state === 'finished') return 'done';
  if (state === 'canceled' && error === SKIPPED_ANALYSIS) return 'skipped';
  return state === 'failed' || state === 'canceled' ? 'failed' : 'pending';
}

function answerOf(a: AnalysisView): AnalysisAnswer | undefined {
  if (a.analysis_state !== 'finished') return undefined;
  const v = parseJson(a.analysis_answer);
  return v && typeof v === 'object' ? v as AnalysisAnswer : undefined;
}

/**
 * The analysis after the conversation in the contract's fields (summary, agentOutcome,
 * aiLeadRating, aiLeadRatingReason) and ours (analysisStatus, analysisEngine, analysisError,
 * extracted), with the fact missedCall. A field the contract types as a string or number is left
 * out rather than null when there is no value (the analysis is pending or failed; nobody to rate).
 */
export function presentAnalysis(a: AnalysisView, c: Pick<ConversationRow, 'channel' | 'ended_at' | 'messages_in'>) {
  const status = analysisStatus(a.analysis_state, a.analysis_error);
  const answer = answerOf(a);
  return {
    ...(answer ? {
      summary: answer.summary,
      agentOutcome: answer.outcome,
      ...(answer.leadRating !== null ? { aiLeadRating: answer.leadRating } : {}),
      ...(answer.leadRatingReason !== null ? { aiLeadRatingReason: answer.leadRatingReason } : {}),
      extracted: answer.fields,
    } : {}),
    ...(status ? { analysisStatus: status } : {}),
    ...(answer && a.analysis_engine ? { analysisEngine: a.analysis_engine } : {}),
    ...(status === 'failed' ? { analysisError: a.analysis_error ?? 'the analysis failed' } : {}),
    missedCall: missedCall(c),
  };
}

/** A line of the contract's callDialog / chatDialog. */
export const dialogLine = (m: Pick<MessageRow, 'direction' | 'text'>, maxChars: number) => ({
  role: m.direction === 'inbound' ? 'user' : 'assistant',
  content: m.text.length > maxChars ? `${m.text.slice(0, maxChars)}…` : m.text,
});

/** GET /api/v2/messages/recent: `attachments` as an array, and the flags the contract lists that have a meaning here. */
export function presentRecentMessage(m: MessageRow, room: RoomSide, agentName: string,
  conversation: Pick<ConversationRow, 'messages_out' | 'duration_ms' | 'channel' | 'ended_at' | 'messages_in' | 'voicemail_recording'> & AnalysisView,
  dialog: { role: string; content: string }[]) {
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
    bypassAgent: false,
    selfCall: false,
    callingUserIsContact: false,
    ...presentAnalysis(conversation, conversation),
    // The conversation's dialog (its first lines): callDialog for a call, chatDialog for messages.
    ...(type === 'call' ? { callDialog: dialog } : { chatDialog: dialog }),
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

/**
 * A conversation on the live feed (GET /api/v2/conversations/live): the fields of a transcript's
 * and a log entry's, without the analysis (which comes after the end) or the messages (the snapshot
 * adds them; `message` events bring the rest).
 */
export function presentLiveConversation(c: LiveConversationRow) {
  return {
    uuid: c.id,
    roomId: `${c.account_id}:${c.room_id}`,
    accountId: c.account_id,
    agentId: agentIdOf(c.account_id),
    orgId: c.org_id,
    channel: c.channel,
    direction: c.direction,
    eventType: eventTypeOf(c.channel),
    counterpart: c.counterpart,
    counterpartName: c.display_name,
    taskId: c.task_id,
    outcome: c.outcome ?? 'open',
    outcomeDetail: c.outcome_detail,
    startedAt: toUnixSeconds(c.started_at)!,
    endedAt: toUnixSeconds(c.ended_at),
    duration: c.duration_ms === null ? null : Math.round(c.duration_ms / 1000),
    answeredBy: c.answered_by ?? null,
    answeredByAt: c.answered_by_at != null ? c.answered_by_at / 1000 : null,
    messagesIn: c.messages_in,
    messagesOut: c.messages_out,
  };
}

/** What a transcript says about its conversation, with its analysis. */
export function presentConversationSummary(c: ConversationRow, a: AnalysisView) {
  return {
    uuid: c.id,
    roomId: `${c.account_id}:${c.room_id}`,
    channel: c.channel,
    direction: c.direction,
    eventType: eventTypeOf(c.channel),
    outcome: c.outcome ?? 'open',
    startedAt: toUnixSeconds(c.started_at)!,
    endedAt: toUnixSeconds(c.ended_at),
    ...(c.duration_ms !== null ? { duration: Math.round(c.duration_ms / 1000) } : {}),
    ...presentAnalysis(a, c),
    answeredBy: c.answered_by ?? null,
    answeredByAt: c.answered_by_at != null ? c.answered_by_at / 1000 : null,
    voicemailRecording: c.voicemail_recording ?? null,
    speech: presentSpeech(c.state),
  };
}

const text = (v: unknown, max = 300): string | undefined => (typeof v === 'string' ? v.slice(0, max) : undefined);

/** A call's engine changes as stored (state.speech.changes, .ttsChanges): the well-formed ones, the last 20. */
function speechChanges(v: unknown) {
  if (!Array.isArray(v)) return undefined;
  return v.slice(-20).flatMap((x: unknown) => {
    const o = x && typeof x === 'object' ? x as Record<string, unknown> : {};
    return typeof o.at === 'number' && typeof o.from === 'string' && typeof o.to === 'string'
      ? [{ at: o.at / 1000, from: o.from.slice(0, 100), to: o.to.slice(0, 100), reason: text(o.reason, 500) ?? '' }] : [];
  });
}

/**
 * Which engines heard and spoke a call, as its state says (voice/call-state.ts writes it): the
 * engines now, what agentTtsEngine asked for, why the call could not start with it, and each change
 * mid-call (`at` in unix seconds). Null for a conversation no voice session carried.
 */
export function presentSpeech(state: string | null) {
  const parsed = parseJson(state);
  const raw = parsed && typeof parsed === 'object' && !Array.isArray(parsed) ? (parsed as Record<string, unknown>).speech : undefined;
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) return null;
  const s = raw as Record<string, unknown>;
  const changes = speechChanges(s.changes);
  const ttsChanges = speechChanges(s.ttsChanges);
  return {
    stt: text(s.stt, 100) ?? '', tts: text(s.tts, 100) ?? '', offline: s.offline === true,
    ...(text(s.vad, 100) !== undefined ? { vad: text(s.vad, 100) } : {}),
    ...(text(s.voice, 200) !== undefined ? { voice: text(s.voice, 200) } : {}),
    ...(typeof s.streamed === 'boolean' ? { streamed: s.streamed } : {}),
    ...(text(s.ttsRequested, 100) !== undefined ? { ttsRequested: text(s.ttsRequested, 100) } : {}),
    ...(text(s.ttsSubstituted, 500) !== undefined ? { ttsSubstituted: text(s.ttsSubstituted, 500) } : {}),
    ...(text(s.sttRequested, 100) !== undefined ? { sttRequested: text(s.sttRequested, 100) } : {}),
    ...(text(s.sttSubstituted, 500) !== undefined ? { sttSubstituted: text(s.sttSubstituted, 500) } : {}),
    ...(changes?.length ? { changes } : {}),
    ...(ttsChanges?.length ? { ttsChanges } : {}),
  };
}

/** An analysis row as the reads' view of it (none: nulls). */
export function analysisView(row: { state: AnalysisView['analysis_state']; engine: AnalysisView['analysis_engine']; answer: string | null; last_error: string | null } | undefined): AnalysisView {
  return row ? { analysis_state: row.state, analysis_engine: row.engine, analysis_answer: row.answer, analysis_error: row.last_error }
    : { analysis_state: null, analysis_engine: null, analysis_answer: null, analysis_error: null };
}

/** Every field a log entry has, in order (`fields` picks from these; `transcript` only when asked). */
export const LOG_FIELDS = [
  'id', 'timestamp', 'account_id', 'org_id', 'eventType', 'uuid', 'roomId', 'agentId', 'channel', 'direction',
  'counterpart', 'counterpartName', 'outcome', 'outcomeDetail', 'durationMs', 'startedAt', 'endedAt',
  'engine', 'provider', 'model', 'modelCalls', 'tokensIn', 'tokensOut', 'messagesIn', 'messagesOut', 'taskId',
  'duration', 'missedCall', 'analysisStatus', 'analysisEngine', 'analysisError', 'summary', 'agentOutcome', 'aiLeadRating', 'aiLeadRatingReason', 'extracted',
  'transcript',
] as const;
export type LogField = typeof LOG_FIELDS[number];
/** The fields without `fields`: all but the transcript. */
export const DEFAULT_LOG_FIELDS: readonly LogField[] = LOG_FIELDS.filter((f) => f !== 'transcript');

/** A log entry's value; `extracted` is an object (JSON text in the CSV). */
export type LogValue = string | number | boolean | null | Record<string, unknown>;

/** One conversation as a log entry (every field but the transcript, which the caller adds). */
export function presentLog(c: LogRow): Record<Exclude<LogField, 'transcript'>, LogValue> {
  const answer = answerOf(c);
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
    duration: c.duration_ms === null ? null : Math.round(c.duration_ms / 1000),
    missedCall: missedCall(c),
    analysisStatus: analysisStatus(c.analysis_state, c.analysis_error) ?? null,
    analysisEngine: answer ? c.analysis_engine : null,
    analysisError: analysisStatus(c.analysis_state, c.analysis_error) === 'failed' ? c.analysis_error ?? 'the analysis failed' : null,
    summary: answer?.summary ?? null,
    agentOutcome: answer?.outcome ?? null,
    aiLeadRating: answer?.leadRating ?? null,
    aiLeadRatingReason: answer?.leadRatingReason ?? null,
    extracted: answer?.fields ?? null,
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

/** What the API shows of a stored turn (a transcript's agent line). */
export function presentLatency(r: TurnLatencyRow) {
  const n = (v: number | string | null) => (v === null ? null : Number(v));
  return {
    path: r.path,
    endpointMs: n(r.endpoint_ms), sttMs: n(r.stt_ms), llmFirstTokenMs: n(r.llm_first_token_ms),
    ttsFirstAudioMs: n(r.tts_first_audio_ms), totalMs: n(r.total_ms),
    engines: { stt: r.stt_engine, llm: r.llm_engine, tts: r.tts_engine },
  };
}
