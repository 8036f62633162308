// Sends one webhook delivery (a relayed provider event or one of our own events to a subscription)
// and says what becomes of it: finished, retried on the schedule, failed for good, or canceled
// because its relay or subscription is gone. The attempt log row commits with that outcome.
import type { Transaction } from 'kysely';
import type { Dispatcher } from 'undici';
import type { DB, Db, WebhookDeliveryRow } from '../../db/types.ts';
import type { SecretBox } from '../../lib/crypto.ts';
import { QueueAbortError, type HandlerContext, type Outcome } from '../../queue/runner.ts';
import { deliverOnce, headerMap, signatureHeaders, type AttemptResult } from '../../webhooks/deliver.ts';
import { messageSecret } from '../accounts/message-secret.ts';
import { relayRepo } from './relays/repository.ts';
import { attemptRepo, relayEventRepo } from './repository.ts';
import { subscriptionRepo } from './subscriptions/repository.ts';

export const USER_AGENT = 'callplane-webhooks';

/** Delay before the attempt after `attemptJustFailed`, or null when the schedule is spent. */
export type RetryDelay = (attemptJustFailed: number, retryAfterMs?: number) => number | null;

/** Everything one attempt needs, read from the relay or the subscription. */
interface Target {
  url: string;
  body: Buffer;
  contentType: string | undefined;
  headers: Record<string, string>;
  secret: string;
  timeoutMs: number;
  successStatusCodes: number[];
  /** What a 410 from the receiver switches off, in the settle's transaction. */
  disable(tx: Transaction<DB>, now: number): Promise<void>;
  disabledMessage: string;
}

type Loaded = { target: Target } | { skip: string };

/** Subscriptions get the relay defaults: 15 s and any 2xx. */
const WEBHOOK_TIMEOUT_MS = 15_000;
const ANY_2XX = Array.from({ length: 100 }, (_, i) => 200 + i);
const ERROR_MAX = 1000;
export const ABANDONED = 'attempt abandoned: the worker stopped before the receiver answered; sent again with the same webhook-id';

export interface DeliveryHandlerDeps {
  db: Db;
  box: SecretBox;
  dispatcher: Dispatcher;
  retryDelay: RetryDelay;
  now: () => number;
  log?: { warn(obj: object, msg: string): void };
}

async function loadRelayTarget(deps: DeliveryHandlerDeps, row: WebhookDeliveryRow): Promise<Loaded> {
  const { db, box } = deps;
  if (row.relay_id === null || row.relay_event_id === null) return { skip: 'delivery names no relay event' };
  const relay = await relayRepo.findById(db, row.relay_id);
  if (!relay) return { skip: 'the relay was deleted' };
  if (!relay.enabled) return { skip: `the ${relay.type} relay is disabled` };
  const event = await relayEventRepo.findContent(db, row.relay_event_id);
  if (!event) return { skip: 'the relay event was deleted' };
  const codes = JSON.parse(relay.success_status_codes) as number[];
  return {
    target: {
      url: relay.url,
      body: Buffer.from(event.body, 'base64'),
      contentType: event.content_type ?? undefined,
      headers: headerMap(box.openJson<Array<Record<string, string>>>(relay.headers)),
      secret: box.open(relay.signing_secret),
      timeoutMs: relay.timeout_ms,
      successStatusCodes: Array.isArray(codes) && codes.length > 0 ? codes : ANY_2XX,
      disabledMessage: `the receiver answered 410 Gone: the ${relay.type} relay is disabled until it is configured again`,
      async disable(tx, now) {
        await relayRepo.disable(tx, relay.id, now);
      },
    },
  };
}

async function loadWebhookTarget(deps: DeliveryHandlerDeps, row: WebhookDeliveryRow): Promise<Loaded> {
  const { db, box } = deps;
  if (row.webhook_id === null) return { skip: 'delivery names no subscription' };
  const hook = await subscriptionRepo.findById(db, row.webhook_id);
  if (!hook) return { skip: 'the subscription was deleted' };
  return {
    target: {
      url: hook.url,
      body: Buffer.from(row.payload ?? 'null', 'utf8'),
      contentType: 'application/json',
      headers: {},
      secret: box.open(hook.signing_secret),
      timeoutMs: WEBHOOK_TIMEOUT_MS,
      successStatusCodes: ANY_2XX,
      // Subscriptions have no enabled flag: a receiver that says its endpoint is gone has the
      // subscription removed (as DELETE /api/v2/webhooks would), with its pending deliveries.
      disabledMessage: 'the receiver answered 410 Gone: the subscription was removed',
      async disable(tx) {
        await subscriptionRepo.remove(tx, hook.id);
      },
    },
  };
}

/** An agent's reply to receiveMessage: to the URL the message named, signed with the organization's message secret. */
async function loadMessageTarget(deps: DeliveryHandlerDeps, row: WebhookDeliveryRow): Promise<Loaded> {
  if (!row.target_url) return { skip: 'delivery names no URL' };
  return {
    target: {
      url: row.target_url,
      body: Buffer.from(row.payload ?? 'null', 'utf8'),
      contentType: 'application/json',
      headers: {},
      secret: await messageSecret(deps.db, deps.box, row.org_id),
      timeoutMs: WEBHOOK_TIMEOUT_MS,
      successStatusCodes: ANY_2XX,
      disabledMessage: 'the receiver answered 410 Gone: this reply is not sent again',
      async disable() { /* a per-message URL has nothing to switch off */ },
    },
  };
}

/** One line for last_error and the log: the status or the transport error. */
export function describeAttempt(r: AttemptResult): string {
  if (r.error) return r.error;
  if (r.statusCode !== undefined) return `the receiver answered ${r.statusCode}`;
  return 'no answer';
}

const clip = (s: string) => (s.length > ERROR_MAX ? s.slice(0, ERROR_MAX) : s);

export function createDeliveryHandler(deps: DeliveryHandlerDeps) {
  const { dispatcher, retryDelay, now } = deps;
  return async (row: WebhookDeliveryRow, ctx?: HandlerContext): Promise<Outcome<WebhookDeliveryRow>> => {
    const loaded = row.kind === 'relay' ? await loadRelayTarget(deps, row)
      : row.kind === 'message' ? await loadMessageTarget(deps, row) : await loadWebhookTarget(deps, row);
    if ('skip' in loaded) return { kind: 'complete', state: 'canceled', set: { last_error: `not sent: ${loaded.skip}` } };
    const t = loaded.target;

    const startedAt = now();
    const headers: Record<string, string> = {
      'user-agent': USER_AGENT,
      ...t.headers,
      // The id is the event's, the same on every retry, so receivers can drop duplicates; the
      // timestamp is this attempt's, so a receiver's replay window holds for late retries too.
      ...signatureHeaders(t.secret, row.event_id, Math.floor(startedAt / 1000), t.body),
    };
    const result = await deliverOnce({
      url: t.url, body: t.body, contentType: t.contentType, headers,
      timeoutMs: t.timeoutMs, successStatusCodes: t.successStatusCodes,
    }, dispatcher, ctx?.signal);
    if (ctx?.signal.aborted) {
      const reason: unknown = ctx.signal.reason;
      // A lost lease is another worker's to settle: nothing this one writes would count.
      if (!(reason instanceof QueueAbortError) || reason.kind !== 'shutdown') throw reason;
      // The worker is stopping: the attempt is abandoned, due again at once for any worker, and
      // given back, so a stop can never be what exhausts the schedule.
      return { kind: 'retry', runAt: now(), uncounted: true, set: { last_error: ABANDONED } };
    }

    const attemptRow = (nextAttemptAt: number | null) => ({
      delivery_id: row.id,
      attempt: row.attempt,
      started_at: startedAt,
      duration_ms: Math.max(0, Math.round(result.durationMs)),
      status_code: result.statusCode ?? null,
      error: result.error ? clip(result.error) : null,
      response_excerpt: result.responseExcerpt ?? null,
      next_attempt_at: nextAttemptAt,
    });
    const logAttempt = async (tx: Transaction<DB>, written: WebhookDeliveryRow) => {
      await attemptRepo.insert(tx, attemptRow(written.state === 'pending' ? written.run_at : null));
    };
    const lastStatus = result.statusCode ?? null;

    if (result.ok) {
      return { kind: 'complete', state: 'finished', set: { last_status: lastStatus, last_error: null }, after: logAttempt };
    }
    if (result.gone) {
      deps.log?.warn({ delivery: row.id, url: t.url }, t.disabledMessage);
      return {
        kind: 'complete', state: 'failed', set: { last_status: lastStatus, last_error: t.disabledMessage },
        after: async (tx, written) => {
          await logAttempt(tx, written);
          await t.disable(tx, now());
        },
      };
    }
    const why = describeAttempt(result);
    const delay = row.attempt >= row.max_attempts ? null : retryDelay(row.attempt, result.retryAfterMs);
    if (delay === null) {
      return {
        kind: 'complete', state: 'failed',
        set: { last_status: lastStatus, last_error: clip(`gave up after ${row.attempt} attempt${row.attempt === 1 ? '' : 's'}: ${why}`) },
        after: logAttempt,
      };
    }
    return {
      kind: 'retry', runAt: now() + delay,
      set: { last_status: lastStatus, last_error: clip(why) },
      after: logAttempt,
    };
  };
}
