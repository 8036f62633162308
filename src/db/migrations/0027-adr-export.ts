// Issue 26, activity records (ADR) export: `adr_configs` holds one export per account (an
// organization's own records, or a reseller's or partner's for every organization below it), the
// destination's password sealed; `adr_windows` is the queue of rotation windows, one row per
// window of an account (unique on the account and the window's start: a window is never made
// twice), shipped by the worker with the file's size and checksum; `adr_shipments` is the log of
// every attempt the account reads. The records are read back per window by when they ended:
// partial indexes over ended tasks and ended conversations by organization and end time.
import { sql, type Kysely } from 'kysely';

const ENDED = [sql.lit('finished'), sql.lit('failed'), sql.lit('canceled')];

export function adrExport() {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema.createTable('adr_configs')
        .addColumn('account_id', 'integer', (c) => c.primaryKey().references('accounts.id').onDelete('cascade'))
        .addColumn('protocol', 'text', (c) => c.notNull())
        .addColumn('host', 'text', (c) => c.notNull())
        .addColumn('port', 'integer', (c) => c.notNull())
        .addColumn('username', 'text', (c) => c.notNull())
        // SecretBox-sealed
        .addColumn('password', 'text', (c) => c.notNull())
        .addColumn('path', 'text')
        .addColumn('rotation_minutes', 'integer', (c) => c.notNull())
        .addColumn('enabled', 'integer', (c) => c.notNull())
        // The next window to make (unix ms, its start and end): windows are made in order from here, none skipped.
        .addColumn('next_window_at', 'bigint', (c) => c.notNull())
        .addColumn('next_window_end', 'bigint', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('updated_at', 'bigint', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('adr_configs_due').on('adr_configs').column('next_window_end')
        .where(sql.ref('enabled'), '=', sql.lit(1)).execute();

      await db.schema.createTable('adr_windows')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('account_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        .addColumn('window_start', 'bigint', (c) => c.notNull())
        .addColumn('window_end', 'bigint', (c) => c.notNull())
        .addColumn('file_name', 'text', (c) => c.notNull())
        .addColumn('state', 'text', (c) => c.notNull().defaultTo('pending'))
        .addColumn('run_at', 'bigint', (c) => c.notNull())
        .addColumn('attempt', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('max_attempts', 'integer', (c) => c.notNull())
        .addColumn('lease_owner', 'text')
        .addColumn('lease_expires_at', 'bigint')
        .addColumn('records', 'integer')
        .addColumn('bytes', 'bigint')
        .addColumn('checksum', 'text')
        .addColumn('shipped_at', 'bigint')
        .addColumn('last_error', 'text')
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('updated_at', 'bigint', (c) => c.notNull())
        .addColumn('finished_at', 'bigint')
        .execute();
      await db.schema.createIndex('adr_windows_account_start').on('adr_windows').columns(['account_id', 'window_start']).unique().execute();
      await db.schema.createIndex('adr_windows_claim').on('adr_windows').columns(['run_at', 'id'])
        .where(sql.ref('state'), '=', sql.lit('pending')).execute();
      await db.schema.createIndex('adr_windows_running_lease').on('adr_windows').column('lease_expires_at')
        .where(sql.ref('state'), '=', sql.lit('running')).execute();

      await db.schema.createTable('adr_shipments')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('account_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        .addColumn('window_id', 'text', (c) => c.notNull().references('adr_windows.id').onDelete('cascade'))
        .addColumn('attempt', 'integer', (c) => c.notNull())
        // 'shipped' | 'found' (already on the server: an earlier attempt's) | 'failed'
        .addColumn('outcome', 'text', (c) => c.notNull())
        .addColumn('message', 'text', (c) => c.notNull())
        .addColumn('bytes', 'bigint')
        .addColumn('duration_ms', 'integer', (c) => c.notNull())
        .addColumn('next_attempt_at', 'bigint')
        .addColumn('at', 'bigint', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('adr_shipments_account').on('adr_shipments').columns(['account_id', 'id']).execute();

      await db.schema.createIndex('tasks_org_ended').on('tasks').columns(['org_id', 'finished_at', 'id'])
        .where(sql.ref('state'), 'in', ENDED).execute();
      await db.schema.createIndex('conversations_org_ended').on('conversations').columns(['org_id', 'ended_at', 'id'])
        .where(sql.ref('ended_at'), 'is not', null).execute();
    },
  };
}
