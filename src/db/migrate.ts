// Applies the migrations in src/db/migrations (one set for both engines) and reports status.
import { Migrator, type Migration, type MigrationProvider } from 'kysely';
import type { Database } from './index.ts';
import type { Dialect } from './types.ts';
import { foundation } from './migrations/0001-foundation.ts';
import { tasks } from './migrations/0002-tasks.ts';
import { taskContent } from './migrations/0003-task-content.ts';
import { webhooks } from './migrations/0004-webhooks.ts';
import { sip } from './migrations/0005-sip.ts';
import { deliveryIndexes } from './migrations/0006-delivery-indexes.ts';
import { orgDeliveryIndex } from './migrations/0007-org-delivery-index.ts';
import { sipPresence } from './migrations/0008-sip-presence.ts';
import { contextIntegrations } from './migrations/0009-context-integrations.ts';
import { knowledge } from './migrations/0010-knowledge.ts';
import { agents } from './migrations/0011-agents.ts';
import { agentUrls } from './migrations/0012-agent-urls.ts';
import { conversations } from './migrations/0013-conversations.ts';
import { conversationIndexes } from './migrations/0014-conversation-indexes.ts';
import { rateLimitCounters } from './migrations/0015-rate-limit-counters.ts';
import { changeNotifications } from './migrations/0016-change-notifications.ts';
import { claimOrderIndex } from './migrations/0017-claim-order-index.ts';
import { runningLeaseIndex } from './migrations/0018-running-lease-index.ts';
import { webhookChangeNotifications } from './migrations/0019-webhook-change-notifications.ts';
import { parkedTasks } from './migrations/0020-parked-tasks.ts';
import { retentionIndexes } from './migrations/0021-retention-indexes.ts';
import { toolEffects } from './migrations/0022-tool-effects.ts';
import { phoneNumbers } from './migrations/0023-phone-numbers.ts';
import { billing } from './migrations/0024-billing.ts';
import { usageDaily } from './migrations/0025-usage-daily.ts';
import { billingSystems } from './migrations/0026-billing-systems.ts';
import { adrExport } from './migrations/0027-adr-export.ts';
import { includedAmounts } from './migrations/0028-included-amounts.ts';
import { conversationAnalyses } from './migrations/0029-conversation-analyses.ts';
import { voicemail } from './migrations/0030-voicemail.ts';
import { turnLatencies } from './migrations/0031-turn-latencies.ts';
import { numberReleases } from './migrations/0032-number-releases.ts';
import { numbersAdr } from './migrations/0033-numbers-adr.ts';
import { consoleSessions } from './migrations/0034-console-sessions.ts';
import { sipRouteCredentials } from './migrations/0035-sip-route-credentials.ts';
import { billingAddonCheckout } from './migrations/0036-billing-addon-checkout.ts';
import { speechProviders } from './migrations/0037-speech-providers.ts';
import { agentTests } from './migrations/0038-agent-tests.ts';
import { compliance } from './migrations/0039-compliance.ts';
import { jobLeases } from './migrations/0040-job-leases.ts';
import { campaignRules } from './migrations/0041-campaign-rules.ts';
import { overviewIndex } from './migrations/0042-overview-index.ts';
import { agentTestVoice } from './migrations/0043-agent-test-voice.ts';

function migrations(dialect: Dialect): Record<string, Migration> {
  return {
    '0001-foundation': foundation(dialect),
    '0002-tasks': tasks(dialect),
    '0003-task-content': taskContent(dialect),
    '0004-webhooks': webhooks(dialect),
    '0005-sip': sip(dialect),
    '0006-delivery-indexes': deliveryIndexes(),
    '0007-org-delivery-index': orgDeliveryIndex(),
    '0008-sip-presence': sipPresence(),
    '0009-context-integrations': contextIntegrations(dialect),
    '0010-knowledge': knowledge(dialect),
    '0011-agents': agents(dialect),
    '0012-agent-urls': agentUrls(),
    '0013-conversations': conversations(dialect),
    '0014-conversation-indexes': conversationIndexes(),
    '0015-rate-limit-counters': rateLimitCounters(),
    '0016-change-notifications': changeNotifications(dialect),
    '0017-claim-order-index': claimOrderIndex(),
    '0018-running-lease-index': runningLeaseIndex(),
    '0019-webhook-change-notifications': webhookChangeNotifications(dialect),
    '0020-parked-tasks': parkedTasks(),
    '0021-retention-indexes': retentionIndexes(),
    '0022-tool-effects': toolEffects(),
    '0023-phone-numbers': phoneNumbers(dialect),
    '0024-billing': billing(),
    '0025-usage-daily': usageDaily(),
    '0026-billing-systems': billingSystems(),
    '0027-adr-export': adrExport(),
    '0028-included-amounts': includedAmounts(dialect),
    '0029-conversation-analyses': conversationAnalyses(),
    '0030-voicemail': voicemail(),
    '0031-turn-latencies': turnLatencies(),
    '0032-number-releases': numberReleases(),
    '0033-numbers-adr': numbersAdr(),
    '0034-console-sessions': consoleSessions(),
    '0035-sip-route-credentials': sipRouteCredentials(),
    '0036-billing-addon-checkout': billingAddonCheckout(),
    '0037-speech-providers': speechProviders(),
    '0038-agent-tests': agentTests(),
    '0039-compliance': compliance(),
    '0040-job-leases': jobLeases(),
    '0041-campaign-rules': campaignRules(),
    '0042-overview-index': overviewIndex(),
    '0043-agent-test-voice': agentTestVoice(),
  };
}

function migrator(database: Database): Migrator {
  const provider: MigrationProvider = { getMigrations: async () => migrations(database.dialect) };
  return new Migrator({ db: database.db, provider });
}

export async function migrateToLatest(database: Database): Promise<string[]> {
  const { error, results } = await migrator(database).migrateToLatest();
  if (error) throw error instanceof Error ? error : new Error(JSON.stringify(error));
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
}

/**
 * The migrations of this release not applied yet, in order (what a process started with
 * CALLPLANE_AUTO_MIGRATE=false refuses to serve with). On PostgreSQL, Kysely's migrator holds a
 * session advisory lock while it migrates, so processes migrating together never race: the others
 * wait, then find nothing left to apply.
 */
export async function pendingMigrations(database: Database): Promise<string[]> {
  const all = await migrator(database).getMigrations();
  return all.filter((m) => m.executedAt === undefined).map((m) => m.name);
}

/** True when every known migration has been applied (used by /readyz). */
export async function migrationsApplied(database: Database): Promise<boolean> {
  const all = await migrator(database).getMigrations();
  return all.every((m) => m.executedAt !== undefined);
}
