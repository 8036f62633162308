// Issue 37 (part B): do-not-call lists and an organization's compliance settings.
// - do_not_call: the numbers (E.164) an account's list holds. The owner is a partner, a reseller
//   or an organization; an organization's tasks are checked against its own list and its
//   ancestors' (src/modules/compliance/repository.ts). `source` says how a number came
//   (api, csv, sms-stop, call-analysis) and `evidence` names the conversation it came from.
// - compliance_settings: per organization, the answer to HELP by text and the redaction of
//   personal data before it is stored (off by default), and whether calls are recorded at all.
import type { Kysely } from 'kysely';

export function compliance() {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema.createTable('do_not_call')
        .addColumn('owner_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        .addColumn('number', 'text', (c) => c.notNull())
        .addColumn('source', 'text', (c) => c.notNull())
        .addColumn('evidence', 'text')
        .addColumn('note', 'text')
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addPrimaryKeyConstraint('do_not_call_pk', ['owner_id', 'number'])
        .execute();
      // Listing a list page by page, newest first.
      await db.schema.createIndex('do_not_call_listing').on('do_not_call').columns(['owner_id', 'created_at', 'number']).execute();
      await db.schema.createTable('compliance_settings')
        .addColumn('org_id', 'integer', (c) => c.primaryKey().references('accounts.id').onDelete('cascade'))
        // null: the default help text (src/modules/compliance/settings.ts).
        .addColumn('sms_help_text', 'text')
        .addColumn('redact_personal_data', 'integer', (c) => c.notNull().defaultTo(0))
        // Whether calls are recorded (1) or no recording is written (0), whatever the process allows.
        .addColumn('keep_recordings', 'integer', (c) => c.notNull().defaultTo(1))
        .addColumn('updated_at', 'bigint', (c) => c.notNull())
        .execute();
    },
  };
}
