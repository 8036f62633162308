// Queries on adr_configs (an account's activity-record export), adr_windows (its rotation windows;
// the queue columns are src/queue/engine.ts's) and adr_shipments (the log of every attempt).
import { sql, type Insertable, type Updateable } from 'kysely';
import { TRUST_ON_FIRST_USE } from './transfer.ts';
import type { AdrConfigRow, AdrConfigsTable, AdrShipmentRow, AdrShipmentsTable, AdrWindowRow, AdrWindowsTable, Db, Executor } from '../../db/types.ts';

/** The server an export's password and host key belong to: protocol, login, host and port. */
export const destinationKey = (c: { protocol: string; host: string; port: number; username: string }) =>
  `${c.protocol}://${c.username}@${c.host.toLowerCase()}:${c.port}`;

export const adrConfigRepo = {
  /**
   * Records the SFTP host key seen on first use, only while the export still asks for that and
   * still names the server `destination` (destinationKey) it was seen at; answers the fingerprint
   * the export is pinned to now (null: none).
   */
  async recordHostKey(db: Db, accountId: number, destination: string, fingerprint: string): Promise<string | null> {
    return db.transaction().execute(async (tx) => {
      const row = await adrConfigRepo.find(tx, accountId, { lock: true });
      if (!row || destinationKey(row) !== destination) return null;
      if (row.host_key_fingerprint === TRUST_ON_FIRST_USE) {
        await tx.updateTable('adr_configs').set({ host_key_fingerprint: fingerprint }).where('account_id', '=', accountId).execute();
        return fingerprint;
      }
      return row.host_key_fingerprint;
    });
  },

  /** `lock`: the row is held until the transaction ends (a change of settings against the window maker's advance). */
  async find(db: Executor, accountId: number, opts: { lock?: boolean } = {}): Promise<AdrConfigRow | undefined> {
    const q = db.selectFrom('adr_configs').selectAll().where('account_id', '=', accountId);
    return (opts.lock ? q.forUpdate() : q).executeTakeFirst();
  },

  async insert(tx: Executor, row: Insertable<AdrConfigsTable>): Promise<void> {
    await tx.insertInto('adr_configs').values(row).execute();
  },

  async update(tx: Executor, accountId: number, patch: Updateable<AdrConfigsTable>): Promise<void> {
    await tx.updateTable('adr_configs').set(patch).where('account_id', '=', accountId).execute();
  },

  /** Enabled exports whose next window ended by `by` (the window maker's work), the longest waiting first. */
  async due(db: Executor, by: number, limit: number): Promise<AdrConfigRow[]> {
    return db.selectFrom('adr_configs').selectAll().where('enabled', '=', 1).where('next_window_end', '<=', by)
      .orderBy('next_window_end').limit(limit).execute();
  },

  /** Moves the export's next window from the one starting at `from` to [to, toEnd); false when another worker moved it first. */
  async advance(tx: Executor, accountId: number, from: number, to: number, toEnd: number, now: number): Promise<boolean> {
    const r = await tx.updateTable('adr_configs').set({ next_window_at: to, next_window_end: toEnd, updated_at: now })
      .where('account_id', '=', accountId).where('next_window_at', '=', from).executeTakeFirst();
    return Number(r.numUpdatedRows) > 0;
  },
};

export const adrWindowRepo = {
  /** Adds windows; one already made for the same account and start is left as it is. */
  async insertMany(tx: Executor, rows: Insertable<AdrWindowsTable>[]): Promise<void> {
    if (rows.length === 0) return;
    await tx.insertInto('adr_windows').values(rows).onConflict((oc) => oc.columns(['account_id', 'window_start']).doNothing()).execute();
  },

  async find(db: Executor, id: string): Promise<AdrWindowRow | undefined> {
    return db.selectFrom('adr_windows').selectAll().where('id', '=', id).executeTakeFirst();
  },

  /**
   * Deletes up to `batch` windows that ended (shipped, failed or canceled) before `before`, with
   * their shipment log; answers how many windows went. The states are literals, as the partial
   * index adr_windows_ended names them. The window maker never goes back, so none is made again.
   */
  async pruneEnded(db: Db, before: number, batch = 1000): Promise<number> {
    return db.transaction().execute(async (tx) => {
      const rows = await tx.selectFrom('adr_windows').select('id')
        .where(sql.ref('state'), 'in', [sql.lit('finished'), sql.lit('failed'), sql.lit('canceled')]).where('finished_at', '<', before)
        .orderBy('finished_at').limit(batch).execute();
      if (rows.length === 0) return 0;
      const ids = rows.map((r) => r.id);
      await tx.deleteFrom('adr_shipments').where('window_id', 'in', ids).execute();
      await tx.deleteFrom('adr_windows').where('id', 'in', ids).execute();
      return rows.length;
    });
  },

  /** The account's windows, newest first, before a window start (a page). */
  async list(db: Executor, accountId: number, opts: { before?: number; limit: number }): Promise<AdrWindowRow[]> {
    let q = db.selectFrom('adr_windows').selectAll().where('account_id', '=', accountId);
    if (opts.before !== undefined) q = q.where('window_start', '<', opts.before);
    return q.orderBy('window_start', 'desc').limit(opts.limit).execute();
  },
};

export const adrShipmentRepo = {
  async insert(tx: Executor, row: Insertable<AdrShipmentsTable>): Promise<void> {
    await tx.insertInto('adr_shipments').values(row).execute();
  },

  /** The account's shipment log, newest first, before an id (a page). */
  async list(db: Executor, accountId: number, opts: { before?: string; limit: number }): Promise<AdrShipmentRow[]> {
    let q = db.selectFrom('adr_shipments').selectAll().where('account_id', '=', accountId);
    if (opts.before !== undefined) q = q.where('id', '<', opts.before);
    return q.orderBy('id', 'desc').limit(opts.limit).execute();
  },
};
