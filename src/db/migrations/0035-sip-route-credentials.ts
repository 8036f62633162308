// Issue 33: a SIP secret answers only its own host. An outbound route may carry credentials of its
// own (username, and the password sealed like every stored secret) for the digest challenges of its
// next hop; the registration's password answers only the registrar, and once the registrar has
// challenged us the realm it used is kept (challenge_realm) so a call's challenge of another realm
// is not answered with it either (docs/sip.md, "Credentials: a secret answers only its own host").
import type { Kysely } from 'kysely';

export function sipRouteCredentials() {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema.alterTable('sip_outbound_routes').addColumn('username', 'text').execute();
      // Sealed (SecretBox); null: the route has no credentials of its own.
      await db.schema.alterTable('sip_outbound_routes').addColumn('password', 'text').execute();
      await db.schema.alterTable('sip_registrations').addColumn('challenge_realm', 'text').execute();
    },
  };
}
