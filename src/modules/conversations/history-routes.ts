// The history's operations: the contract's Messaging reads (inbox, junk inbox, recent and room
// messages, one conversation, a batch of them), Logs (JSON or a streamed CSV), and our extension
// POST /api/v2/conversations/{roomId}/junk. docs/conversations.md, "History: rooms, messages, logs".
import { Type } from '@sinclair/typebox';
import type { App } from '../../http/types.ts';
import { AccountId, Envelope, errors, Obj, Security, Nullable } from '../../http/schemas.ts';
import { BATCH_MAX_ITEMS, INBOX_MAX_PAGE_SIZE, RECENT_MAX, ROOM_MESSAGES_MAX, type HistoryService } from './history.ts';
import { LOG_MAX_PAGE_SIZE, MAX_UNIX_SECONDS } from './logs-query.ts';

const tags = ['Messaging'];
const Target = {
  targetAccountId: Type.Optional(AccountId('Organization or agent to read (resellers and partners; an organization or agent token reads its own)')),
};
const TargetQuery = Type.Object(Target);
const RoomParam = Type.Object({ roomId: Type.String({ minLength: 1, maxLength: 40, description: 'Room Id: <agent account id>:<room id>, e.g. 3:15' }) });

const Room = Obj({
  roomId: Type.String({ description: 'Room Id: <agent account id>:<room id>' }),
  name: Type.String({ description: 'The counterpart\'s display name, else its address' }),
  id: Type.Integer({ description: 'The counterpart\'s id here: the room\'s own id (counterparts have no account)' }),
  vidaPhoneNumber: Type.Optional(Type.String({ description: 'The counterpart\'s number (E.164); absent when it is not a phone number' })),
  unregistered: Type.Boolean({ description: 'Always true: counterparts are not accounts of this platform' }),
  unregisteredDisplayName: Type.String({ description: 'The counterpart\'s address: E.164, web:<visitor> or an API sourceAddress' }),
  lastMessage: Type.String({ description: 'Last message text in the room (empty before the first)' }),
  lastMessageTimestamp: Type.Number({ description: 'Unix seconds of the last message' }),
  chatAgentCampaignId: Type.String({ description: 'The agent\'s id (camp<accountId>)' }),
  accountId: Type.Integer({ description: 'The agent account' }),
  counterpart: Type.String(),
  counterpartKind: Type.String({ description: 'phone, web or address' }),
  unread: Type.Integer({ description: 'Messages from the counterpart since the room was last read (GET /messages/{roomId})' }),
  junk: Type.Boolean(),
  junkReason: Nullable(Type.String({ description: 'Why it is junk: marked, cnamAutoRejectRegex, shortCode, alphanumericSender, automatedAddress' })),
  junkOverride: Nullable(Type.Boolean({ description: 'The organization\'s own decision; null when the junk rules decide' })),
  createdAt: Type.Number(),
}, 'A room: one agent and one counterpart (docs/conversations.md)');

const ConversationParams = Type.Object({
  roomId: Type.String({ minLength: 1, maxLength: 40, description: 'Room Id of the conversation' }),
  uuid: Type.String({ minLength: 1, maxLength: 100, description: 'The conversation uuid ({uuid}, {uuid}:{timestamp} or {uuid}:{open}:{close})' }),
});

const InboxQuery = Type.Object({
  ...Target,
  pagination: Type.Optional(Type.Boolean({ description: 'Answers are always pages; false answers every room at once when there are at most 1000 (else 400)' })),
  page: Type.Optional(Type.Integer({ minimum: 0, maximum: 1_000_000_000, description: 'Page number (0-based, default 0)' })),
  pageSize: Type.Optional(Type.Integer({ minimum: 1, maximum: INBOX_MAX_PAGE_SIZE, description: 'Rooms per page (default 20)' })),
  unread: Type.Optional(Type.Boolean({ description: 'true: only rooms with unread messages (false, or absent: every room)' })),
  includeTest: Type.Optional(Type.Boolean({ description: 'true: also the rooms of the staging test chat (left out by default)' })),
});
const Inbox = Envelope({
  pageSize: Type.Integer(), pageNumber: Type.Integer(), totalRooms: Type.Integer(), rooms: Type.Array(Room),
});

/** The analysis after the conversation (docs/conversations.md, "After the conversation"). */
const AnalysisFields = {
  summary: Type.Optional(Type.String({ description: 'What happened, from the analysis after the conversation; absent until it is done' })),
  agentOutcome: Type.Optional(Type.String({ description: 'The analysis\'s outcome: resolved, callback-requested, transferred, not-interested, voicemail, no-answer, failed, or one of the agent\'s analysisOutcomes; absent until it is done' })),
  aiLeadRating: Type.Optional(Type.Number({ description: 'The lead rating, 1 (no prospect) to 5; absent until the analysis is done, or when nobody answered' })),
  aiLeadRatingReason: Type.Optional(Type.String({ description: 'Why that rating' })),
  extracted: Type.Optional(Type.Record(Type.String(), Type.Unknown(), { description: 'The agent\'s analysisFields as extracted (null where the conversation did not say)' })),
  analysisStatus: Type.Optional(Type.String({ enum: ['pending', 'done', 'failed'], description: 'The analysis after the conversation; absent while the conversation is open' })),
  analysisEngine: Type.Optional(Type.String({ enum: ['model', 'simulated', 'facts'], description: 'Who answered: the agent\'s model, the SIMULATED engine\'s rules, or the facts alone (nobody spoke)' })),
  analysisError: Type.Optional(Type.String({ description: 'Why the analysis failed (analysisStatus failed)' })),
  missedCall: Type.Boolean({ description: 'A call that ended without a word from the other side' }),
};
const DialogLine = Obj({ role: Type.String({ description: 'user (the counterpart) or assistant (the agent)' }), content: Type.String() });

const Attachment = Obj({ 'content-type': Type.String(), filename: Type.String(), 'content-url': Type.String(), attachmentType: Type.String() });
const MessageFields = {
  from: Type.Integer({ description: 'Sender: the agent\'s account id, or for the counterpart its room\'s id' }),
  fromUser: Type.String({ description: 'Sender\'s name: the agent account\'s, or the counterpart\'s display name or address' }),
  to: Type.Integer({ description: 'Recipient, as from' }),
  toUser: Type.String(),
  fromNumber: Type.Optional(Type.String({ description: 'The counterpart\'s number when it sent the message and is a phone number' })),
  toNumber: Type.Optional(Type.String({ description: 'The counterpart\'s number when it received the message and is a phone number' })),
  timestamp: Type.Number({ description: 'Unix seconds' }),
  date: Type.String({ description: 'ISO 8601' }),
  message: Type.String(),
  roomId: Type.String(),
  status: Type.String({ description: 'success (delivered; every inbound message), pending, failed or interrupted' }),
  uuid: Type.String({ description: 'The message\'s id' }),
  source: Type.String({ description: 'The channel: api, sms, voice, web, sip, or simulated (a SIMULATED call)' }),
  direction: Type.String({ description: 'inbound (from the counterpart) or outbound (from the agent)' }),
  conversationUuid: Type.String({ description: 'The conversation it belongs to (GET /api/v2/conversation/{roomId}/{uuid})' }),
};
const RoomMessage = Obj({
  ...MessageFields,
  attachments: Type.String({ description: 'JSON text of the attachments: [{content-type, filename, content-url, attachmentType}]' }),
  gift: Type.Boolean({ description: 'Always false' }),
  drip: Type.Boolean({ description: 'Always false' }),
  roomInitiator: Type.Optional(Type.String({ description: 'Who first made contact: the counterpart\'s name or the agent\'s' })),
});
const RecentMessage = Obj({
  ...MessageFields,
  'content-type': Type.String({ description: 'text/plain' }),
  attachments: Type.Array(Attachment),
  aiAgent: Type.Boolean({ description: 'True when the agent wrote it' }),
  campaignId: Type.String({ description: 'The agent\'s id (camp<accountId>)' }),
  type: Type.String({ description: 'call (voice, sip) or message' }),
  eventType: Type.String({ description: '<direction>-<type>, e.g. inbound-message' }),
  agentReplyCount: Type.Integer({ description: 'The agent\'s replies in this message\'s conversation so far' }),
  duration: Type.Optional(Type.Number({ description: 'A call\'s length in seconds, once it ended; absent for messages' })),
  targetInbox: Type.String({ description: 'inbox or junk: where the room is' }),
  cnamSpam: Type.Boolean({ description: 'The room is junk because the agent\'s cnamAutoRejectRegex matched' }),
  rate: Type.Number({ description: 'Always 0: callplane charges nothing per message' }),
  usdRate: Type.Number({ description: 'Always 0' }),
  isLive: Type.Boolean({ description: 'Always false' }),
  gift: Type.Boolean({ description: 'Always false' }),
  notify: Type.Boolean({ description: 'Always false' }),
  bypassAgent: Type.Boolean({ description: 'Always false' }),
  selfCall: Type.Boolean({ description: 'Always false' }),
  callingUserIsContact: Type.Boolean({ description: 'Always false' }),
  ...AnalysisFields,
  callDialog: Type.Optional(Type.Array(DialogLine, { description: 'A call\'s dialog: its conversation\'s first 20 lines (500 characters each at most); the whole is GET /api/v2/conversation/{roomId}/{uuid}' })),
  chatDialog: Type.Optional(Type.Array(DialogLine, { description: 'As callDialog, for messages (api, sms, web)' })),
  voicemailRecording: Type.Optional(Type.String({ description: 'A call where a voicemail answered and the agent left a message: the API path of the recording holding it (GET …/recording); absent otherwise' })),
});

const Tool = Obj({
  name: Type.String(), arguments: Type.Optional(Type.Unknown()), result: Type.Optional(Type.Unknown()),
  refused: Type.Boolean({ description: 'The configuration did not grant it, or its arguments failed the check' }),
  requestId: Type.Optional(Type.String({ description: 'An asynchronous automation action\'s request' })),
});
const TranscriptLine = Obj({
  message: Type.String(), timestamp: Type.Number({ description: 'Unix seconds' }), date: Type.String({ description: 'ISO 8601' }),
  direction: Type.String({ description: 'inbound (the counterpart), outbound (the agent) or tool (a tool the agent ran)' }),
  source: Type.String({ description: 'The channel' }), status: Type.String(), uuid: Type.String({ description: 'The message\'s id' }),
  attachments: Type.Array(Attachment),
  tool: Type.Optional(Tool),
  latency: Type.Optional(Obj({
    path: Type.String({ description: 'sip, stream (Twilio Media Streams) or gather (Twilio <Gather>)' }),
    endpointMs: Nullable(Type.Integer({ description: 'End of the caller\'s speech → end of the turn (the VAD\'s silence window)' })),
    sttMs: Nullable(Type.Integer({ description: 'End of the turn → transcript' })),
    llmFirstTokenMs: Nullable(Type.Integer({ description: 'Transcript → the model\'s first token' })),
    ttsFirstAudioMs: Nullable(Type.Integer({ description: 'First token → the first audio out' })),
    totalMs: Nullable(Type.Integer({ description: 'End of speech → first audio out (gather: request → our answer)' })),
    engines: Obj({ stt: Nullable(Type.String()), llm: Nullable(Type.String()), tts: Nullable(Type.String()) }),
  }, 'callplane extension, on the agent\'s spoken replies: how long each step of the turn took, ms; null where the path cannot see it (docs/voice.md)')),
});
const SpeechChange = Obj({
  at: Type.Number({ description: 'Unix seconds' }), from: Type.String(), to: Type.String(), reason: Type.String(),
}, 'The engine changed mid-call (a provider failed), and why');
/** state.speech of a call (docs/voice.md, "Choosing a voice"). */
const Speech = Obj({
  stt: Type.String({ description: 'The engine hearing the caller now (pocketsphinx, openai, deepgram, …)' }),
  tts: Type.String({ description: 'The engine speaking now' }),
  offline: Type.Boolean({ description: 'Both run on this machine' }),
  vad: Type.Optional(Type.String({ description: 'The voice activity detector' })),
  voice: Type.Optional(Type.String({ description: 'The voice: the engine\'s own id, or default <gender> <language>' })),
  streamed: Type.Optional(Type.Boolean({ description: 'Replies are spoken as the model writes them' })),
  ttsRequested: Type.Optional(Type.String({ description: 'The agent\'s agentTtsEngine' })),
  ttsSubstituted: Type.Optional(Type.String({ description: 'Why the call could not start with it (the configured voice spoke instead)' })),
  sttRequested: Type.Optional(Type.String({ description: 'The agent\'s agentSttEngine' })),
  sttSubstituted: Type.Optional(Type.String({ description: 'Why the call is not heard by it (the configured recogniser heard instead)' })),
  changes: Type.Optional(Type.Array(SpeechChange, { description: 'Each change of the recogniser, the last 20' })),
  ttsChanges: Type.Optional(Type.Array(SpeechChange, { description: 'Each change of the voice, the last 20' })),
}, 'callplane extension: which engines heard and spoke a call, what was substituted and what changed mid-call');
const Summary = {
  channel: Type.String(), direction: Type.String(), eventType: Type.String({ description: 'call or message' }),
  outcome: Type.String({ description: 'open while it lasts; then completed, ended_by_agent, transferred, no_response, hung_up, failed or voicemail' }),
  answeredBy: Nullable(Type.String({ description: 'Outbound calls screened for voicemail: human, machine or unknown; null when not decided (extension; docs/voice.md, Voicemail)' })),
  answeredByAt: Nullable(Type.Number({ description: 'When who answered was decided (unix seconds, fractional); null when not' })),
  voicemailRecording: Nullable(Type.String({ description: 'The API path of the recording holding the message left on a voicemail; null when none' })),
  speech: Type.Union([Speech, Type.Null()], { description: 'Which engines heard and spoke the call (extension); null for a conversation no voice session carried' }),
  startedAt: Type.Number({ description: 'Unix seconds' }), endedAt: Nullable(Type.Number({ description: 'Unix seconds; null while open' })),
  truncated: Type.Boolean({ description: 'The transcript has more lines than were answered' }),
  duration: Type.Optional(Type.Number({ description: 'Seconds, once it ended' })),
  ...AnalysisFields,
};
const Conversation = Obj({
  success: Type.Boolean(), message: Type.String(), uuid: Type.String(), roomId: Type.String(), ...Summary,
  conversation: Type.Array(TranscriptLine),
});
const BatchResult = Obj({
  success: Type.Boolean(),
  roomId: Type.String({ description: 'As sent' }),
  uuid: Type.String({ description: 'As sent' }),
  message: Type.String({ description: 'Success, or why the pair was not found' }),
  conversationUuid: Type.Optional(Type.String()),
  channel: Type.Optional(Type.String()), direction: Type.Optional(Type.String()), eventType: Type.Optional(Type.String()),
  outcome: Type.Optional(Type.String()), startedAt: Type.Optional(Type.Number()), endedAt: Type.Optional(Nullable(Type.Number())),
  truncated: Type.Optional(Type.Boolean()),
  duration: Type.Optional(Type.Number()),
  ...AnalysisFields,
  missedCall: Type.Optional(Type.Boolean()),
  speech: Type.Optional(Type.Union([Speech, Type.Null()])),
  conversation: Type.Optional(Type.Array(TranscriptLine, { description: 'Absent when the pair was not found' })),
});

const Unix = (description: string) => Type.Optional(Type.Integer({ minimum: 0, maximum: MAX_UNIX_SECONDS, description }));
const Filter = (description: string) => Type.Optional(Type.String({ maxLength: 256, description }));
const LogsQuery = Type.Object({
  ...Target,
  start: Unix('Start time as unix seconds (default: 7 days before end)'),
  end: Unix('End time as unix seconds (default: now); conversations that started in [start, end]'),
  fields: Type.Optional(Type.String({ maxLength: 2000, description: 'Comma list of fields to include (default: all but transcript); includeFields lists them' })),
  format: Type.Optional(Type.String({ enum: ['json', 'csv'], description: 'json (default) or csv (a streamed file)' })),
  page: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000_000, description: 'Page number starting at 1 (default 1)' })),
  pageSize: Type.Optional(Type.Integer({ minimum: 1, maximum: LOG_MAX_PAGE_SIZE, description: `Rows per page, 1–${LOG_MAX_PAGE_SIZE} (default 20)` })),
  includeFields: Type.Optional(Type.String({ maxLength: 10, description: 'true or 1: answer the list of fields as schema' })),
  agentId: Filter('Only this agent (camp<accountId> or the account id)'),
  direction: Filter('inbound or outbound'),
  channel: Filter('api, sms, voice, web, sip, test, simulated (comma list; test: the staging test chat, left out unless named or includeTest; simulated: a call task\'s SIMULATED call)'),
  includeTest: Type.Optional(Type.String({ maxLength: 10, description: 'true or 1: also the staging test chat\'s conversations (channel test), left out by default' })),
  eventType: Filter('call or message (comma list)'),
  outcome: Filter('open, completed, ended_by_agent, transferred, no_response, hung_up, failed (comma list)'),
  roomId: Filter('One room: <accountId>:<roomId>'),
  counterpart: Filter('One counterpart: a phone number (any format) or an address'),
  engine: Filter('model or simulated (comma list)'),
  provider: Filter('The model provider'),
  model: Filter('The model'),
  taskId: Filter('The task that placed the call or text'),
}, { description: 'Any other query parameter is refused (400 naming it)' });
const Pagination = Obj({
  page: Type.Integer(), pageSize: Type.Integer(), totalPages: Type.Integer(), totalCount: Type.Integer(), hasMore: Type.Boolean(), pageCount: Type.Integer(),
});

export async function historyRoutes(app: App, { history }: { history: HistoryService }): Promise<void> {
  app.get('/api/v2/conversations', {
    schema: {
      operationId: 'listPriorityInbox', tags, security: Security, summary: 'List Priority Inbox',
      description: 'Rooms that are not junk, newest activity first. An agent token sees its own rooms only.',
      querystring: InboxQuery, response: { 200: Inbox, ...errors(400, 403, 404) },
    },
  }, async (req) => history.inbox(req.scope, req.query));

  app.get('/api/v2/junkConversations', {
    schema: {
      operationId: 'listJunkInbox', tags, security: Security, summary: 'List Junk Inbox',
      description: 'Rooms the junk rules or the organization put in the junk inbox, newest activity first, each with its junkReason.',
      querystring: InboxQuery, response: { 200: Inbox, ...errors(400, 403, 404) },
    },
  }, async (req) => history.junkInbox(req.scope, req.query));

  app.post('/api/v2/conversations/:roomId/junk', {
    schema: {
      operationId: 'setRoomJunk', tags, security: Security, summary: 'Mark a room as junk or not junk (callplane extension)',
      description: 'junk: true or false is the organization\'s own decision, which the junk rules never change; null returns the room to the rules, decided again now.',
      params: RoomParam, querystring: TargetQuery,
      // Checked by the service: the validator coerces types, and would turn null into false (or false into null).
      body: Type.Object({ junk: Type.Unknown({ description: 'true junk, false not junk, null: the junk rules decide' }) }),
      response: { 200: Envelope({ room: Room }), ...errors(400, 403, 404) },
    },
  }, async (req) => history.setJunk(req.scope, req.query.targetAccountId, req.params.roomId, req.body.junk));

  app.get('/api/v2/messages/recent', {
    schema: {
      operationId: 'recentMessages', tags, security: Security, summary: 'Fetch Recent Messages',
      description: `The latest messages across the rooms (junk included, tool calls left out), newest first: 100 by default, at most ${RECENT_MAX}.`,
      querystring: Type.Object({ ...Target, limit: Type.Optional(Type.Integer({ minimum: 1, maximum: RECENT_MAX, description: 'How many (default 100)' })) }),
      response: { 200: Type.Array(RecentMessage), ...errors(400, 403, 404) },
    },
  }, async (req) => history.recentMessages(req.scope, req.query));

  app.get('/api/v2/messages/:roomId', {
    schema: {
      operationId: 'roomMessages', tags, security: Security, summary: 'Fetch Room Messages',
      description: `The room's latest messages (at most ${ROOM_MESSAGES_MAX}; tool calls left out), oldest first. Reading marks the room read (unread 0).`,
      params: RoomParam,
      querystring: Type.Object({ ...Target, limit: Type.Optional(Type.Integer({ minimum: 1, maximum: ROOM_MESSAGES_MAX, description: `The latest this many (default ${ROOM_MESSAGES_MAX})` })) }),
      response: { 200: Type.Array(RoomMessage), ...errors(400, 403, 404) },
    },
  }, async (req) => history.roomMessages(req.scope, req.query, req.params.roomId));

  app.get('/api/v2/conversation/:roomId/:uuid', {
    schema: {
      operationId: 'getConversation', tags, security: Security, summary: 'Fetch Conversation',
      description: 'One conversation\'s transcript, tool calls included (with a tool object), in a one-item array as the contract shows. uuid may carry :timestamp or :open:close suffixes.',
      params: ConversationParams,
      querystring: TargetQuery,
      response: { 200: Type.Array(Conversation), ...errors(400, 403, 404) },
    },
  }, async (req) => history.conversation(req.scope, req.query.targetAccountId, req.params.roomId, req.params.uuid));

  app.get('/api/v2/conversation/:roomId/:uuid/recording', {
    schema: {
      operationId: 'getConversationRecording', tags, security: Security, summary: 'Fetch a call\'s recording (callplane extension)',
      description: 'The call recording of a SIP conversation as audio/wav: stereo, 16-bit, 8 kHz, the caller on the left and the agent on the right. '
        + '404 when the conversation was not recorded (CALLPLANE_CALL_RECORDING=off, not a SIP call) or its recording is past the retention. docs/voice.md, "Recording".',
      params: ConversationParams,
      querystring: TargetQuery,
      response: { 200: Type.String({ description: 'The WAV file (audio/wav)' }), ...errors(400, 403, 404) },
    },
  }, async (req, reply) => {
    const r = await history.recording(req.scope, req.query.targetAccountId, req.params.roomId, req.params.uuid);
    return reply.type('audio/wav').header('content-length', r.size).header('content-disposition', `attachment; filename="${r.filename}"`)
      .send(r.stream as never);
  });

  app.post('/api/v2/conversation/batch', {
    schema: {
      operationId: 'getConversationBatch', tags, security: Security, summary: 'Fetch multiple conversations',
      description: `Up to ${BATCH_MAX_ITEMS} roomId + uuid pairs (from /api/v2/logs). A pair that is not found is a failed item; the batch still succeeds.`,
      querystring: TargetQuery,
      body: Type.Object({
        items: Type.Array(Type.Object({
          roomId: Type.String({ maxLength: 40, description: 'Conversation room ID' }),
          uuid: Type.String({ maxLength: 100, description: 'Conversation uuid from logs ({uuid}, {uuid}:{timestamp} or {uuid}:{open}:{close})' }),
        }), { minItems: 1, maxItems: BATCH_MAX_ITEMS, description: `1–${BATCH_MAX_ITEMS} lookups` }),
      }),
      response: {
        200: Envelope({
          message: Type.String(),
          stats: Obj({ requested: Type.Integer(), ok: Type.Integer(), failed: Type.Integer() }),
          results: Type.Array(BatchResult),
        }),
        ...errors(400, 403, 404),
      },
    },
  }, async (req) => history.batch(req.scope, req.query.targetAccountId, req.body.items));

  app.get('/api/v2/logs', {
    schema: {
      operationId: 'queryLogs', tags: ['Logs'], security: Security, summary: 'Query conversation logs',
      description: 'One entry per conversation that started in [start, end], newest first. format=csv streams every matching row '
        + '(or only the page, when page or pageSize is given) as text/csv. docs/conversations.md, "Logs and CSV export".',
      querystring: LogsQuery,
      response: {
        200: Envelope({
          message: Type.String(),
          logs: Type.Array(Obj({}, 'A conversation: the fields asked for')),
          count: Type.Integer({ description: 'Entries on this page' }),
          totalCount: Type.Integer({ description: 'Entries matching' }),
          pagination: Pagination,
          schema: Type.Optional(Type.Array(Type.String(), { description: 'With includeFields: every field a log entry can have' })),
        }),
        ...errors(400, 403, 404),
      },
    },
  }, async (req, reply) => {
    const r = await history.logs(req.scope, req.query, Object.keys(req.query as object));
    if (r.kind === 'json') return r.body;
    return reply.type('text/csv; charset=utf-8').header('content-disposition', `attachment; filename="${r.filename}"`).send(r.stream as never);
  });
}
