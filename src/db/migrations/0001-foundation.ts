// The tenancy ladder, tokens, members, numbering providers and integrations.
import { type Kysely, type CreateTableBuilder } from 'kysely';
import type { Dialect } from '../types.ts';

type Table = CreateTableBuilder<string, never>;

export function withId(t: Table, dialect: Dialect): Table {
  return dialect === 'postgres'
    ? t.addColumn('id', 'serial', (c) => c.primaryKey())
    : t.addColumn('id', 'integer', (c) => c.primaryKey().autoIncrement());
}

const flag = (t: Table, name: string, dflt: 0 | 1) => t.addColumn(name, 'integer', (c) => c.notNull().defaultTo(dflt));

export function foundation(dialect: Dialect) {
  return {
    async up(db: Kysely<any>): Promise<void> {
      let accounts = withId(db.schema.createTable('accounts'), dialect)
        .addColumn('kind', 'text', (c) => c.notNull())
        .addColumn('parent_id', 'integer', (c) => c.references('accounts.id').onDelete('cascade'))
        .addColumn('partner_id', 'integer')
        .addColumn('reseller_id', 'integer')
        .addColumn('org_id', 'integer')
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('email', 'text')
        .addColumn('external_account_id', 'text')
        .addColumn('external_billing_id', 'text')
        .addColumn('product_plan_id', 'text')
        .addColumn('offered_product_plan_id', 'text')
        .addColumn('sell_plan_id', 'text')
        .addColumn('product_plan_term', 'text')
        .addColumn('sms_brand_id', 'text')
        .addColumn('sms_campaign_id', 'text')
        .addColumn('hipaa_setting', 'text')
        .addColumn('org_account_type', 'text')
        .addColumn('billing_id', 'text')
        .addColumn('billing_subscription_id', 'text')
        .addColumn('canceled_at', 'bigint')
        .addColumn('timezone', 'text')
        .addColumn('details', 'text', (c) => c.notNull().defaultTo('{}'))
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('updated_at', 'bigint', (c) => c.notNull());
      for (const f of ['vida_premium', 'sms_enabled', 'hipaa_enabled_default', 'onboarding_complete', 'subscribed'] as const) {
        accounts = flag(accounts, f, 0);
      }
      accounts = flag(accounts, 'active', 1);
      for (const c of ['voice_minutes_current', 'voice_minutes_previous', 'voice_minutes_all_time',
        'messages_current', 'messages_previous', 'messages_all_time']) {
        accounts = accounts.addColumn(c, 'double precision', (col) => col.notNull().defaultTo(0));
      }
      await accounts.execute();
      await db.schema.createIndex('accounts_parent').on('accounts').columns(['parent_id', 'kind']).execute();
      await db.schema.createIndex('accounts_reseller').on('accounts').columns(['reseller_id', 'kind']).execute();
      await db.schema.createIndex('accounts_partner').on('accounts').columns(['partner_id', 'kind']).execute();
      await db.schema.createIndex('accounts_org').on('accounts').columns(['org_id', 'kind']).execute();
      // An external id names one customer within a reseller's book.
      await db.schema.createIndex('accounts_external_id').unique().on('accounts')
        .columns(['reseller_id', 'external_account_id']).execute();

      await withId(db.schema.createTable('tokens'), dialect)
        .addColumn('account_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        .addColumn('hash', 'text', (c) => c.notNull().unique())
        .addColumn('prefix', 'text', (c) => c.notNull().unique())
        .addColumn('type', 'text', (c) => c.notNull())
        .addColumn('description', 'text', (c) => c.notNull())
        .addColumn('created_by', 'integer')
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('expires_at', 'bigint')
        .addColumn('used_at', 'bigint')
        .execute();
      await db.schema.createIndex('tokens_account').on('tokens').column('account_id').execute();

      await withId(db.schema.createTable('users'), dialect)
        .addColumn('account_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        .addColumn('email', 'text', (c) => c.notNull())
        .addColumn('role', 'text', (c) => c.notNull())
        .addColumn('permitted_account_ids', 'text', (c) => c.notNull().defaultTo('[]'))
        .addColumn('redirect_url', 'text')
        .addColumn('send_welcome_email', 'integer', (c) => c.notNull().defaultTo(1))
        .addColumn('status', 'text', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('updated_at', 'bigint', (c) => c.notNull())
        .addUniqueConstraint('users_account_email', ['account_id', 'email'])
        .execute();

      await withId(db.schema.createTable('numbering_providers'), dialect)
        .addColumn('org_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        .addColumn('provider_id', 'text', (c) => c.notNull())
        .addColumn('is_default', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('enabled', 'integer', (c) => c.notNull().defaultTo(1))
        .addColumn('config', 'text', (c) => c.notNull())
        .addColumn('secrets', 'text')
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('updated_at', 'bigint', (c) => c.notNull())
        .addUniqueConstraint('numbering_providers_org_provider', ['org_id', 'provider_id'])
        .execute();

      await withId(db.schema.createTable('integrations'), dialect)
        .addColumn('account_id', 'integer', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        .addColumn('org_id', 'integer')
        .addColumn('app_id', 'text', (c) => c.notNull())
        .addColumn('app_version', 'text', (c) => c.notNull())
        .addColumn('app_data', 'text', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('updated_at', 'bigint', (c) => c.notNull())
        .addUniqueConstraint('integrations_account_app', ['account_id', 'app_id'])
        .execute();
    },
  };
}
