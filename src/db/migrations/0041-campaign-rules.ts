// Issue 37 (part A), outbound campaigns: a task's own campaign rules (`campaign`, JSON
// `{callingWindow, retryRules}`: its calling window in the recipient's time and its retry rules,
// over its agent's and its organization's; docs/campaigns.md) and the record of its attempts
// (`attempt_log`, a JSON array: each attempt's time, result, caller ID and conversation), which
// the task's answer shows as `attemptLog`; an attempt's conversation is found by its task
// (`conversations_task`).
import type { Kysely } from 'kysely';

export function campaignRules() {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema.alterTable('tasks').addColumn('campaign', 'text').execute();
      await db.schema.alterTable('tasks').addColumn('attempt_log', 'text').execute();
      await db.schema.createIndex('conversations_task').on('conversations').columns(['task_id', 'started_at']).execute();
    },
  };
}
