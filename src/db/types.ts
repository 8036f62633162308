// Row types of every table, as Kysely sees them. Booleans are stored as 0/1 integers on
// both engines (better-sqlite3 cannot bind JS booleans); times are unix milliseconds.
import type { ColumnType, Generated, Insertable, Kysely, Selectable, Transaction, Updateable } from 'kysely';

export type AccountKind = 'partner' | 'reseller' | 'organization' | 'agent';
type Flag = number;

export interface AccountsTable {
  id: Generated<number>;
  kind: AccountKind;
  parent_id: number | null;
  partner_id: number | null;
  reseller_id: number | null;
  org_id: number | null;
  name: string;
  email: string | null;
  external_account_id: string | null;
  external_billing_id: string | null;
  product_plan_id: string | null;
  offered_product_plan_id: string | null;
  sell_plan_id: string | null;
  product_plan_term: string | null;
  vida_premium: ColumnType<Flag, Flag | undefined, Flag>;
  sms_enabled: ColumnType<Flag, Flag | undefined, Flag>;
  sms_brand_id: string | null;
  sms_campaign_id: string | null;
  hipaa_setting: string | null;
  hipaa_enabled_default: ColumnType<Flag, Flag | undefined, Flag>;
  org_account_type: string | null;
  active: ColumnType<Flag, Flag | undefined, Flag>;
  onboarding_complete: ColumnType<Flag, Flag | undefined, Flag>;
  subscribed: ColumnType<Flag, Flag | undefined, Flag>;
  billing_id: string | null;
  billing_subscription_id: string | null;
  canceled_at: number | null;
  voice_minutes_current: ColumnType<number, number | undefined, number>;
  voice_minutes_previous: ColumnType<number, number | undefined, number>;
  voice_minutes_all_time: ColumnType<number, number | undefined, number>;
  messages_current: ColumnType<number, number | undefined, number>;
  messages_previous: ColumnType<number, number | undefined, number>;
  messages_all_time: ColumnType<number, number | undefined, number>;
  timezone: string | null;
  /** Organizations: where receiveMessage replies go by default, and the sealed secret that signs them. */
  message_webhook_url: ColumnType<string | null, string | null | undefined, string | null>;
  message_signing_secret: ColumnType<string | null, string | null | undefined, string | null>;
  /** JSON object of profile fields (firstName, businessName, …). */
  details: string;
  created_at: number;
  updated_at: number;
}

export interface TokensTable {
  id: Generated<number>;
  account_id: number;
  hash: string;
  prefix: string;
  type: 'admin' | 'one-time' | 'console';
  description: string;
  created_by: number | null;
  created_at: number;
  expires_at: number | null;
  used_at: number | null;
  /** A console session's origin: the token it was traded for (migration 0033; null otherwise). */
  origin_token_id: ColumnType<number | null, number | null | undefined, number | null>;
}

/** Issue 33 (0034-console-sessions): what only a console session has. */
export interface ConsoleSessionsTable {
  token_id: number;
  account_id: number;
  origin_prefix: string;
  origin_type: string;
  last_used_at: number;
}

export interface UsersTable {
  id: Generated<number>;
  account_id: number;
  email: string;
  role: string;
  permitted_account_ids: string;
  redirect_url: string | null;
  send_welcome_email: Flag;
  status: 'invited' | 'active';
  created_at: number;
  updated_at: number;
}

export interface NumberingProvidersTable {
  id: Generated<number>;
  org_id: number;
  provider_id: string;
  is_default: Flag;
  enabled: Flag;
  /** JSON of the non-secret settings. */
  config: string;
  /** AES-256-GCM sealed JSON of the secret settings. */
  secrets: string | null;
  created_at: number;
  updated_at: number;
}

export interface IntegrationsTable {
  id: Generated<number>;
  account_id: number;
  org_id: number | null;
  app_id: string;
  app_version: string;
  /** AES-256-GCM sealed JSON of appData: integrations carry API tokens. */
  app_data: string;
  created_at: number;
  updated_at: number;
}

/** A context note about one person, kept for the organization's agents (POST /api/v2/context). */
export interface ContextNotesTable {
  id: Generated<number>;
  org_id: number;
  /** E.164 number or lowercased username. */
  target: string;
  /** 1, 2, … per (org_id, target), unique. */
  seq: number;
  note: string;
  created_at: number;
}

export type SipTransportName = 'UDP' | 'TCP' | 'TLS';

/** An organization's registration with its PBX; one worker owns it at a time (lease_owner). */
export interface SipRegistrationsTable {
  id: Generated<number>;
  org_id: number;
  aor: string;
  /** sip:user@host[:port], host lowercased: unique across organizations. */
  aor_key: string;
  username: string;
  auth_username: string | null;
  /** Sealed. */
  password: string;
  realm: string | null;
  /** The realm the registrar challenged with when it last accepted us (0033): a call's challenge must name it. */
  challenge_realm: ColumnType<string | null, string | null | undefined, string | null>;
  proxy: string | null;
  port: number | null;
  transport: SipTransportName;
  subscribe: ColumnType<Flag, Flag | undefined, Flag>;
  version: ColumnType<number, number | undefined, number>;
  attempted_version: ColumnType<number, number | undefined, number>;
  registered: ColumnType<Flag, Flag | undefined, Flag>;
  last_code: number | null;
  last_reason: string | null;
  last_error: string | null;
  expires_at: number | null;
  last_attempt_at: number | null;
  next_attempt_at: number | null;
  contact: string | null;
  /** Presence of the AOR when `subscribe` (migration 0008): the subscription's state and what the NOTIFYs said. */
  presence_subscription: ColumnType<'active' | 'pending' | 'terminated' | 'failed' | null, 'active' | 'pending' | 'terminated' | 'failed' | null | undefined, 'active' | 'pending' | 'terminated' | 'failed' | null>;
  presence_state: ColumnType<'open' | 'closed' | null, 'open' | 'closed' | null | undefined, 'open' | 'closed' | null>;
  presence_code: ColumnType<number | null, number | null | undefined, number | null>;
  presence_reason: ColumnType<string | null, string | null | undefined, string | null>;
  presence_updated_at: ColumnType<number | null, number | null | undefined, number | null>;
  deleting: ColumnType<Flag, Flag | undefined, Flag>;
  lease_owner: string | null;
  lease_expires_at: number | null;
  created_at: number;
  updated_at: number;
}

export interface SipIpWhitelistTable {
  id: Generated<number>;
  org_id: number;
  /** Normalised address or CIDR range. */
  ip: string;
  label: string;
  created_at: number;
}

export interface SipOutboundRoutesTable {
  id: Generated<number>;
  org_id: number;
  route: string;
  route_key: string;
  host: string;
  port: number | null;
  transport: SipTransportName;
  proxy_host: string | null;
  proxy_port: number | null;
  /** The route's own digest credentials (0035-sip-route-credentials): user, and the password sealed. */
  username: ColumnType<string | null, string | null | undefined, string | null>;
  password: ColumnType<string | null, string | null | undefined, string | null>;
  created_at: number;
}

export interface SipCapturesTable {
  id: string;
  org_id: number;
  call_id: string;
  direction: 'in' | 'out';
  transport: string;
  /** address:port of the peer ([v6]:port). */
  remote: string;
  local: string;
  message: string;
  created_at: number;
}

export interface SipEventsTable {
  id: string;
  org_id: number;
  aor: string;
  type: 'registration.registered' | 'registration.failed' | 'registration.unregistered' | 'registration.presence';
  /** JSON. */
  payload: string;
  created_at: number;
}

export interface AgentsTable {
  account_id: number;
  org_id: number;
  /** JSON: the agent configuration of each slot. */
  staging: string;
  live: string;
  published_at: number | null;
  created_at: number;
  updated_at: number;
}

export interface AgentVersionsTable {
  id: Generated<number>;
  account_id: number;
  version_id: number;
  title: string;
  /** JSON. */
  snapshot: string;
  created_at: number;
  updated_at: number;
}

/** An agent's public slug (docs/agents.md "Agent URLs"); `slug` is unique across the deployment. */
export interface AgentUrlsTable {
  account_id: number;
  slug: string;
  created_at: number;
  updated_at: number;
}

export interface DB {
  agents: AgentsTable;
  agent_versions: AgentVersionsTable;
  agent_urls: AgentUrlsTable;
  accounts: AccountsTable;
  tokens: TokensTable;
  console_sessions: ConsoleSessionsTable;
  users: UsersTable;
  numbering_providers: NumberingProvidersTable;
  integrations: IntegrationsTable;
  context_notes: ContextNotesTable;
}

export type Db = Kysely<DB>;
export type Executor = Kysely<DB> | Transaction<DB>;
export type Dialect = 'sqlite' | 'postgres';

export type AccountRow = Selectable<AccountsTable>;
export type NewAccount = Insertable<AccountsTable>;
export type AccountUpdate = Updateable<AccountsTable>;
export type TokenRow = Selectable<TokensTable>;
export type UserRow = Selectable<UsersTable>;

/** The ancestor column that holds the id of an account of this kind (each row names itself too). */
export const ANCESTOR_COLUMN = {
  partner: 'partner_id',
  reseller: 'reseller_id',
  organization: 'org_id',
  agent: 'id',
} as const satisfies Record<AccountKind, string>;

/** The suspended (inactive) account that puts an account out of service: itself or an ancestor. */
export interface Suspended { id: number; kind: AccountKind }

/** A token as authentication reads it: its row's checks, its account, and whether that account is out of service. */
export type TokenWithAccount = {
  token: Pick<TokenRow, 'id' | 'type' | 'expires_at' | 'used_at'>;
  account: AccountRow;
  /** The account itself or the highest of its ancestors that is suspended, or null. */
  suspended: Suspended | null;
};
export type NumberingProviderRow = Selectable<NumberingProvidersTable>;
export type IntegrationRow = Selectable<IntegrationsTable>;
export type ContextNoteRow = Selectable<ContextNotesTable>;

// --- Tasks and the queue (migration 0002-tasks) -------------------------------------------

/** The queue states shared by every queue table (tasks, webhook deliveries). */
export const QUEUE_STATES = ['pending', 'running', 'finished', 'failed', 'canceled'] as const;
export type QueueState = typeof QUEUE_STATES[number];
export type TaskType = 'call' | 'text' | 'ping';

export interface TasksTable {
  /** `tsk_` + time-sortable id (src/lib/ids.ts). */
  id: string;
  org_id: number;
  /** The agent that runs it. */
  account_id: number;
  type: TaskType;
  state: ColumnType<QueueState, QueueState | undefined, QueueState>;
  /** E.164. */
  target: string | null;
  context: string | null;
  greeting: string | null;
  /** The body of a text. */
  content: string | null;
  /** Context for this task only (the agent operations' `taskContext`). */
  task_context: string | null;
  wait_to_greet: ColumnType<Flag, Flag | undefined, Flag>;
  /** JSON `{action, message}`: what this call does on a voicemail, over the agent's voicemailAction (migration 0030). */
  voicemail: ColumnType<string | null, string | null | undefined, string | null>;
  /** JSON of the caller's metadata. */
  meta: string | null;
  external_task_id: string | null;
  /** As requested (null = now). */
  scheduled_for: number | null;
  /** When it may next be claimed; moved by limits and retries. */
  run_at: number;
  /** Incremented by each claim. */
  attempt: ColumnType<number, number | undefined, number>;
  max_attempts: ColumnType<number, number | undefined, number>;
  lease_owner: string | null;
  lease_expires_at: number | null;
  cancel_requested_at: number | null;
  idempotency_key: string | null;
  request_hash: string | null;
  provider: string | null;
  provider_ref: string | null;
  /** JSON of the outcome (duration, status, latency for ping). */
  result: string | null;
  error: string | null;
  created_at: number;
  updated_at: number;
  started_at: number | null;
  finished_at: number | null;
  /** 1 while the task waits for its organization's concurrency, out of the due range (migration 0020). */
  parked: ColumnType<Flag, Flag | undefined, Flag>;
  /** While pending: why a limit holds it back (migration 0028); null otherwise. */
  held_reason: ColumnType<string | null, string | null | undefined, string | null>;
  /** JSON `{callingWindow, retryRules}`: the task's own campaign rules, over its agent's and organization's (migration 0041; docs/campaigns.md). */
  campaign: ColumnType<string | null, string | null | undefined, string | null>;
  /** JSON array of the task's call or text attempts: time, result, caller ID, conversation (migration 0041). */
  attempt_log: ColumnType<string | null, string | null | undefined, string | null>;
}

/** The outbox: one row per state change, written in the transaction that made it. */
export interface TaskEventsTable {
  id: string;
  org_id: number;
  task_id: string;
  type: 'task.pending' | 'task.running' | 'task.finished' | 'task.failed' | 'task.canceled' | 'task.retrying';
  /** JSON. */
  payload: string;
  created_at: number;
  /** 1 once the outbox dispatcher turned it into deliveries. */
  dispatched: ColumnType<Flag, Flag | undefined, Flag>;
}

export interface OrgTaskLimitsTable {
  org_id: number;
  /** JSON: businessHours, daily, concurrencyPerRun, cooldowns. */
  config: string;
  updated_at: number;
}

/** The counted semaphore for concurrencyPerRun: incremented at claim, decremented on every exit. */
export interface OrgSemaphoresTable {
  org_id: number;
  running: ColumnType<number, number | undefined, number>;
  /** concurrencyPerRun, copied here so the claim can skip full organizations in SQL. */
  max_running: ColumnType<number, number | undefined, number>;
}

/** Tasks of an organization by state, kept by every insert, transition and delete. */
export interface OrgTaskCountsTable {
  org_id: number;
  pending: ColumnType<number, number | undefined, number>;
  running: ColumnType<number, number | undefined, number>;
  finished: ColumnType<number, number | undefined, number>;
  failed: ColumnType<number, number | undefined, number>;
  canceled: ColumnType<number, number | undefined, number>;
}

/** What an organization used per local day and metric (migration 0025), kept as the records are written. */
export interface UsageDailyTable {
  org_id: number;
  /** YYYY-MM-DD in the organization's time zone when the record was written. */
  day: string;
  metric: string;
  n: number;
}

/** What an organization used per local month (YYYY-MM) and metric (migration 0028), beside usage_daily. */
export interface UsageMonthlyTable {
  org_id: number;
  month: string;
  metric: string;
  n: number;
}

/** Add-ons an organization bought (migration 0028); removed_at null while in force. */
export interface OrgAddonsTable {
  id: string;
  org_id: number;
  addon_id: string;
  /** JSON: the add-on as bought. */
  addon: string;
  subscription_id: string | null;
  period_start: number | null;
  period_end: number | null;
  added_at: number;
  added_by: number | null;
  removed_at: number | null;
  removed_by: number | null;
  /** Migration 0036: 'active' (counts while not removed), 'pending' (its processor checkout is not paid yet), 'abandoned' (the checkout ended unpaid; never counted). */
  state: Generated<string>;
  /** The processor it is paid through (null: granted without a checkout). */
  processor: string | null;
  billing_account_id: number | null;
  processor_subscription_id: string | null;
  checkout_session_id: string | null;
  term: string | null;
  success_url: string | null;
  cancel_url: string | null;
}

/** Billing periods an ancestor set for an organization (migration 0025), in ms. */
export interface BillingPeriodsTable {
  org_id: number;
  start_at: number;
  end_at: number;
  set_by: number | null;
  created_at: number;
  updated_at: number;
}

export interface OrgDailyCountersTable {
  org_id: number;
  /** YYYY-MM-DD in the organization's time zone. */
  day: string;
  /** calls, texts, tasks, and finished/failed/canceled per type. */
  kind: string;
  n: ColumnType<number, number | undefined, number>;
}

export interface TargetCooldownsTable {
  org_id: number;
  kind: string;
  target: string;
  last_at: number;
}

export interface WebhookRelaysTable {
  id: Generated<number>;
  org_id: number;
  type: string;
  /** The secret part of the ingress URL. */
  ingress_id: string;
  url: string;
  timeout_ms: number;
  /** Sealed JSON of [{name: value}]. */
  headers: string;
  /** JSON array of integers. */
  success_status_codes: string;
  /** Sealed: our Standard Webhooks secret (whsec_…). */
  signing_secret: string;
  /** Sealed: the provider's signing secret or credentials, when the relay holds them. */
  provider_secret: string | null;
  enabled: ColumnType<Flag, Flag | undefined, Flag>;
  created_at: number;
  updated_at: number;
}

export interface RelayEventsTable {
  id: string;
  relay_id: number;
  org_id: number;
  provider_event_id: string | null;
  content_type: string | null;
  /** JSON object of the request headers kept. */
  headers: string;
  /** base64 of the raw body. */
  body: string;
  received_at: number;
}

export interface WebhooksTable {
  id: Generated<number>;
  org_id: number;
  url: string;
  label: string | null;
  type: string;
  /** Sealed: the Standard Webhooks secret (whsec_…). */
  signing_secret: string;
  created_at: number;
}

export interface WebhookDeliveriesTable {
  id: string;
  org_id: number;
  /** 'message': an agent's reply to receiveMessage, sent to target_url with the organization's message secret. */
  kind: 'relay' | 'webhook' | 'message';
  relay_id: number | null;
  relay_event_id: string | null;
  webhook_id: number | null;
  /** Stable across retries and replays (webhook-id). */
  event_id: string;
  event_type: string | null;
  /** JSON payload (subscriptions); relays send the stored raw body. */
  payload: string | null;
  state: ColumnType<QueueState, QueueState | undefined, QueueState>;
  run_at: number;
  attempt: ColumnType<number, number | undefined, number>;
  max_attempts: ColumnType<number, number | undefined, number>;
  lease_owner: string | null;
  lease_expires_at: number | null;
  last_status: number | null;
  last_error: string | null;
  created_at: number;
  updated_at: number;
  finished_at: number | null;
  target_url: ColumnType<string | null, string | null | undefined, string | null>;
}

export interface DeliveryAttemptsTable {
  id: Generated<number>;
  delivery_id: string;
  attempt: number;
  started_at: number;
  duration_ms: number;
  status_code: number | null;
  error: string | null;
  response_excerpt: string | null;
  next_attempt_at: number | null;
}

export interface DB {
  webhook_relays: WebhookRelaysTable;
  relay_events: RelayEventsTable;
  webhooks: WebhooksTable;
  webhook_deliveries: WebhookDeliveriesTable;
  delivery_attempts: DeliveryAttemptsTable;
  tasks: TasksTable;
  task_events: TaskEventsTable;
  org_task_limits: OrgTaskLimitsTable;
  org_semaphores: OrgSemaphoresTable;
  org_daily_counters: OrgDailyCountersTable;
  org_task_counts: OrgTaskCountsTable;
  usage_daily: UsageDailyTable;
  usage_monthly: UsageMonthlyTable;
  org_addons: OrgAddonsTable;
  billing_periods: BillingPeriodsTable;
  target_cooldowns: TargetCooldownsTable;
  sip_registrations: SipRegistrationsTable;
  sip_ip_whitelist: SipIpWhitelistTable;
  sip_outbound_routes: SipOutboundRoutesTable;
  sip_captures: SipCapturesTable;
  sip_events: SipEventsTable;
}

export type TaskRow = Selectable<TasksTable>;
export type NewTask = Insertable<TasksTable>;
export type TaskEventRow = Selectable<TaskEventsTable>;
export type WebhookRelayRow = Selectable<WebhookRelaysTable>;
export type RelayEventRow = Selectable<RelayEventsTable>;
export type WebhookRow = Selectable<WebhooksTable>;
export type WebhookDeliveryRow = Selectable<WebhookDeliveriesTable>;
export type DeliveryAttemptRow = Selectable<DeliveryAttemptsTable>;
export type SipRegistrationRow = Selectable<SipRegistrationsTable>;
export type SipIpWhitelistRow = Selectable<SipIpWhitelistTable>;
export type SipOutboundRouteRow = Selectable<SipOutboundRoutesTable>;
export type SipCaptureRow = Selectable<SipCapturesTable>;
export type SipEventRow = Selectable<SipEventsTable>;

// --- Knowledge bases (migration 0010-knowledge) ----------------------------------------------

export type KbDocumentFormat = 'text' | 'markdown' | 'html' | 'pdf';

export interface KnowledgeBasesTable {
  /** `kb_` + time-sortable id (src/lib/ids.ts). */
  id: string;
  org_id: number;
  name: string;
  description: ColumnType<string, string | undefined, string>;
  created_at: number;
  updated_at: number;
}

export interface KbDocumentsTable {
  /** `doc_` + time-sortable id. */
  id: string;
  kb_id: string;
  org_id: number;
  name: string;
  format: KbDocumentFormat;
  /** Size of the upload. */
  bytes: number;
  /** Characters of the extracted text. */
  characters: number;
  chunks: number;
  created_at: number;
}

/** A piece of a document's text; indexed by FTS5 (SQLite) or its `tsv` column (PostgreSQL). */
export interface KbChunksTable {
  id: Generated<number>;
  document_id: string;
  kb_id: string;
  org_id: number;
  /** 0-based order in its document. */
  position: number;
  content: string;
}

export interface DB {
  knowledge_bases: KnowledgeBasesTable;
  kb_documents: KbDocumentsTable;
  kb_chunks: KbChunksTable;
}

export type KnowledgeBaseRow = Selectable<KnowledgeBasesTable>;
export type KbDocumentRow = Selectable<KbDocumentsTable>;

// Conversations (migration 0013).
/** `test`: the staging test chat's sessions (docs/conversations.md), kept out of customer views and billed usage. */
/** `simulated`: a call task's call on the SIMULATED carrier, talked by a simulated caller (docs/tasks.md). */
export type ConversationChannel = 'api' | 'sms' | 'voice' | 'web' | 'sip' | 'test' | 'simulated';
export type ConversationOutcome = 'completed' | 'ended_by_agent' | 'transferred' | 'no_response' | 'hung_up' | 'failed' | 'voicemail';
/** Who answered an outbound call (docs/voice.md, Voicemail). */
export type AnsweredBy = 'human' | 'machine' | 'unknown';
export type MessageDirection = 'inbound' | 'outbound' | 'tool';

export interface ConversationRoomsTable {
  id: Generated<number>;
  org_id: number;
  /** The agent account that talks in this room. */
  account_id: number;
  /** E.164, `web:<visitor>` or an API sourceAddress. */
  counterpart: string;
  /** `test`: a staging test chat's room (kept out of the inbox by default). */
  counterpart_kind: 'phone' | 'web' | 'address' | 'test';
  display_name: string | null;
  last_message: string | null;
  last_message_at: number;
  unread: ColumnType<number, number | undefined, number>;
  junk: ColumnType<Flag, Flag | undefined, Flag>;
  junk_reason: string | null;
  /** The organization's own decision; null: the junk rules decide. */
  junk_override: Flag | null;
  created_at: number;
  updated_at: number;
}

export interface ConversationsTable {
  id: string;
  room_id: number;
  org_id: number;
  account_id: number;
  channel: ConversationChannel;
  direction: 'inbound' | 'outbound';
  counterpart: string;
  agent_version: number | null;
  engine: 'model' | 'simulated';
  provider: string | null;
  model: string | null;
  task_id: string | null;
  carrier_ref: string | null;
  started_at: number;
  last_activity_at: number;
  ended_at: number | null;
  outcome: ConversationOutcome | null;
  outcome_detail: string | null;
  duration_ms: number | null;
  messages_in: ColumnType<number, number | undefined, number>;
  messages_out: ColumnType<number, number | undefined, number>;
  model_calls: ColumnType<number, number | undefined, number>;
  tokens_in: ColumnType<number, number | undefined, number>;
  tokens_out: ColumnType<number, number | undefined, number>;
  /** JSON: the channel's state. */
  state: ColumnType<string, string | undefined, string>;
  /** An inbound call's caller ID was vouched for (1) or not (0); null: no caller to verify (migration 0022). */
  caller_verified: Flag | null;
  /** Who answered an outbound call, once decided (migration 0030); null: not decided, or not a call we screened. */
  answered_by: ColumnType<AnsweredBy | null, AnsweredBy | null | undefined, AnsweredBy | null>;
  answered_by_at: ColumnType<number | null, number | null | undefined, number | null>;
  /** The API path of the recording holding the message left on a machine (contract voicemailRecording). */
  voicemail_recording: ColumnType<string | null, string | null | undefined, string | null>;
  created_at: number;
  updated_at: number;
}

export interface ConversationMessagesTable {
  id: string;
  conversation_id: string;
  room_id: number;
  org_id: number;
  direction: MessageDirection;
  text: string;
  source: ConversationChannel;
  status: 'received' | 'pending' | 'success' | 'failed' | 'interrupted';
  /** JSON array of {type, url}. */
  attachments: ColumnType<string, string | undefined, string>;
  /** JSON: a tool call {name, arguments, result, refused}, or the message's context and metadata. */
  data: string | null;
  at: number;
}

export interface ConversationTurnsTable {
  id: string;
  org_id: number;
  conversation_id: string;
  message_id: string;
  /** JSON ReplyTarget. */
  reply_to: string;
  /** JSON: the model loop's saved state while an automation request is outstanding. */
  resume: string | null;
  state: ColumnType<QueueState, QueueState | undefined, QueueState>;
  run_at: number;
  attempt: ColumnType<number, number | undefined, number>;
  max_attempts: ColumnType<number, number | undefined, number>;
  lease_owner: string | null;
  lease_expires_at: number | null;
  last_error: string | null;
  created_at: number;
  updated_at: number;
  finished_at: number | null;
}

export interface AutomationRequestsTable {
  id: string;
  org_id: number;
  turn_id: string;
  conversation_id: string;
  tool_call_id: string;
  action: string;
  state: 'waiting' | 'answered' | 'expired';
  /** JSON responseData. */
  response: string | null;
  created_at: number;
  expires_at: number;
  answered_at: number | null;
}

/** What a turn's tool call did, recorded so a retry does not do it again (migration 0022). */
export interface ToolEffectsTable {
  /** The turn: its queue id, or a key of one inline run. */
  turn_key: string;
  /** The call's place in the turn: `<model answer>.<position>` (turn.ts says why). */
  call_key: string;
  org_id: number;
  conversation_id: string;
  tool: string;
  tool_call_id: string;
  /**
   * 'started': the effect may have happened, its answer is not recorded; 'refused': nothing was done;
   * 'mocked': an agent test's turn, answered by the scenario's mock (or "not mocked"), nothing was done.
   */
  state: 'started' | 'done' | 'refused' | 'mocked';
  /** JSON: what the model was told. */
  outcome: string | null;
  created_at: number;
  updated_at: number;
}

export interface LlmProvidersTable {
  id: Generated<number>;
  org_id: number;
  name: string;
  base_url: string;
  /** Sealed. */
  api_key: string | null;
  /** JSON array of model ids. */
  models: ColumnType<string, string | undefined, string>;
  created_at: number;
  updated_at: number;
}

/** An organization's own key for a speech vendor (migration 0037; src/modules/speech-providers/). */
export interface SpeechProvidersTable {
  org_id: number;
  /** src/speech/vendors.ts SPEECH_VENDORS. */
  vendor: string;
  /** Sealed (Google: a service account's JSON key). */
  api_key: string;
  /** Null: the vendor's own (SPEECH_VENDOR_URLS). */
  base_url: string | null;
  enabled: ColumnType<Flag, Flag | undefined, Flag>;
  created_at: number;
  updated_at: number;
}

/**
 * A conversation's analysis after it ended (migration 0029): a queue job and its result, keyed by
 * the conversation's id (src/modules/conversations/analysis.ts).
 */
export interface ConversationAnalysesTable {
  id: string;
  org_id: number;
  state: ColumnType<QueueState, QueueState | undefined, QueueState>;
  run_at: number;
  attempt: ColumnType<number, number | undefined, number>;
  max_attempts: ColumnType<number, number | undefined, number>;
  lease_owner: string | null;
  lease_expires_at: number | null;
  last_error: string | null;
  engine: 'model' | 'simulated' | 'facts' | null;
  provider: string | null;
  model: string | null;
  /** JSON: the validated answer. */
  answer: string | null;
  invalid_answers: ColumnType<number, number | undefined, number>;
  model_calls: ColumnType<number, number | undefined, number>;
  tokens_in: ColumnType<number, number | undefined, number>;
  tokens_out: ColumnType<number, number | undefined, number>;
  created_at: number;
  updated_at: number;
  finished_at: number | null;
}

/** How long each step of a spoken turn took, per reply (migration 0031); null where the path cannot see the step. */
export interface TurnLatenciesTable {
  message_id: string;
  org_id: number;
  account_id: number;
  conversation_id: string;
  path: 'sip' | 'stream' | 'gather';
  stt_engine: string | null;
  llm_engine: string | null;
  tts_engine: string | null;
  at: number;
  endpoint_ms: number | null;
  stt_ms: number | null;
  llm_first_token_ms: number | null;
  tts_first_audio_ms: number | null;
  total_ms: number | null;
}

export interface DB {
  conversation_rooms: ConversationRoomsTable;
  conversation_analyses: ConversationAnalysesTable;
  conversations: ConversationsTable;
  conversation_messages: ConversationMessagesTable;
  conversation_turns: ConversationTurnsTable;
  automation_requests: AutomationRequestsTable;
  tool_effects: ToolEffectsTable;
  llm_providers: LlmProvidersTable;
  speech_providers: SpeechProvidersTable;
  turn_latencies: TurnLatenciesTable;
}

export type RoomRow = Selectable<ConversationRoomsTable>;
export type ConversationRow = Selectable<ConversationsTable>;
export type MessageRow = Selectable<ConversationMessagesTable>;
export type TurnRow = Selectable<ConversationTurnsTable>;
export type AnalysisRow = Selectable<ConversationAnalysesTable>;
export type AutomationRequestRow = Selectable<AutomationRequestsTable>;
export type ToolEffectRow = Selectable<ToolEffectsTable>;
export type TurnLatencyRow = Selectable<TurnLatenciesTable>;
export type LlmProviderRow = Selectable<LlmProvidersTable>;
export type SpeechProviderRow = Selectable<SpeechProvidersTable>;

/** Shared rate-limit counters (src/db/rate-limit-counters.ts): one row per key, its current window. */
export interface RateLimitCountersTable {
  key: string;
  /** Unix ms; windows are aligned to multiples of their length, so every process agrees on them. */
  window_start: number;
  count: number;
}

export interface DB {
  rate_limit_counters: RateLimitCountersTable;
}

/** A phone number an organization holds (src/modules/numbers): bought at its provider, or brought (BYO). */
export interface PhoneNumbersTable {
  id: Generated<number>;
  /** E.164; unique: one holder at a time. */
  number: string;
  org_id: number;
  /** The agent account its calls and texts reach; null once that agent is deleted. */
  agent_id: number | null;
  kind: 'bought' | 'byo';
  /** 'reserved': being bought; 'attention': the purchase's outcome or the webhooks need an operator. */
  state: 'reserved' | 'active' | 'attention';
  /** The numbering provider it was bought at ('twilio', 'simulated'); null for BYO. */
  provider: string | null;
  /** Its reference there (Twilio's PN… sid). */
  provider_ref: string | null;
  simulated: ColumnType<number, number | undefined, number>;
  country: string | null;
  locality: string | null;
  region: string | null;
  /** JSON {voice, sms, mms}. */
  capabilities: string | null;
  last_error: string | null;
  created_at: number;
  updated_at: number;
}

/** Issue 25 (0032-number-releases): a deleted holder's number to release at its provider (a queue). */
/** Issue 36 (0038-agent-tests): an agent's test suite, its document as of its current version. */
export interface AgentTestSuitesTable {
  id: string;
  org_id: number;
  account_id: number;
  name: string;
  version: number;
  document: string;
  created_at: number;
  updated_at: number;
}

/** Every version of a suite's document (the current one included). */
export interface AgentTestSuiteVersionsTable {
  suite_id: string;
  version: number;
  document: string;
  created_at: number;
}

/** A run of a suite against one agent configuration: a durable job. */
export interface AgentTestRunsTable {
  id: string;
  org_id: number;
  account_id: number;
  suite_id: string;
  suite_version: number;
  target: 'staging' | 'live' | 'version';
  agent_version: number | null;
  config: string;
  config_hash: string;
  mode: 'text' | 'voice';
  iterations: number;
  concurrency: number;
  total: number;
  done: ColumnType<number, number | undefined, number>;
  passed: number | null;
  state: ColumnType<QueueState, QueueState | undefined, QueueState>;
  run_at: number;
  attempt: ColumnType<number, number | undefined, number>;
  max_attempts: ColumnType<number, number | undefined, number>;
  lease_owner: string | null;
  lease_expires_at: number | null;
  last_error: string | null;
  created_at: number;
  updated_at: number;
  finished_at: number | null;
}

/** One scenario iteration's verdict in a run. */
export interface AgentTestResultsTable {
  run_id: string;
  scenario: number;
  iteration: number;
  scenario_name: string;
  conversation_id: string | null;
  passed: number;
  checks: string;
  turns: number;
  error: string | null;
  /** 0044, JSON: a voice-mode result's measures (each turn's latency, barge-ins, what the caller heard); null in text mode. */
  voice: ColumnType<string | null, string | null | undefined, string | null>;
  created_at: number;
}

export interface NumberReleasesTable {
  id: string;
  number: string;
  org_id: number;
  agent_id: number | null;
  reason: string;
  provider: string;
  provider_ref: string | null;
  /** The provider's settings at the deletion: plain config (JSON) and sealed secrets. */
  provider_config: string | null;
  provider_secrets: string | null;
  state: ColumnType<QueueState, QueueState | undefined, QueueState>;
  run_at: number;
  attempt: ColumnType<number, number | undefined, number>;
  max_attempts: ColumnType<number, number | undefined, number>;
  lease_owner: string | null;
  lease_expires_at: number | null;
  last_error: string | null;
  released_at: number | null;
  created_at: number;
  updated_at: number;
  finished_at: number | null;
}

/** Issue 26 (0024-billing): a partner's or reseller's own catalog items, over the default catalog. */
export interface CatalogItemsTable {
  owner_id: number;
  /** 'pplan-…' (a plan) or 'addon-…' (an add-on). */
  item_id: string;
  kind: 'plan' | 'addon';
  /** JSON: the item as validated by src/modules/billing/catalog.ts. */
  body: string;
  created_at: number;
  updated_at: number;
}

/** An organization's subscriptions, current and past; processor columns are null without a billing system. */
export interface SubscriptionsTable {
  id: string;
  org_id: number;
  plan_id: string;
  /** JSON: the plan as subscribed. */
  plan: string;
  term: 'month' | 'year';
  /** past_due: a payment failed and the processor is retrying; unpaid: it gave up (docs/billing.md). */
  state: 'active' | 'replaced' | 'canceled' | 'pending' | 'past_due' | 'unpaid';
  period_start: number;
  period_end: number;
  started_at: number;
  ended_at: number | null;
  cancel_reason: string | null;
  cancel_details: string | null;
  canceled_by: number | null;
  checkout_type: string | null;
  success_url: string | null;
  cancel_url: string | null;
  processor: string | null;
  processor_customer_id: string | null;
  processor_subscription_id: string | null;
  checkout_session_id: string | null;
  /** 0026: the reseller or partner whose billing system the subscription runs on (null: none). */
  billing_account_id: number | null;
  created_at: number;
  updated_at: number;
}

/** 0026: a reseller's or partner's billing system (Stripe or Chargebee); keys sealed in `secrets`. */
export interface BillingSystemsTable {
  owner_id: number;
  type: 'stripe' | 'chargebee';
  site: string | null;
  webhook_username: string | null;
  secrets: string;
  verified_at: number;
  created_at: number;
  updated_at: number;
}

/** 0026: processor events handled, once each (the processor's event id). */
export interface BillingEventsTable {
  owner_id: number;
  processor: string;
  event_id: string;
  type: string;
  outcome: string;
  received_at: number;
}

export interface DB {
  phone_numbers: PhoneNumbersTable;
  number_releases: NumberReleasesTable;
  agent_test_suites: AgentTestSuitesTable;
  agent_test_suite_versions: AgentTestSuiteVersionsTable;
  agent_test_runs: AgentTestRunsTable;
  agent_test_results: AgentTestResultsTable;
  catalog_items: CatalogItemsTable;
  subscriptions: SubscriptionsTable;
  billing_systems: BillingSystemsTable;
  billing_events: BillingEventsTable;
}

export type PhoneNumberRow = Selectable<PhoneNumbersTable>;
export type NumberReleaseRow = Selectable<NumberReleasesTable>;
export type CatalogItemRow = Selectable<CatalogItemsTable>;
export type SubscriptionRow = Selectable<SubscriptionsTable>;
export type BillingSystemRow = Selectable<BillingSystemsTable>;
export type OrgAddonRow = Selectable<OrgAddonsTable>;

// --- Activity records (ADR) export (migration 0027-adr-export) ------------------------------

export type AdrProtocol = 'sftp' | 'ftps' | 'ftp';

/** One account's export: an organization's own records, or a reseller's or partner's for every organization below it. */
export interface AdrConfigsTable {
  account_id: number;
  protocol: AdrProtocol;
  host: string;
  port: number;
  username: string;
  /** Sealed. */
  password: string;
  /** The folder files go to; null: the account's home directory on the server. */
  path: string | null;
  /**
   * SFTP: the server's host key as OpenSSH prints it (`SHA256:<base64>`), or `trust-on-first-use`
   * until the first connection records it; null for FTP and FTPS (migration 0033-numbers-adr).
   */
  host_key_fingerprint: ColumnType<string | null, string | null | undefined, string | null>;
  rotation_minutes: number;
  enabled: Flag;
  /** The start of the next window to make (unix ms). */
  next_window_at: number;
  /** Its end: the window maker's due search reads it (a window is made once it has ended). */
  next_window_end: number;
  created_at: number;
  updated_at: number;
}

/** One rotation window of an account: a queue row, shipped exactly once. */
export interface AdrWindowsTable {
  /** `adrw_` + time-sortable id. */
  id: string;
  account_id: number;
  window_start: number;
  window_end: number;
  file_name: string;
  state: ColumnType<QueueState, QueueState | undefined, QueueState>;
  run_at: number;
  attempt: ColumnType<number, number | undefined, number>;
  max_attempts: number;
  lease_owner: string | null;
  lease_expires_at: number | null;
  records: number | null;
  bytes: number | null;
  /** sha256:<hex> of the file. */
  checksum: string | null;
  shipped_at: number | null;
  last_error: string | null;
  created_at: number;
  updated_at: number;
  finished_at: number | null;
}

/** The log of every attempt to ship a window, as the account reads it. */
export interface AdrShipmentsTable {
  id: string;
  account_id: number;
  window_id: string;
  attempt: number;
  outcome: 'shipped' | 'found' | 'failed';
  message: string;
  bytes: number | null;
  duration_ms: number;
  next_attempt_at: number | null;
  at: number;
}

export interface DB {
  adr_configs: AdrConfigsTable;
  adr_windows: AdrWindowsTable;
  adr_shipments: AdrShipmentsTable;
}

export type AdrConfigRow = Selectable<AdrConfigsTable>;
export type AdrWindowRow = Selectable<AdrWindowsTable>;
export type AdrShipmentRow = Selectable<AdrShipmentsTable>;

/** A number on an account's do-not-call list (migration 0039; src/modules/compliance/). */
export interface DoNotCallTable {
  /** The partner, reseller or organization whose list it is. */
  owner_id: number;
  /** E.164. */
  number: string;
  /** How it came: api, csv, sms-stop, call-analysis. */
  source: string;
  /** The conversation it came from (sms-stop, call-analysis). */
  evidence: string | null;
  note: string | null;
  created_at: number;
}

/** An organization's compliance settings (migration 0039): HELP by text, redaction of personal data. */
export interface ComplianceSettingsTable {
  org_id: number;
  sms_help_text: string | null;
  redact_personal_data: ColumnType<Flag, Flag | undefined, Flag>;
  keep_recordings: ColumnType<Flag, Flag | undefined, Flag>;
  updated_at: number;
}

export interface DB {
  do_not_call: DoNotCallTable;
  compliance_settings: ComplianceSettingsTable;
}

export type DoNotCallRow = Selectable<DoNotCallTable>;
export type ComplianceSettingsRow = Selectable<ComplianceSettingsTable>;

/**
 * The periodic jobs' turns across processes (src/db/job-leases.ts, migration 0040): one row per
 * job name, the process that last took a turn and when the next turn is due. A worker runs a job
 * only when it moves `due_at` forward itself, so N workers run each job once per period.
 */
export interface JobLeasesTable {
  name: string;
  holder: string;
  /** Unix ms: before this, no process takes the job's turn. */
  due_at: number;
}

export interface DB {
  job_leases: JobLeasesTable;
}
