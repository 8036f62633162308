// SIP queries: registrations (with the lease that gives each one owner), whitelist, outbound
// routes, captures and registration events (with the webhook deliveries they queue). Every
// method takes the executor first.
import type { ExpressionBuilder, Insertable, Updateable } from 'kysely';
import type {
  DB, Executor, SipCapturesTable, SipEventsTable, SipIpWhitelistTable, SipOutboundRoutesTable, SipRegistrationRow,
  SipRegistrationsTable,
} from '../../db/types.ts';

/** The lease columns of a registration as its owner sees them each turn. */
export interface OwnedRegistration {
  id: number;
  version: number;
  deleting: number;
}

export const sipRepo = {
  registrationOf: (db: Executor, orgId: number) =>
    db.selectFrom('sip_registrations').selectAll().where('org_id', '=', orgId).executeTakeFirst(),

  registrationById: (db: Executor, id: number) =>
    db.selectFrom('sip_registrations').selectAll().where('id', '=', id).executeTakeFirst(),

  registrationByAorKey: (db: Executor, aorKey: string) =>
    db.selectFrom('sip_registrations').select(['id', 'org_id']).where('aor_key', '=', aorKey).executeTakeFirst(),

  insertRegistration: (db: Executor, row: Insertable<SipRegistrationsTable>) =>
    db.insertInto('sip_registrations').values(row).returningAll().executeTakeFirstOrThrow(),

  /** Changes a registration only if it is still at `version` (a concurrent change wins). */
  updateRegistrationAt: (db: Executor, id: number, version: number, set: Updateable<SipRegistrationsTable>) =>
    db.updateTable('sip_registrations').set(set).where('id', '=', id).where('version', '=', version)
      .returningAll().executeTakeFirst(),

  deleteRegistration: (db: Executor, id: number, version?: number) => {
    let q = db.deleteFrom('sip_registrations').where('id', '=', id);
    if (version !== undefined) q = q.where('version', '=', version);
    return q.executeTakeFirst().then((r) => Number(r.numDeletedRows) > 0);
  },

  markDeleting: (db: Executor, id: number, now: number) =>
    db.updateTable('sip_registrations').set({ deleting: 1, updated_at: now }).where('id', '=', id).executeTakeFirst(),

  /** The registrations this owner holds; renews their leases when `renewUntil` is given. */
  async owned(db: Executor, owner: string, renewUntil?: number): Promise<OwnedRegistration[]> {
    if (renewUntil === undefined) {
      return db.selectFrom('sip_registrations').select(['id', 'version', 'deleting']).where('lease_owner', '=', owner).execute();
    }
    return db.updateTable('sip_registrations').set({ lease_expires_at: renewUntil })
      .where('lease_owner', '=', owner).returning(['id', 'version', 'deleting']).execute();
  },

  /**
   * Takes up to `limit` registrations nobody holds (new ones, released ones, and those whose
   * owner stopped renewing). The candidates are locked with SKIP LOCKED (PostgreSQL; SQLite's one
   * writer needs no lock and the compiler leaves it out), so two workers claiming at once take
   * different rows; the outer condition is checked again in the UPDATE, so a row is never taken
   * from a live owner.
   */
  async claim(db: Executor, owner: string, now: number, leaseMs: number, limit: number): Promise<SipRegistrationRow[]> {
    const free = (eb: ExpressionBuilder<DB, 'sip_registrations'>) =>
      eb.or([eb('lease_owner', 'is', null), eb('lease_expires_at', 'is', null), eb('lease_expires_at', '<', now)]);
    const any = await db.selectFrom('sip_registrations').select('id').where(free).limit(1).executeTakeFirst();
    if (!any) return [];
    const candidates = db.selectFrom('sip_registrations').select('id').where(free).orderBy('id').limit(limit)
      .forUpdate().skipLocked();
    return db.updateTable('sip_registrations').set({ lease_owner: owner, lease_expires_at: now + leaseMs })
      .where('id', 'in', candidates).where(free).returningAll().execute();
  },

  /** Gives back this owner's leases (shutdown), so another worker takes them at once. */
  release: (db: Executor, owner: string, ids?: number[]) => {
    let q = db.updateTable('sip_registrations').set({ lease_owner: null, lease_expires_at: null }).where('lease_owner', '=', owner);
    if (ids) q = q.where('id', 'in', ids.length ? ids : [-1]);
    return q.execute();
  },

  /** Status written by the owner, only while it holds the lease and the configuration is the one it ran. */
  writeStatus: (db: Executor, id: number, owner: string, version: number, set: Updateable<SipRegistrationsTable>) =>
    db.updateTable('sip_registrations').set(set).where('id', '=', id).where('lease_owner', '=', owner)
      .where('version', '=', version).executeTakeFirst().then((r) => Number(r.numUpdatedRows) > 0),

  /** Removes a registration this owner holds (DELETE, once un-REGISTERed); answers whether it did. */
  removeOwned: (db: Executor, id: number, owner: string) =>
    db.deleteFrom('sip_registrations').where('id', '=', id).where('lease_owner', '=', owner)
      .executeTakeFirst().then((r) => Number(r.numDeletedRows) > 0),

  /** The organization whose registration has this address of record. */
  orgOfAor: (db: Executor, aorKey: string) =>
    db.selectFrom('sip_registrations').select(['org_id']).where('aor_key', '=', aorKey).executeTakeFirst().then((r) => r?.org_id),

  /** The registrations using this SIP user, with where they REGISTER (a call through one comes from its registrar). */
  registrationsOfUser: (db: Executor, username: string) =>
    db.selectFrom('sip_registrations').select(['org_id', 'aor', 'proxy', 'port', 'transport']).where('username', '=', username).limit(100).execute(),

  whitelist: (db: Executor, orgId: number) =>
    db.selectFrom('sip_ip_whitelist').selectAll().where('org_id', '=', orgId).orderBy('id').execute(),

  /**
   * The whitelist entries that may hold `address`, of every organization: the address itself and
   * all ranges (the caller checks the ranges).
   */
  whitelistEntriesFor: (db: Executor, address: string) =>
    db.selectFrom('sip_ip_whitelist').select(['org_id', 'ip'])
      .where((eb) => eb.or([eb('ip', '=', address), eb('ip', 'like', '%/%')])).execute(),

  countWhitelist: (db: Executor, orgId: number) =>
    db.selectFrom('sip_ip_whitelist').select((eb) => eb.fn.countAll<number>().as('n')).where('org_id', '=', orgId)
      .executeTakeFirstOrThrow().then((r) => Number(r.n)),

  /** Adds an entry, or relabels it when it is there already; answers whether it was new. */
  async upsertWhitelist(db: Executor, row: Insertable<SipIpWhitelistTable>): Promise<boolean> {
    const existing = await db.selectFrom('sip_ip_whitelist').select('id').where('org_id', '=', row.org_id).where('ip', '=', row.ip).executeTakeFirst();
    if (existing) {
      await db.updateTable('sip_ip_whitelist').set({ label: row.label }).where('id', '=', existing.id).execute();
      return false;
    }
    const inserted = await db.insertInto('sip_ip_whitelist').values(row)
      .onConflict((oc) => oc.columns(['org_id', 'ip']).doUpdateSet({ label: row.label })).returning('id').executeTakeFirst();
    return inserted !== undefined;
  },

  deleteWhitelist: (db: Executor, orgId: number, ip: string) =>
    db.deleteFrom('sip_ip_whitelist').where('org_id', '=', orgId).where('ip', '=', ip).executeTakeFirst()
      .then((r) => Number(r.numDeletedRows) > 0),

  routes: (db: Executor, orgId: number) =>
    db.selectFrom('sip_outbound_routes').selectAll().where('org_id', '=', orgId).orderBy('id').execute(),

  countRoutes: (db: Executor, orgId: number) =>
    db.selectFrom('sip_outbound_routes').select((eb) => eb.fn.countAll<number>().as('n')).where('org_id', '=', orgId)
      .executeTakeFirstOrThrow().then((r) => Number(r.n)),

  /** Inserts a route unless an equivalent one is there; answers whether it was new. */
  async insertRoute(db: Executor, row: Insertable<SipOutboundRoutesTable>): Promise<boolean> {
    const r = await db.insertInto('sip_outbound_routes').values(row)
      .onConflict((oc) => oc.columns(['org_id', 'route_key']).doNothing()).returning('id').executeTakeFirst();
    return r !== undefined;
  },

  /** Replaces a route's own credentials (username, sealed password). */
  setRouteCredentials: (db: Executor, orgId: number, routeKey: string, set: { username?: string; password?: string }) =>
    db.updateTable('sip_outbound_routes').set({ username: set.username ?? null, password: set.password ?? null })
      .where('org_id', '=', orgId).where('route_key', '=', routeKey).execute(),

  deleteRoute: (db: Executor, orgId: number, routeKey: string) =>
    db.deleteFrom('sip_outbound_routes').where('org_id', '=', orgId).where('route_key', '=', routeKey).executeTakeFirst()
      .then((r) => Number(r.numDeletedRows) > 0),

  insertCaptures: (db: Executor, rows: Insertable<SipCapturesTable>[]) =>
    db.insertInto('sip_captures').values(rows).execute(),

  captures: (db: Executor, orgId: number, callId: string, from?: number, to?: number, limit = 2000) => {
    let q = db.selectFrom('sip_captures').selectAll().where('org_id', '=', orgId).where('call_id', '=', callId);
    if (from !== undefined) q = q.where('created_at', '>=', from);
    if (to !== undefined) q = q.where('created_at', '<=', to);
    return q.orderBy('created_at').orderBy('id').limit(limit).execute();
  },

  /** The organization's captured Call-IDs, the most recently active first: first and last message, count. */
  async captureCalls(db: Executor, orgId: number, limit: number) {
    const calls = await db.selectFrom('sip_captures')
      .select((eb) => ['call_id', eb.fn.min('created_at').as('first_at'), eb.fn.max('created_at').as('last_at'),
        eb.fn.countAll().as('count'), eb.fn.min('id').as('first_id')])
      .where('org_id', '=', orgId).groupBy('call_id')
      .orderBy('last_at', 'desc').orderBy('call_id').limit(limit).execute();
    const ids = calls.map((c) => String(c.first_id));
    const firsts = ids.length === 0 ? [] : await db.selectFrom('sip_captures').select(['id', 'message'])
      .where('org_id', '=', orgId).where('id', 'in', ids).execute();
    const byId = new Map(firsts.map((f) => [f.id, f.message]));
    return calls.map((c) => ({
      callId: c.call_id, firstAt: Number(c.first_at), lastAt: Number(c.last_at), count: Number(c.count),
      firstMessage: byId.get(String(c.first_id)) ?? '',
    }));
  },

  /** Deletes up to `batch` captures older than `before`; answers how many. */
  async pruneCaptures(db: Executor, before: number, batch = 1000): Promise<number> {
    const old = db.selectFrom('sip_captures').select('id').where('created_at', '<', before).limit(batch);
    const r = await db.deleteFrom('sip_captures').where('id', 'in', old).executeTakeFirst();
    return Number(r.numDeletedRows);
  },

  events: (db: Executor, orgId: number) =>
    db.selectFrom('sip_events').selectAll().where('org_id', '=', orgId).orderBy('id').execute(),

  insertEvent: (db: Executor, row: Insertable<SipEventsTable>) =>
    db.insertInto('sip_events').values(row).execute(),
};
