// Issue 33, numbers and the activity-record export:
// - `adr_configs.host_key_fingerprint`: the SFTP server's host key the export is pinned to, as
//   OpenSSH prints it (`SHA256:<base64>`), checked on every connect; `trust-on-first-use` until the
//   first connection records it (when the operator asked for that); null for FTP and FTPS, and for
//   an SFTP export made before this migration (which ships nothing until it is given one:
//   docs/billing.md, "Activity records").
// - The retention of finished releases of numbers and of shipped export windows (src/maintenance.ts):
//   partial indexes over ended rows on finished_at, as migration 0021 gave the other queues, and
//   the shipment log by window (a pruned window's log goes with it).
import { sql, type Kysely } from 'kysely';

const ENDED = [sql.lit('finished'), sql.lit('failed'), sql.lit('canceled')];

export function numbersAdr() {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema.alterTable('adr_configs').addColumn('host_key_fingerprint', 'text').execute();
      // Failed releases are kept for an operator (the number may still be rented): not in the index.
      await db.schema.createIndex('number_releases_ended').on('number_releases').column('finished_at')
        .where(sql.ref('state'), 'in', [sql.lit('finished'), sql.lit('canceled')]).execute();
      await db.schema.createIndex('adr_windows_ended').on('adr_windows').column('finished_at')
        .where(sql.ref('state'), 'in', ENDED).execute();
      await db.schema.createIndex('adr_shipments_window').on('adr_shipments').column('window_id').execute();
    },
  };
}
