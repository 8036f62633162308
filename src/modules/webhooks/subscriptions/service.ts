// Event subscriptions (GET/POST/DELETE /api/v2/webhooks): where an organization wants our own
// events sent. Each subscription has its own Standard Webhooks signing secret, answered in full
// once, when it is created; deliveries go through the delivery queue (delivery-queue.ts).
import type { AccountRow, Db, WebhookRow } from '../../../db/types.ts';
import { QUEUE_STATES } from '../../../db/types.ts';
import type { Scope } from '../../../http/auth.ts';
import { Conflict, Invalid, NotFound } from '../../../http/errors.ts';
import { maskSecret, type SecretBox } from '../../../lib/crypto.ts';
import { toUnixSeconds } from '../../../lib/time.ts';
import { newSigningSecret } from '../../../webhooks/deliver.ts';
import { checkTargetUrl, type TargetPolicy } from '../../../webhooks/ssrf.ts';
import { accountRepo } from '../../accounts/repository.ts';
import { presentDelivery, queueTestDelivery, replayDelivery } from '../deliveries.ts';
import {
  attemptRepo, deliveryRepo, type SubscriptionDelivery, type SubscriptionDeliveryFilter,
} from '../repository.ts';
import { subscriptionRepo } from './repository.ts';

/** The contract's types, then ours: `task` (task lifecycle) and `registration` (SIP registration status). */
export const WEBHOOK_TYPES = ['conversation', 'incoming', 'contact', 'agent', 'onboarding', 'task', 'registration'] as const;
export type WebhookType = (typeof WEBHOOK_TYPES)[number];
/** Subscriptions one organization may hold: every event fans out to each, so the fan-out is bounded. */
export const MAX_SUBSCRIPTIONS = 100;
export const MAX_URL_LENGTH = 2048;
export const MAX_LABEL_LENGTH = 200;

export interface SubscriptionBody {
  url: string;
  label: string;
  type: string;
}

export interface SubscriptionServiceDeps {
  db: Db;
  box: SecretBox;
  policy: TargetPolicy;
  /** Wakes this process's delivery runner (if it has one) after a replay. */
  notify?: () => void;
  now?: () => number;
}

const isType = (t: string): t is WebhookType => (WEBHOOK_TYPES as readonly string[]).includes(t);

/** A URL as stored: the parser's normal form, so DELETE finds it however it was spelled. */
function normalUrl(url: string): string {
  try {
    return new URL(url).toString();
  } catch {
    return url;
  }
}

export function subscriptionService(deps: SubscriptionServiceDeps) {
  const { db, box, policy } = deps;
  const now = deps.now ?? Date.now;

  /** Subscriptions belong to an organization: its own token, or targetAccountId for resellers and partners. */
  const organization = (scope: Scope, targetAccountId: number | undefined): Promise<AccountRow> =>
    scope.target(targetAccountId, ['organization']);

  /** The contract's fields (userId is the organization), plus our id and the masked secret. */
  function view(row: WebhookRow) {
    return {
      id: row.id,
      userId: row.org_id,
      label: row.label ?? '',
      timestamp: toUnixSeconds(row.created_at),
      url: row.url,
      type: row.type,
      signingSecret: maskSecret(box.open(row.signing_secret)),
    };
  }

  /** A subscription delivery: the shared view plus the subscription it goes to. */
  function presentSubscriptionDelivery(d: SubscriptionDelivery, attempts: Parameters<typeof presentDelivery>[1]) {
    return { ...presentDelivery(d, attempts), webhookId: d.webhook_id, url: d.url, type: d.type };
  }

  function checkType(type: string): WebhookType {
    if (!isType(type)) throw new Invalid(`type must be one of: ${WEBHOOK_TYPES.join(', ')}`);
    return type;
  }

  return {
    async list(scope: Scope, targetAccountId: number | undefined) {
      const org = await organization(scope, targetAccountId);
      const rows = await subscriptionRepo.list(db, org.id);
      return { success: true, message: 'Success', webhooks: rows.map(view) };
    },

    async create(scope: Scope, targetAccountId: number | undefined, body: SubscriptionBody) {
      const org = await organization(scope, targetAccountId);
      const type = checkType(body.type);
      const target = checkTargetUrl(body.url, policy);
      if (!target.ok) throw new Invalid(target.message.startsWith('url') ? target.message : `url ${target.message}`);
      const url = target.url.toString();
      const label = body.label.trim();
      const secret = newSigningSecret();
      const at = now();
      const { row, created } = await db.transaction().execute(async (tx) => {
        // Serialises concurrent creations for one organization, so the checks below hold on PostgreSQL.
        await accountRepo.lock(tx, org.id);
        // The same url and type again is the subscription that exists (the contract answers 200):
        // a client that retries its setup gets it back, unchanged, its secret still masked.
        const existing = await subscriptionRepo.findByUrlAndType(tx, org.id, url, type);
        if (existing) return { row: existing, created: false };
        if ((await subscriptionRepo.count(tx, org.id)) >= MAX_SUBSCRIPTIONS) {
          throw new Conflict(`An organization may have at most ${MAX_SUBSCRIPTIONS} webhooks; delete one first`);
        }
        const inserted = await subscriptionRepo.insert(tx, {
          org_id: org.id, url, label, type, signing_secret: box.seal(secret), created_at: at,
        });
        return { row: inserted, created: true };
      });
      if (!created) {
        return {
          created,
          body: { success: true, message: `A webhook of type '${type}' to ${url} already exists`, webhooks: [view(row)] },
        };
      }
      return {
        created,
        body: {
          success: true,
          message: 'Webhook created successfully',
          webhooks: [view(row)],
          // In full only here: verify our webhook-signature with it (Standard Webhooks).
          signingSecret: secret,
        },
      };
    },

    async remove(scope: Scope, targetAccountId: number | undefined, body: { url: string; type?: string }) {
      const org = await organization(scope, targetAccountId);
      const type = body.type === undefined ? undefined : checkType(body.type);
      const url = normalUrl(body.url);
      const removed = await subscriptionRepo.removeByUrl(db, org.id, url, type);
      if (removed === 0) {
        throw new NotFound(`No webhook${type ? ` of type '${type}'` : ''} to ${body.url} was found`);
      }
      return { success: true, message: 'Webhook deleted successfully', deleted: removed };
    },

    async deliveries(scope: Scope, targetAccountId: number | undefined, q: { url?: string; type?: string; state?: string; limit?: number; offset?: number }) {
      const org = await organization(scope, targetAccountId);
      const filter: SubscriptionDeliveryFilter = {};
      if (q.url !== undefined) filter.url = normalUrl(q.url);
      if (q.type !== undefined) filter.type = checkType(q.type);
      if (q.state !== undefined) {
        if (!(QUEUE_STATES as readonly string[]).includes(q.state)) throw new Invalid(`state must be one of: ${QUEUE_STATES.join(', ')}`);
        filter.state = q.state as SubscriptionDeliveryFilter['state'];
      }
      const limit = q.limit ?? 100;
      const offset = q.offset ?? 0;
      const { total, rows } = await deliveryRepo.pageForSubscriptions(db, org.id, filter, limit, offset);
      const attempts = await attemptRepo.byDelivery(db, rows.map((r) => r.id));
      return {
        success: true, message: 'Webhook deliveries fetched successfully', total, limit, offset,
        deliveries: rows.map((r) => presentSubscriptionDelivery(r, attempts.get(r.id) ?? [])),
      };
    },

    /** Sends one test event to the subscription `id` of the organization (404 for another's). */
    async test(scope: Scope, targetAccountId: number | undefined, id: number) {
      const org = await organization(scope, targetAccountId);
      const hook = await subscriptionRepo.findById(db, id);
      if (!hook || hook.org_id !== org.id) throw new NotFound(`Webhook ${id} was not found`);
      const created = await db.transaction().execute((tx) => queueTestDelivery(tx, hook, now()));
      deps.notify?.();
      return {
        success: true, message: `A test event is on its way to ${hook.url}.`,
        delivery: presentSubscriptionDelivery({ ...created, url: hook.url, type: hook.type }, []),
      };
    },

    async replay(scope: Scope, targetAccountId: number | undefined, deliveryId: string) {
      const org = await organization(scope, targetAccountId);
      const original = await deliveryRepo.findForSubscriptions(db, org.id, deliveryId);
      if (!original) throw new NotFound(`Delivery ${deliveryId} was not found`);
      const created = await replayDelivery(db, original, now());
      deps.notify?.();
      return {
        success: true, message: `Delivery ${deliveryId} replayed as ${created.id}.`,
        delivery: presentSubscriptionDelivery({ ...created, url: original.url, type: original.type }, []),
      };
    },
  };
}

export type SubscriptionService = ReturnType<typeof subscriptionService>;
