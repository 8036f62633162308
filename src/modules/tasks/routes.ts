// Every Tasks operation of the contract, plus the agent queueing operations (outboundCall/Sms).
import { Type } from '@sinclair/typebox';
import type { App } from '../../http/types.ts';
import { AccountId, Envelope, errors, Obj, Security, Nullable } from '../../http/schemas.ts';
import { taskCsvRoutes } from './csv.ts';
import type { TaskService } from './service.ts';

const tags = ['Tasks'];
const Target = { targetAccountId: Type.Optional(AccountId('Organization or agent to act on (resellers and partners; an organization or agent token acts on itself)')) };
const TargetQuery = Type.Object(Target);
const TaskId = Type.Object({ taskId: Type.String({ minLength: 1, maxLength: 200, description: 'Task ID' }) });
const Seconds = (description: string) => Nullable(Type.Number({ description }));
const NullableText = (description: string) => Nullable(Type.String({ description }));
/** A calling window as answered (docs/campaigns.md). */
const CallingWindow = (description: string) => Obj({
  days: Type.Array(Type.Integer(), { description: '0 = Sunday … 6 = Saturday' }),
  start: Type.String({ description: 'HH:MM' }),
  end: Type.String({ description: 'HH:MM (24:00 = end of day)' }),
  timezone: Type.Optional(Type.String({ description: 'Read in this IANA zone instead of the recipient\'s' })),
}, description);
const RetryRules = (description: string) => Obj({
  on: Type.Array(Type.String(), { description: 'Results that try again: no-answer, busy, failed, voicemail' }),
  delaysSec: Type.Array(Type.Integer(), { description: 'Seconds before retry n: delaysSec[n − 1], the last repeating' }),
  maxAttempts: Type.Integer({ description: 'Attempts in all, the first included' }),
}, description);

const Task = Obj({
  id: Type.String({ description: 'tsk_ + a time-sortable id' }),
  type: Type.String({ description: 'call, text or ping' }),
  state: Type.String({ description: 'pending, running, finished, failed or canceled' }),
  target: Type.Optional(Type.String({ description: 'The number (E.164) or agent username; absent for a ping without one' })),
  context: NullableText('Context for the agent'),
  taskContext: NullableText('Context for this task only'),
  content: NullableText('The message of a text'),
  greeting: NullableText('What the agent opens with'),
  waitToGreet: Type.Boolean(),
  voicemail: Nullable(Obj({ action: Type.String({ description: 'hangup, leave-message or continue' }), message: Type.Optional(Type.String()) },
    'What the call does when a voicemail answers (extension; docs/tasks.md); null: the agent\'s voicemailAction')),
  accountId: Type.Integer({ description: 'The agent that runs it' }),
  organizationId: Type.Integer(),
  externalTaskId: NullableText('Your identifier for the task'),
  meta: Nullable(Obj({}, 'Your metadata, as given')),
  scheduledFor: Seconds('Requested start (unix seconds); null: as soon as possible'),
  runAt: Seconds('While pending: when the queue next considers it (unix seconds)'),
  heldReason: NullableText('While pending: why a limit holds it back (an included amount of the plan used, a daily cap, business hours, the calling window in the recipient\'s time, a cooldown, concurrency); null otherwise'),
  createdAt: Type.Number(),
  updatedAt: Type.Number(),
  startedAt: Seconds('First start (unix seconds)'),
  finishedAt: Seconds('Unix seconds'),
  attempts: Type.Integer(),
  maxAttempts: Type.Integer(),
  cancelRequestedAt: Seconds('Set when a running task was asked to stop (unix seconds)'),
  provider: NullableText('The carrier: simulated, twilio, sip'),
  providerRef: NullableText('The carrier\'s id for the call or message'),
  result: Nullable(Obj({}, 'The outcome (see docs/tasks.md)')),
  error: NullableText('Why it failed'),
  callingWindow: Type.Optional(Nullable(CallingWindow('callplane extension: the task\'s own calling window (null: none), over its agent\'s and organization\'s; absent when it set none (docs/campaigns.md)'))),
  retryRules: Type.Optional(Nullable(RetryRules('callplane extension: the call\'s own retry rules, over its agent\'s; absent when it set none (docs/campaigns.md)'))),
  attemptLog: Type.Array(Obj({
    attempt: Type.Integer({ description: 'Its number among the attempts that went out, from 1' }),
    at: Type.Number({ description: 'When it went out (unix seconds)' }),
    result: NullableText('How it ended: the outcome (completed, no-answer, busy, voicemail, delivered …), failed, canceled; null while it is under way'),
    callerId: NullableText('The number it went out from, when one was chosen (else the provider\'s default)'),
    callerIdBasis: Type.Optional(Type.String({ description: 'Why that number: agent, area-code, time-zone, country or default (callerIdStrategy nearest)' })),
    conversationId: NullableText('The conversation it held, if any'),
    roomId: Type.Optional(Type.String({ description: 'With conversationId: its room (<agent account id>:<room id>), so GET /api/v2/conversation/{roomId}/{conversationId} reads it' })),
    providerRef: NullableText('The carrier\'s id for it'),
  }), { description: 'callplane extension: each call or text attempt that went out (docs/campaigns.md)' }),
}, 'A task; times are unix seconds. See docs/tasks.md for every field.');
const Text = (description: string) => Type.Optional(Type.String({ description }));
const LooseInt = (description: string) => Type.Optional(Type.Union([Type.Integer(), Type.String()], { description }));

const TaskBody = Type.Object({
  type: Type.String({ description: 'call, text or ping' }),
  target: Text('Phone number (E.164, or international format; required for call and text), or for a ping the username of an agent of the organization'),
  context: Text('Context for the agent'),
  taskContext: Text('Context for this task only'),
  greeting: Text('What the agent opens with'),
  content: Text('The message of a text task (also accepted as message)'),
  message: Text('Alias of content'),
  waitToGreet: Type.Optional(Type.Boolean({ description: 'Let the callee speak first' })),
  voicemail: Type.Optional(Type.Unknown({ description: 'Call tasks: {action: hangup|leave-message|continue, message} when a voicemail answers (extension; docs/tasks.md)' })),
  accountId: LooseInt('Agent of the organization that runs the task (default: the organization\'s first agent)'),
  scheduledFor: LooseInt('Unix seconds; absent or 0 = now'),
  meta: Type.Optional(Type.Unknown({ description: 'Your metadata (a JSON object)' })),
  externalTaskId: Text('Your identifier for the task'),
  callingWindow: Type.Optional(Type.Unknown({ description: 'Call and text tasks: {days [0–6], start "HH:MM", end "HH:MM", timezone (optional)}, when it may go out in the recipient\'s local time, over its agent\'s and organization\'s; null: no window (extension; docs/campaigns.md)' })),
  retryRules: Type.Optional(Type.Unknown({ description: 'Call tasks: {on [no-answer, busy, failed, voicemail], delaysSec [..], maxAttempts}, over its agent\'s (extension; docs/campaigns.md)' })),
}, { additionalProperties: true });

const BatchBody = Type.Object({
  target: Text('One destination (backwards-compatible form)'),
  targets: Type.Optional(Type.Array(Type.Unknown(), { description: 'Destinations: phone numbers, or objects with a target and per-item options' })),
  context: Text('Context for every item'),
  taskContext: Text('Task context for every item'),
  greeting: Text('Greeting for every item'),
  content: Text('Message for every item (outboundSms)'),
  waitToGreet: Type.Optional(Type.Boolean()),
  voicemail: Type.Optional(Type.Unknown({ description: 'Call tasks: {action: hangup|leave-message|continue, message} when a voicemail answers (extension; docs/tasks.md)' })),
  accountId: LooseInt('Agent for every item'),
  agentId: LooseInt('Agent for every item (alias of accountId)'),
  scheduledFor: LooseInt('Unix seconds for every item'),
  scheduleSpacingSec: LooseInt('Stagger item n by n × this many seconds'),
  meta: Type.Optional(Type.Unknown()),
  externalTaskId: Text('Identifier for every created task'),
  callingWindow: Type.Optional(Type.Unknown({ description: 'Calling window for every item (extension; docs/campaigns.md)' })),
  retryRules: Type.Optional(Type.Unknown({ description: 'Retry rules for every call (extension; docs/campaigns.md)' })),
}, { additionalProperties: true });

const ListQuery = Type.Object({
  ...Target,
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, description: 'Max number of tasks to return (default 100)' })),
  offset: Type.Optional(Type.Integer({ minimum: 0, maximum: 1_000_000_000, description: 'Offset for pagination' })),
  since: Type.Optional(Type.Integer({ minimum: 0, maximum: 253_402_300_799, description: 'updatedAt >= since (unix seconds)' })),
  until: Type.Optional(Type.Integer({ minimum: 0, maximum: 253_402_300_799, description: 'updatedAt <= until (unix seconds)' })),
  sort: Type.Optional(Type.String({ description: 'createdAt, updatedAt or scheduledFor (default createdAt)' })),
  order: Type.Optional(Type.String({ description: 'asc or desc (default desc)' })),
  state: Type.Optional(Type.String({ description: 'pending, running, finished, failed or canceled' })),
  type: Type.Optional(Type.String({ description: 'call, text or ping' })),
  accountId: Type.Optional(AccountId('Only tasks of this agent')),
});

const UpdateBody = Type.Object({
  state: Type.Optional(Type.String({ description: '"canceled" cancels the task' })),
  context: Type.Optional(Type.Union([Type.String(), Type.Null()])),
  taskContext: Type.Optional(Type.Union([Type.String(), Type.Null()])),
  greeting: Type.Optional(Type.Union([Type.String(), Type.Null()])),
  content: Type.Optional(Type.Union([Type.String(), Type.Null()])),
  waitToGreet: Type.Optional(Type.Boolean()),
  voicemail: Type.Optional(Type.Unknown({ description: 'Call tasks: {action: hangup|leave-message|continue, message} when a voicemail answers; null: the agent\'s voicemailAction (extension; docs/tasks.md)' })),
  scheduledFor: Type.Optional(Type.Union([Type.Integer(), Type.String(), Type.Null()])),
  callingWindow: Type.Optional(Type.Unknown({ description: 'Call and text tasks: the task\'s own calling window {days, start, end, timezone}; null: no window. A task held by a window is looked at again at once (extension; docs/campaigns.md)' })),
  retryRules: Type.Optional(Type.Unknown({ description: 'Call tasks: the call\'s own retry rules {on, delaysSec, maxAttempts}; null: none (extension; docs/campaigns.md)' })),
}, { additionalProperties: true });

// Limits as answered: a limit that is not set is left out (never null: the contract types these
// as numbers and objects).
const Limits = Obj({
  businessHours: Type.Optional(Obj({
    timezone: Type.String({ description: 'IANA time zone' }),
    days: Type.Array(Type.Number(), { description: '0 = Sunday … 6 = Saturday' }),
    start: Type.String({ description: 'HH:MM' }),
    end: Type.String({ description: 'HH:MM (24:00 = end of day)' }),
  }, 'Absent when tasks may start at any time')),
  daily: Obj({ calls: Type.Optional(Type.Number()), texts: Type.Optional(Type.Number()), tasks: Type.Optional(Type.Number()) },
    'Caps per local day; a cap that is not set is absent'),
  concurrencyPerRun: Type.Number(),
  cooldowns: Obj({ calls: Type.Optional(Type.Number()), texts: Type.Optional(Type.Number()) },
    'Seconds between attempts to the same target; absent when not set'),
  retries: Obj({ busy: Type.Optional(Type.Number()), noAnswer: Type.Optional(Type.Number()), delaySec: Type.Optional(Type.Number()) },
    'callplane extension: further attempts after busy or no-answer; absent when not set'),
  callingWindow: Type.Optional(CallingWindow('callplane extension: the organization\'s default calling window, in the recipient\'s local time (docs/campaigns.md); absent when not set')),
});
const LimitsBody = Type.Object({
  businessHours: Type.Optional(Type.Unknown({ description: '{timezone, days [0–6, 0 = Sunday], start "HH:MM", end "HH:MM"}, or null' })),
  daily: Type.Optional(Type.Unknown({ description: '{calls, texts, tasks}: caps per local day (resellers and partners only)' })),
  concurrencyPerRun: Type.Optional(Type.Unknown({ description: 'Tasks running at once (resellers and partners only)' })),
  cooldowns: Type.Optional(Type.Unknown({ description: '{calls, texts}: seconds between attempts to the same number' })),
  callingWindow: Type.Optional(Type.Unknown({ description: 'callplane extension: {days [0–6], start "HH:MM", end "HH:MM", timezone (optional)}: when calls and texts may go out in the recipient\'s local time; null removes it (docs/campaigns.md)' })),
}, { additionalProperties: true });

export async function taskRoutes(app: App, { tasks, csvMaxBytes }: { tasks: TaskService; csvMaxBytes: number }): Promise<void> {
  // Its own plugin scope: multipart parsing is registered for that route only.
  await app.register(taskCsvRoutes, { tasks, maxBytes: csvMaxBytes });

  app.post('/api/v2/tasks', {
    schema: {
      operationId: 'createTask', tags, security: Security, summary: 'Create a new task (call, text or ping)',
      description: 'Send an Idempotency-Key header to make retries safe: the same key and body within 24 h answer with the first task.',
      querystring: TargetQuery, body: TaskBody,
      response: {
        201: Envelope({
          task: Task,
          warnings: Type.Optional(Type.Array(Type.String(), { description: 'What was accepted but is worth knowing: a number that is possible but not assigned, a schedule moved to now' })),
        }),
        ...errors(400, 403, 404, 409, 422),
      },
    },
  }, async (req, reply) => {
    const key = req.headers['idempotency-key'];
    const result = await tasks.create(req.scope, req.query.targetAccountId, req.body, Array.isArray(key) ? key[0] : key);
    if (result.replayed) reply.header('idempotent-replayed', 'true');
    return reply.status(201).send(result.body);
  });

  app.get('/api/v2/tasks', {
    schema: {
      operationId: 'listTasks', tags, security: Security, summary: 'Fetch all tasks', querystring: ListQuery,
      response: { 200: Envelope({ total: Type.Number(), tasks: Type.Array(Task) }), ...errors(400, 403, 404) },
    },
  }, async (req) => tasks.list(req.scope, req.query));

  app.get('/api/v2/tasks/stats', {
    schema: {
      operationId: 'taskStats', tags, security: Security, summary: 'Task counts by state', querystring: TargetQuery,
      response: { 200: Envelope({ total: Type.Number(), byState: Obj({ pending: Type.Number(), running: Type.Number(), finished: Type.Number() }) }), ...errors(403, 404) },
    },
  }, async (req) => tasks.stats(req.scope, req.query.targetAccountId));

  app.get('/api/v2/tasks/dailyCounts', {
    schema: {
      operationId: 'taskDailyCounts', tags, security: Security, summary: 'Today\'s counts of calls, texts and tasks (the organization\'s day)',
      querystring: Type.Object({ ...Target, date: Type.Optional(Type.String({ pattern: '^\\d{4}-\\d{2}-\\d{2}$', description: 'Another day (YYYY-MM-DD, the organization\'s time zone)' })) }),
      response: {
        200: Envelope({
          counts: Obj({ calls: Type.Number(), texts: Type.Number(), tasks: Type.Number(), date: Type.String(), timezone: Type.String() }),
          limits: Obj({ calls: Type.Optional(Type.Number()), texts: Type.Optional(Type.Number()), tasks: Type.Optional(Type.Number()) },
            'The daily caps in force; a cap that is not set is absent'),
        }),
        ...errors(400, 403, 404),
      },
    },
  }, async (req) => tasks.dailyCounts(req.scope, req.query.targetAccountId, req.query.date));

  app.get('/api/v2/tasks/limits', {
    schema: {
      operationId: 'getTaskLimits', tags, security: Security, summary: 'Fetch task limits', querystring: TargetQuery,
      response: { 200: Envelope({ limits: Limits }), ...errors(403, 404) },
    },
  }, async (req) => tasks.getLimits(req.scope, req.query.targetAccountId));

  app.post('/api/v2/tasks/limits', {
    schema: {
      operationId: 'updateTaskLimits', tags, security: Security, summary: 'Update task limits',
      description: 'daily and concurrencyPerRun may be changed only by a reseller or partner acting with targetAccountId.',
      querystring: TargetQuery, body: LimitsBody,
      response: { 200: Envelope({ limits: Limits }), ...errors(400, 403, 404) },
    },
  }, async (req) => tasks.setLimits(req.scope, req.query.targetAccountId, req.body));

  app.get('/api/v2/tasks/:taskId', {
    schema: {
      operationId: 'getTask', tags, security: Security, summary: 'Fetch a specific task', params: TaskId, querystring: TargetQuery,
      response: { 200: Envelope({ task: Task }), ...errors(403, 404) },
    },
  }, async (req) => tasks.get(req.scope, req.query.targetAccountId, req.params.taskId));

  app.post('/api/v2/tasks/:taskId', {
    schema: {
      operationId: 'updateTask', tags, security: Security, summary: 'Update or cancel a task', params: TaskId, querystring: TargetQuery, body: UpdateBody,
      response: { 200: Envelope({ task: Task }), ...errors(400, 403, 404, 409) },
    },
  }, async (req) => tasks.update(req.scope, req.query.targetAccountId, req.params.taskId, req.body));

  app.delete('/api/v2/tasks/:taskId', {
    schema: {
      operationId: 'deleteTask', tags, security: Security, summary: 'Delete a task that is not running', params: TaskId, querystring: TargetQuery,
      response: { 200: Envelope({}), ...errors(403, 404, 409) },
    },
  }, async (req) => tasks.remove(req.scope, req.query.targetAccountId, req.params.taskId));

  const Warnings = Type.Optional(Type.Array(Type.String(), { description: 'What was accepted but is worth knowing: a number that is possible but not assigned, a schedule moved to now' }));
  const Refused = Type.Optional(Type.Array(Obj({ index: Type.Integer({ description: 'The item of targets (0 for target)' }), target: Type.String(), message: Type.String() }),
    { description: 'Items refused because their number is on a do-not-call list; the others were queued (callplane extension; docs/campaigns.md)' }));
  const Batch = Envelope({ inserted: Type.Integer(), tasks: Type.Array(Task), warnings: Warnings, refused: Refused });
  app.post('/api/v2/agent/outboundCall', {
    schema: {
      operationId: 'agentOutboundCall', tags: ['Agents'], security: Security, summary: 'Queue outbound call(s) from your agent',
      querystring: TargetQuery, body: BatchBody, response: { 200: Batch, ...errors(400, 403, 404) },
    },
  }, async (req) => tasks.queueBatch(req.scope, req.query.targetAccountId, req.body, 'call'));

  app.post('/api/v2/agent/outboundSms', {
    schema: {
      operationId: 'agentOutboundSms', tags: ['Agents'], security: Security, summary: 'Queue outbound text message(s) from your agent',
      querystring: TargetQuery, body: BatchBody, response: { 200: Batch, ...errors(400, 403, 404) },
    },
  }, async (req) => tasks.queueBatch(req.scope, req.query.targetAccountId, req.body, 'text'));
}
