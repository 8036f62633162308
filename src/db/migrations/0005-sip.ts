// SIP (issue 5): an organization's registration with its PBX (owned by one worker at a time
// through a lease), its inbound IP whitelist, its outbound routes, the SIP messages we exchanged
// (captures, per Call-ID) and registration lifecycle events.
import type { Kysely } from 'kysely';
import type { Dialect } from '../types.ts';
import { withId } from './0001-foundation.ts';

export function sip(dialect: Dialect) {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await withId(db.schema.createTable('sip_registrations'), dialect)
        // One registration per organization: the contract's GET/DELETE take no id.
        .addColumn('org_id', 'integer', (c) => c.notNull().unique().references('accounts.id').onDelete('cascade'))
        // As the caller wrote it, and normalised (sip:user@host[:port], host lowercased): the key
        // that is unique across organizations.
        .addColumn('aor', 'text', (c) => c.notNull())
        .addColumn('aor_key', 'text', (c) => c.notNull().unique())
        .addColumn('username', 'text', (c) => c.notNull())
        .addColumn('auth_username', 'text')
        // AES-256-GCM sealed; never returned.
        .addColumn('password', 'text', (c) => c.notNull())
        .addColumn('realm', 'text')
        .addColumn('proxy', 'text')
        .addColumn('port', 'integer')
        .addColumn('transport', 'text', (c) => c.notNull())
        .addColumn('subscribe', 'integer', (c) => c.notNull().defaultTo(0))
        // Bumped by every change of the configuration; the owner re-registers when it moves.
        .addColumn('version', 'integer', (c) => c.notNull().defaultTo(1))
        // The version the status columns below describe (0: not attempted yet).
        .addColumn('attempted_version', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('registered', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('last_code', 'integer')
        .addColumn('last_reason', 'text')
        .addColumn('last_error', 'text')
        .addColumn('expires_at', 'bigint')
        .addColumn('last_attempt_at', 'bigint')
        .addColumn('next_attempt_at', 'bigint')
        // The Contact our binding carries (which process holds it).
        .addColumn('contact', 'text')
        // DELETE asked for: the owner un-REGISTERs and removes the row.
        .addColumn('deleting', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('lease_owner', 'text')
        .addColumn('lease_expires_at', 'bigint')
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('updated_at', 'bigint', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('sip_registrations_lease').on('sip_registrations').columns(['lease_owner', 'lease_expires_at']).execute();

      await withId(db.schema.createTable('sip_ip_whitelist'), dialect)
        .addColumn('org_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        // Normalised: an address, or a CIDR range by its network address.
        .addColumn('ip', 'text', (c) => c.notNull())
        .addColumn('label', 'text', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addUniqueConstraint('sip_ip_whitelist_org_ip', ['org_id', 'ip'])
        .execute();

      await withId(db.schema.createTable('sip_outbound_routes'), dialect)
        .addColumn('org_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        // As given (listed back verbatim) and canonical (duplicates and DELETE compare on it).
        .addColumn('route', 'text', (c) => c.notNull())
        .addColumn('route_key', 'text', (c) => c.notNull())
        .addColumn('host', 'text', (c) => c.notNull())
        .addColumn('port', 'integer')
        .addColumn('transport', 'text', (c) => c.notNull())
        .addColumn('proxy_host', 'text')
        .addColumn('proxy_port', 'integer')
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addUniqueConstraint('sip_outbound_routes_org_route', ['org_id', 'route_key'])
        .execute();

      await db.schema.createTable('sip_captures')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('org_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        .addColumn('call_id', 'text', (c) => c.notNull())
        .addColumn('direction', 'text', (c) => c.notNull()) // 'in' | 'out'
        .addColumn('transport', 'text', (c) => c.notNull())
        .addColumn('remote', 'text', (c) => c.notNull())
        .addColumn('local', 'text', (c) => c.notNull())
        .addColumn('message', 'text', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('sip_captures_call').on('sip_captures').columns(['org_id', 'call_id', 'created_at']).execute();
      await db.schema.createIndex('sip_captures_age').on('sip_captures').columns(['created_at']).execute();

      // Registration lifecycle events (registered, failed, unregistered), kept as history; the
      // same transaction queues their webhook deliveries.
      await db.schema.createTable('sip_events')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('org_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        .addColumn('aor', 'text', (c) => c.notNull())
        .addColumn('type', 'text', (c) => c.notNull())
        .addColumn('payload', 'text', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('sip_events_org').on('sip_events').columns(['org_id', 'id']).execute();
    },
  };
}
