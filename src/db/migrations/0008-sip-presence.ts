// Presence of a registration's AOR (registration `subscribe`): the owner SUBSCRIBEs to the AOR's
// presence and keeps what the NOTIFYs say on the registration row, for GET /api/v2/sip/registration.
import type { Kysely } from 'kysely';

export function sipPresence() {
  return {
    async up(db: Kysely<any>): Promise<void> {
      // One column per statement: SQLite's ALTER TABLE adds one at a time.
      // active | pending | terminated | failed (null: not subscribed, or not answered yet).
      await db.schema.alterTable('sip_registrations').addColumn('presence_subscription', 'text').execute();
      // open | closed (null: no NOTIFY said yet).
      await db.schema.alterTable('sip_registrations').addColumn('presence_state', 'text').execute();
      await db.schema.alterTable('sip_registrations').addColumn('presence_code', 'integer').execute();
      await db.schema.alterTable('sip_registrations').addColumn('presence_reason', 'text').execute();
      await db.schema.alterTable('sip_registrations').addColumn('presence_updated_at', 'bigint').execute();
    },
  };
}
