// The composition root: every queue, runtime and service of a process is built here, once, and
// handed to whoever uses it (the HTTP app's route plugins, the workers). Nothing else constructs
// a service or a queue. main.ts and the test harness both start from createPlatform().
import path from 'node:path';
import type { Config } from './config.ts';
import type { Database, Listener } from './db/index.ts';
import type { TokenLookup } from './http/auth.ts';
import { createMetrics, type Metrics } from './http/metrics.ts';
import type { SecretBox } from './lib/crypto.ts';
import { listenForWakeups, Wakeups } from './queue/waker.ts';
import { guardedDispatcher, policyFromConfig } from './webhooks/ssrf.ts';
import { accountService, type AccountService } from './modules/tenancy/service.ts';
import { billingService, type BillingService } from './modules/billing/service.ts';
import { billingSystemService, type BillingSystemService } from './modules/billing/billing-systems.ts';
import { processorSubscriptions, type ProcessorSubscriptions } from './modules/billing/processor-subscriptions.ts';
import { usageService, type UsageService } from './modules/billing/usage.ts';
import { overviewService, type OverviewService } from './modules/overview/service.ts';
import { cachedEntitlements, planAllowance } from './modules/billing/entitlements.ts';
import { adrService, type AdrService } from './modules/adr/service.ts';
import { adrQueue, type AdrQueue, type AdrQueueDeps } from './modules/adr/adr-queue.ts';
import { contextService, type ContextService } from './modules/context/service.ts';
import { complianceService, type ComplianceService } from './modules/compliance/service.ts';
import { messageSecret } from './modules/accounts/message-secret.ts';
import { accountRepo } from './modules/accounts/repository.ts';
import { conversationService, type ConversationService } from './modules/conversations/service.ts';
import { conversationRepo } from './modules/conversations/repository.ts';
import { analysisProducer, analysisQueue, type AnalysisQueue, type AnalysisQueueDeps } from './modules/conversations/analysis-queue.ts';
import { smsService, type SmsService } from './modules/conversations/sms.ts';
import { historyService, type HistoryService } from './modules/conversations/history.ts';
import { liveFeed, type LiveFeed, type LiveFeedDeps } from './modules/conversations/live.ts';
import { textTaskWriter } from './modules/conversations/text-task.ts';
import { turnRunner } from './modules/conversations/turn.ts';
import { turnProducer, turnQueue, type TurnQueue, type TurnQueueDeps } from './modules/conversations/turn-queue.ts';
import { webChatService, type WebChatService } from './modules/conversations/web-chat.ts';
import { stagingChatService, type StagingChatService } from './modules/conversations/staging-chat.ts';
import { InlineTurnLimits } from './modules/conversations/inline-limits.ts';
import { twilioVoice, type TwilioVoice } from './modules/twilio/calls.ts';
import { TWILIO_INCOMING_PATH, TWILIO_INCOMING_STATUS_PATH, TWILIO_SMS_PATH } from './providers/twilio/paths.ts';
import { VOICE_TURN_TIMEOUT_MS } from './modules/voice/call-policy.ts';
import { recordingStore, type RecordingStore } from './modules/voice/recordings.ts';
import { placedCallVoicemail } from './modules/voice/voicemail.ts';
import { twilioAmd } from './modules/twilio/amd.ts';
import { voiceCalls } from './modules/voice/sip-calls.ts';
import { GreetingCache } from './modules/voice/greeting-cache.ts';
import { voicesService, type VoicesService } from './modules/voice/voices.ts';
import { backgroundAudio } from './modules/voice/background-audio.ts';
import { mediaStreams, type MediaStreams } from './modules/twilio/media-streams.ts';
import { browserCalls, type BrowserCalls } from './modules/voice/browser-calls.ts';
import type { VoiceCalls } from './media/voice-transport.ts';
import { TWILIO, type CarrierOptions } from './providers/index.ts';
import { speechEngines, type SpeechEngines } from './speech/registry.ts';
import { latencyService, turnLatencies, type LatencyService } from './modules/voice/latency.ts';
import type { SpeechGrammar } from './speech/types.ts';
import { chooseCarrier } from './modules/numbering-providers/carriers.ts';
import { integrationService, type IntegrationService } from './modules/integrations/service.ts';
import { knowledgeService, type KnowledgeService } from './modules/knowledge/service.ts';
import { agentService, type AgentService } from './modules/agents/service.ts';
import { agentTestProducer, agentTestQueue, type AgentTestQueue, type AgentTestQueueDeps } from './modules/agent-tests/run-queue.ts';
import { agentTestService, testPublishGate, type AgentTestService } from './modules/agent-tests/service.ts';
import { textRunner } from './modules/agent-tests/text-runner.ts';
import { simulatedCalls, type SimulatedCallDeps } from './modules/agent-tests/simulated-call.ts';
import { voiceRunner } from './modules/agent-tests/voice-runner.ts';
import { callerPorts } from './modules/agent-tests/sip-caller.ts';
import { voiceTestCalls } from './modules/voice/test-calls.ts';
import { PortPool } from './media/port-pool.ts';
import { memberService, type MemberService } from './modules/members/service.ts';
import { modelsService, type ModelsService } from './modules/models/service.ts';
import { processSpeechKeys, speechProvidersService, type SpeechProvidersService } from './modules/speech-providers/service.ts';
import { numberingService, type NumberingService } from './modules/numbering-providers/service.ts';
import { numbersService, type NumbersService } from './modules/phone-numbers/service.ts';
import { numberReleaseQueue, type NumberReleaseQueue, type NumberReleaseQueueDeps } from './modules/phone-numbers/release-queue.ts';
import { NUMBER_RELEASES } from './modules/phone-numbers/releases.ts';
import { numberTakenElsewhere } from './modules/phone-numbers/holders.ts';
import { SIP_REGISTRATIONS, sipService, type SipService } from './modules/sip/service.ts';
import { defaultAdvertiseHost, SipWorker, type SipWorkerDeps } from './modules/sip/sip-worker.ts';
import { sipCallPlan } from './modules/sip/calls.ts';
import { taskRepo } from './modules/tasks/repository.ts';
import { agentHeldTasks, taskService, type TaskService } from './modules/tasks/service.ts';
import { taskQueue as createTaskQueue, taskWorker, type TaskQueue, type TaskQueueDeps } from './modules/tasks/task-queue.ts';
import { twilioCallbacks, type TwilioCallbacks } from './modules/twilio/task-callbacks.ts';
import { twilioTexts, type TwilioTexts } from './modules/twilio/texts.ts';
import { tokenLookup } from './modules/tokens/lookup.ts';
import { tokenService, type TokenService } from './modules/tokens/service.ts';
import { deliveryQueue, type DeliveryQueue, type DeliveryQueueDeps } from './modules/webhooks/delivery-queue.ts';
import { DELIVERIES } from './modules/webhooks/dispatcher.ts';
import { relayService, type RelayService } from './modules/webhooks/relays/service.ts';
import { subscriptionService, type SubscriptionService } from './modules/webhooks/subscriptions/service.ts';

type Log = { error(obj: object, msg: string): void; warn(obj: object, msg: string): void; info(obj: object, msg: string): void; child(b: object): Log };

export interface PlatformDeps {
  config: Config;
  database: Database;
  box: SecretBox;
  log?: Log;
  /**
   * Run this process's SIP endpoint (worker processes: the owner of registrations, inbound calls
   * and the carrier of calls over outbound routes); overrides are for tests (host, port, leases).
   */
  sip?: false | Partial<Omit<SipWorkerDeps, 'database' | 'config' | 'box' | 'wakeups'>>;
  /** Test settings of the task queue (shorter leases, a moved clock, carrier settings). */
  tasks?: Partial<Omit<TaskQueueDeps, 'database' | 'config' | 'wakeups'>> & { carrierOptions?: CarrierOptions };
  /** Test settings of the delivery queue (shorter leases, a fast retry schedule). */
  deliveries?: Partial<Omit<DeliveryQueueDeps, 'database' | 'config' | 'box' | 'wakeups'>>;
  /** Test settings of the activity-record export queue (a moved clock, a fast retry schedule). */
  adr?: Partial<Omit<AdrQueueDeps, 'database' | 'config' | 'box' | 'wakeups'>>;
  /** Test settings of the conversation-turn queue (shorter leases). */
  turns?: Partial<Omit<TurnQueueDeps, 'database' | 'config' | 'wakeups' | 'producer' | 'handler'>>;
  /** Test settings of the number-release queue (shorter leases, a fast retry schedule). */
  numberReleases?: Partial<Omit<NumberReleaseQueueDeps, 'database' | 'wakeups' | 'handler'>> & { backoff?: (attempt: number) => number };
  /** Test settings of the queue of analyses after conversations (shorter leases, a fast backoff). */
  analyses?: Partial<Omit<AnalysisQueueDeps, 'database' | 'config' | 'wakeups' | 'producer' | 'handler'>>;
  /** Test settings of the agent test runs' queue (shorter leases, a fast backoff). */
  agentTests?: Partial<Omit<AgentTestQueueDeps, 'database' | 'config' | 'wakeups' | 'producer' | 'handler'>>;
  /** A SIMULATED call's bounds (tests shorten them). */
  simulatedCalls?: Pick<SimulatedCallDeps, 'maxTurns' | 'maxMs'>;
  /** How long SIP registration POST/DELETE wait for the owning worker (tests shorten it). */
  sipWorkerWaitMs?: number;
  /** How long a spoken turn may take (VOICE_TURN_TIMEOUT_MS; tests shorten it). */
  voiceTurnTimeoutMs?: number;
  /** Recognition of streamed Twilio calls restricted to these phrases (tests; free speech otherwise). */
  voiceGrammar?: SpeechGrammar;
  /** The process's Prometheus registry (made here when not given); buildApp serves it at /metrics. */
  metrics?: Metrics;
  /** Test settings of the live feed (a shorter heartbeat and token recheck, a smaller buffer). */
  live?: Pick<LiveFeedDeps, 'heartbeatMs' | 'recheckMs' | 'watchMs' | 'maxBufferedBytes' | 'snapshotLines' | 'snapshotBytes' | 'now'>;
}

export interface Services {
  accounts: AccountService;
  tokens: TokenService;
  /** What authentication reads (buildApp hands it to the auth hook). */
  tokenLookup: TokenLookup;
  members: MemberService;
  numbering: NumberingService;
  numbers: NumbersService;
  tasks: TaskService;
  twilioCallbacks: TwilioCallbacks;
  relays: RelayService;
  subscriptions: SubscriptionService;
  sip: SipService;
  context: ContextService;
  /** Do-not-call lists and organizations' compliance settings (issue 37). */
  compliance: ComplianceService;
  integrations: IntegrationService;
  knowledge: KnowledgeService;
  agents: AgentService;
  models: ModelsService;
  /** Organizations' own speech provider keys, and which key a vendor is used with (issue 35). */
  speechProviders: SpeechProvidersService;
  conversations: ConversationService;
  webChat: WebChatService;
  /** Test chats with agents' staging configurations (the console's agent page). */
  stagingChat: StagingChatService;
  sms: SmsService;
  /** Twilio's messaging webhook: checked, then handed to `sms`. */
  twilioTexts: TwilioTexts;
  twilioVoice: TwilioVoice;
  /** The agent on calls whose audio we carry (SIP). */
  voiceCalls: VoiceCalls;
  /** Twilio Media Streams (CALLPLANE_TWILIO_VOICE=stream): the calls whose voice sessions run in this process. */
  mediaStreams: MediaStreams;
  browserCalls: BrowserCalls;
  /** Call recordings on disk (DATA_DIR/recordings), written by workers, served by the API, swept by maintenance. */
  recordings: RecordingStore;
  history: HistoryService;
  /** The live feed of conversations in progress (GET /api/v2/conversations/live): one listener and loader per process. */
  live: LiveFeed;
  billing: BillingService;
  /** Resellers' and partners' billing systems (Stripe, Chargebee). */
  billingSystems: BillingSystemService;
  /** Subscriptions through a billing system, and its webhooks. */
  processorSubscriptions: ProcessorSubscriptions;
  usage: UsageService;
  overview: OverviewService;
  /** Spoken turns' latencies per agent (GET /api/v2/agent/{agentId}/latency). */
  latency: LatencyService;
  /** The voices agents can name (GET /api/v2/voices). */
  voices: VoicesService;
  /** Which voice activity detector calls get (GET /readyz says). */
  vad: Pick<SpeechEngines['vad'], 'status'>;
  adr: AdrService;
  /** Agents' test suites and runs (docs/testing-agents.md). */
  agentTests: AgentTestService;
}

export interface Platform {
  /** The process's one wake-up bus: every producer signals it, every runner listens on it. */
  wakeups: Wakeups;
  tasks: TaskQueue;
  deliveries: DeliveryQueue;
  /** Conversation turns (API messages, SMS); its worker runs in worker processes. */
  turns: TurnQueue;
  /** Releases of deleted organizations' and agents' numbers; its worker runs in worker processes. */
  numberReleases: NumberReleaseQueue;
  /** The analyses after conversations; its worker runs in worker processes. */
  analyses: AnalysisQueue;
  /** Activity-record export windows; its worker (window maker and shipper) runs in worker processes. */
  adr: AdrQueue;
  /** Agent test runs; its worker runs in worker processes. */
  agentTests: AgentTestQueue;
  sip?: SipWorker;
  services: Services;
  /** The process's metrics (hand them to buildApp, which serves /metrics). */
  metrics: Metrics;
  /** The voice activity detectors of this process's calls (CALLPLANE_VAD). */
  vad: SpeechEngines['vad'];
  /** Hears other processes' queue notifications (PostgreSQL); worker processes call it once. */
  listen(): Promise<void>;
  /** Stops the listener (the queues and SIP are stopped by whoever started them, in their order). */
  close(): Promise<void>;
}

export function createPlatform(deps: PlatformDeps): Platform {
  // Each piece is built after what it needs, in this order (docs/architecture.md, "Construction").
  const { config, database, box, log } = deps;
  const { db } = database;
  const wakeups = new Wakeups();
  const metrics = deps.metrics ?? createMetrics();
  const child = (component: string) => log?.child({ component });
  const { carrierOptions, ...taskSettings } = deps.tasks ?? {};
  const policy = policyFromConfig(config);
  const wakeDeliveries = () => wakeups.emit(DELIVERIES);
  // The producers of the turn and analysis queues: conversations (built before those queues, which
  // run on what is built on conversations) queue turns and analyses with them; the queues, built
  // last, take the same producers.
  const turnsDue = turnProducer(wakeups);
  const analysesDue = analysisProducer(wakeups);
  // Agent test runs: the service starts them with this producer; their queue, built last, runs them.
  const agentTestsDue = agentTestProducer(wakeups);
  // The task queue comes first: the task service (and through it the agent's tools) adds tasks to
  // it, the Twilio callbacks settle them. What its worker does with a claimed task, its carrier, is
  // joined last (taskWorker, below): a SIP call talks through the agent, which is built on the task service.
  const taskQueue = createTaskQueue({ database, config, wakeups, allowance: planAllowance(cachedEntitlements(db)), log: child('tasks'), ...taskSettings });
  const deliveries = deliveryQueue({ database, config, box, wakeups, outbox: taskRepo, log: child('deliveries'), ...deps.deliveries });
  const adr = adrQueue({ database, config, box, wakeups, log: child('adr'), ...deps.adr });
  const models = modelsService({ config, db, box, policy, log: child('models') });
  const billingSystems = billingSystemService({ db, box, config });
  const processorSubs = processorSubscriptions({
    db, systems: billingSystems, defaultPlanId: config.defaultPlanId, wakeTasks: () => taskQueue.notify(), log: child('billing'),
  });

  const base = {
    accounts: accountService({ db, box, config, policy, wakeTasks: () => taskQueue.notify(), wakeNumberReleases: () => wakeups.emit(NUMBER_RELEASES) }),
    tokens: tokenService({ db, oneTimeTokenTtlSeconds: config.oneTimeTokenTtlSeconds }),
    tokenLookup: tokenLookup(db),
    members: memberService({ db }),
    numbering: numberingService({ db, box, heldElsewhere: (orgId, number) => numberTakenElsewhere(db, orgId, number, { providers: false }) }),
    numbers: numbersService({ db, box, config, carrierOptions, webhooks: {
      voiceUrl: config.publicUrl + TWILIO_INCOMING_PATH,
      voiceStatusUrl: config.publicUrl + TWILIO_INCOMING_STATUS_PATH,
      smsUrl: config.publicUrl + TWILIO_SMS_PATH,
    } }),
    tasks: taskService({ db, queue: taskQueue, refreshStatistics: (tables) => database.refreshStatistics(tables), log: child('tasks') }),
    relays: relayService({ db, box, config, policy, notify: wakeDeliveries }),
    subscriptions: subscriptionService({ db, box, policy, notify: wakeDeliveries }),
    knowledge: knowledgeService({ db }),
    sip: sipService({
      db, box, policy,
      wake: () => wakeups.emit(SIP_REGISTRATIONS),
      wakeDeliveries,
      workerWaitMs: deps.sipWorkerWaitMs,
      ingress: { enabled: config.sipEnabled, host: config.sipAdvertiseHost ?? defaultAdvertiseHost(config.sipHost), port: config.sipPort },
    }),
    context: contextService({ db }),
    compliance: complianceService({ db }),
    integrations: integrationService({ db, box }),
    // Publishing asks the agent tests' gate (a port: agent-tests is above agents).
    // and a change of its calling window looks again at the tasks it holds (tasks is above agents).
    agents: agentService({ db, wakeDeliveries, models, publishGate: testPublishGate(), heldTasks: agentHeldTasks(taskQueue) }),
    models,
    speechProviders: speechProvidersService({
      db, box, policy, processKeys: processSpeechKeys(config.speech), speech: config.speech, log: child('speech-providers'),
    }),
    billing: billingService({ db, config, wakeTasks: () => taskQueue.notify(), systems: billingSystems, processors: processorSubs }),
    billingSystems,
    processorSubscriptions: processorSubs,
    usage: usageService({ db, wakeTasks: () => taskQueue.notify() }),
    adr: adrService({ db, box, policy }),
  };
  const conversations = conversationService({ db, config, policy, agents: base.agents, wakeDeliveries, turns: turnsDue, analyses: analysesDue });
  /** Webhook actions' requests to customer URLs (closed with the platform). */
  const actionHttp = guardedDispatcher(policy, { log: child('actions') });
  // The one turn runner of the process: queued turns (the turn queue's worker), web chat and
  // spoken (Twilio) turns inline.
  const runner = turnRunner({
    db, models: base.models, knowledge: base.knowledge, context: base.context, tasks: base.tasks,
    http: actionHttp, messageSecret: (orgId) => messageSecret(db, box, orgId), now: Date.now,
  });
  // The text of a text task without content, written by its agent's model.
  const textTasks = textTaskWriter({ db, models: base.models, context: base.context, conversations, now: Date.now });
  // The process's speech engines (offline by default: pocketsphinx and espeak-ng), for every call whose audio we carry.
  const speech = speechEngines(config.speech, child('vad'));
  // The calls' own lines once synthesized (the greeting first), for every call of this process (docs/voice.md).
  const greetings = new GreetingCache();
  // Every spoken turn's latency: stored with its reply, observed at /metrics, logged past the budget.
  const latency = turnLatencies({ db, metrics, budgetMs: config.speech.turnLatencyBudgetMs, log: child('voice'), now: Date.now });
  const recordings = recordingStore({
    db, dir: path.join(config.dataDir, 'recordings'), retentionDays: config.recordingRetentionDays,
    maxSeconds: config.recordingMaxSeconds, log: child('recordings'),
  });
  // The turn time limit of every spoken path (the call policy's, unless a test shortens it).
  const turnLimitMs = deps.voiceTurnTimeoutMs ?? VOICE_TURN_TIMEOUT_MS;
  // Streamed Twilio calls run their voice sessions in the process that holds the stream (api roles).
  const streams = mediaStreams({
    db, box, config, conversations, turns: runner, speech, greetings, speechKeys: base.speechProviders, carrierOptions, latency, turnTimeoutMs: turnLimitMs,
    grammar: deps.voiceGrammar, now: Date.now, log: child('media-streams'),
  });
  const gather = twilioVoice({
    db, box, config, conversations, turns: runner, turnTimeoutMs: turnLimitMs, now: Date.now, latency,
    streamTwiml: (conversationId: string, callSid: string) => streams.twiml('start', conversationId, callSid), defaultVoice: config.twilioVoice,
  });
  const amd = twilioAmd({ db, box, config, carrierOptions, conversations, now: Date.now });
  // The text channel: texts to our numbers (checked by the twilio module) and text tasks' texts.
  const sms = smsService({ db, config, conversations, turns: turnsDue, wakeDeliveries });
  // One organization's inline model turns (the staging test chat and the web chat page together).
  // Agent tests' text mode: a simulated caller and the agent, through the one turn runner.
  const testText = textRunner({ db, models: base.models, conversations, turns: runner, now: Date.now });
  // A call task on the SIMULATED carrier: the same simulated caller talks with the agent (docs/tasks.md, "Simulated calls").
  const simulatedCallTalk = simulatedCalls({ db, models: base.models, conversations, turns: runner, now: Date.now, ...deps.simulatedCalls });
  const inlineLimits = new InlineTurnLimits({ concurrent: config.inlineTurnsConcurrent, perMinute: config.inlineTurnsPerMinute });
  // Agent tests' voice mode: a real call into the agent over a loopback SIP leg (the agent's side is
  // the voice module's test call; the caller's, the agent tests' own), on the process's RTP range.
  const rtpRange = { portMin: config.rtpPortMin, portMax: config.rtpPortMax };
  const testVoice = voiceRunner({
    db, models: base.models, conversations, stt: speech.stt, tts: speech.tts, ports: callerPorts(rtpRange), now: Date.now,
    answerer: voiceTestCalls({
      db, conversations, turns: runner, ...speech, greetings, speechKeys: base.speechProviders, latency, turnTimeoutMs: turnLimitMs, now: Date.now, log: child('agent-tests'),
      ports: new PortPool(rtpRange), maxDurationMs: config.callMaxSeconds * 1000,
    }),
  });
  const services: Services = {
    ...base,
    conversations,
    // A reseller's overview across its organizations: the usage service's figures with the analyses' outcomes.
    overview: overviewService({ db, usage: base.usage }),
    webChat: webChatService({ db, box, agents: base.agents, conversations, turns: runner, wakeDeliveries, inlineLimits, log: child('web-chat') }),
    stagingChat: stagingChatService({ db, agents: base.agents, conversations, turns: runner, wakeDeliveries, inlineLimits, log: child('staging-chat') }),
    sms,
    twilioTexts: twilioTexts({ db, box, config, sms, relays: base.relays }),
    twilioVoice: gather,
    mediaStreams: streams,
    // The console's "talk to this agent": the same voice sessions, over the browser's WebSocket.
    browserCalls: browserCalls({
      db, box, agents: base.agents, models: base.models, conversations, turns: runner, speech, greetings, speechKeys: base.speechProviders, latency,
      turnTimeoutMs: turnLimitMs, grammar: deps.voiceGrammar, now: Date.now, log: child('browser-calls'),
    }),
    // Calls' conversations: the gather path's, and Twilio's answering-machine verdicts rendered on the call.
    twilioCallbacks: twilioCallbacks({
      db, box, config, queue: taskQueue,
      calls: {
        answer: (task, callSid) => gather.answer(task, callSid),
        ended: (task, callSid, status) => gather.ended(task, callSid, status),
        answeredBy: (task, callSid, value, log) => amd.answeredBy(task, callSid, value, log),
      },
    }),
    voiceCalls: voiceCalls({
      db, conversations, turns: runner, ...speech, greetings, speechKeys: base.speechProviders, latency, turnTimeoutMs: turnLimitMs, now: Date.now, log: child('voice'), metrics,
      background: backgroundAudio({ http: actionHttp, policy, now: Date.now }),
      recording: config.callRecording ? { store: recordings, maxMs: config.recordingMaxSeconds * 1000 } : undefined,
      // A message left on a voicemail is recorded even when calls are not (docs/voice.md, Voicemail).
      messageRecording: { store: recordings, maxMs: config.recordingMaxSeconds * 1000 },
    }),
    recordings,
    history: historyService({ db, agents: base.agents, recordings }),
    live: liveFeed({
      db, listen: (channel, o) => database.listen(channel, o), lookup: base.tokenLookup,
      maxStreams: config.liveStreamsMax, perToken: config.liveStreamsPerToken, perAccount: config.liveStreamsPerAccount,
      perOrganization: config.liveStreamsPerOrganization, perReseller: config.liveStreamsPerReseller, startsPerMinute: config.liveStartsPerMinute,
      log: child('live'), ...deps.live,
    }),
    latency: latencyService({ db }),
    voices: voicesService({ tts: speech.tts, voices: speech.voices, now: Date.now }),
    vad: speech.vad,
    agentTests: agentTestService({ db, agents: base.agents, models: base.models, runs: agentTestsDue, runsPerOrg: config.agentTestRunsPerOrg }),
  };
  // The agent talks on SIP calls (the worker answers them, and the SIP carrier places them).
  const sip = deps.sip === false || deps.sip === undefined ? undefined
    : new SipWorker({ database, config, box, wakeups, log: child('sip'), voice: services.voiceCalls, ...deps.sip });
  const tasks = taskQueue.join(taskWorker({
    db, config, box, log: child('tasks'),
    carrierOptions: sip ? { ...carrierOptions, sip } : carrierOptions,
    // A text task's text goes into the person's text conversation.
    textSent: (text) => services.sms.recordTextTask(text),
    // A text task without content: its agent writes the text (docs/tasks.md, "Text tasks").
    composeText: (row, signal) => textTasks.compose(row, signal),
    // The agent's AI disclosure starts each text task's text (docs/campaigns.md).
    textDisclosure: async (row) => {
      const agent = await accountRepo.findById(db, row.account_id);
      return agent ? (await services.agents.liveConfig(agent)).aiDisclosure : '';
    },
    // The conversation an attempt held, recorded in the task's attempt log (docs/campaigns.md).
    conversationOf: (taskId, since) => conversationRepo.latestOfTask(db, taskId, since),
    ...(config.simulatedCallConversations ? { simulatedCall: async (row, signal) => ({ ...await simulatedCallTalk.run(row, signal) }) } : {}),
    // What a call does when a voicemail answers (the call policy's plan for the task and its
    // agent), and who decides it on the path the call will take: a Twilio call streams or gathers
    // as its organization does; any other carrier's call is one whose audio we carry (SIP).
    voicemailPlan: async (row, carrier) => placedCallVoicemail({ db, conversations }, row, carrier === TWILIO ? await gather.callPath(row.org_id) : 'sip'),
  }));
  const turns = turnQueue({
    database, config, wakeups, producer: turnsDue, log: child('turns'), ...deps.turns,
    handler: {
      db,
      conversations,
      turns: runner,
      textCarrier: (orgId) => chooseCarrier({ db, box, config, carrierOptions, sipCallPlan: (id) => sipCallPlan(db, box, id) }, orgId, 'text'),
      wakeDeliveries,
      log: child('turns'),
    },
  });
  const analyses = analysisQueue({
    database, config, wakeups, producer: analysesDue, log: child('analyses'), ...deps.analyses,
    handler: { db, models: base.models, conversations, wakeDeliveries, log: child('analyses') },
  });

  const agentTests = agentTestQueue({
    database, config, wakeups, producer: agentTestsDue, log: child('agent-tests'), ...deps.agentTests,
    handler: { db, models: base.models, text: testText, voice: testVoice, log: child('agent-tests') },
  });

  const { backoff: releaseBackoff, ...releaseSettings } = deps.numberReleases ?? {};
  const numberReleases = numberReleaseQueue({
    database, wakeups, log: child('number-releases'), ...releaseSettings,
    handler: { db, box, config, carrierOptions, backoff: releaseBackoff, log: child('number-releases') },
  });

  let listener: Listener | undefined;
  return {
    wakeups, tasks, deliveries, turns, numberReleases, analyses, adr, agentTests, sip, services, metrics, vad: speech.vad,
    async listen() {
      listener ??= await listenForWakeups(database, wakeups, child('listener'));
    },
    async close() {
      await listener?.close();
      listener = undefined;
      await streams.close();
      await services.live.close();
      await Promise.all([actionHttp.close().catch(() => {}), services.models.close(), services.speechProviders.close(), speech.vad.close()]);
    },
  };
}
