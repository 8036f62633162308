// Numbering providers of an organization: the carriers its calls and texts go through.
import type { Db } from '../../db/types.ts';
import { isUniqueViolation } from '../../db/errors.ts';
import { Conflict, Invalid, NotFound } from '../../http/errors.ts';
import type { Scope } from '../../http/auth.ts';
import type { SecretBox } from '../../lib/crypto.ts';
import { secretTargetRefusal, urlOrigin } from '../../lib/secret-target.ts';
import { DEFAULT_TWILIO_API_BASE_URL } from '../../providers/index.ts';
import { flag } from '../../db/flags.ts';
import { nowMs } from '../../lib/time.ts';
import { openProviderSettings } from './carriers.ts';
import { presentProvider } from './present.ts';
import { normalizeProviderConfig, PROVIDERS, providerSpec, type ProviderSpec } from './catalog.ts';
import { numberingRepo } from './repository.ts';

export interface ProviderBody { providerId: string; default?: boolean; enabled?: boolean; config?: Record<string, string> }

/** Where each provider's secrets are sent: the setting naming the address, and the address without it. */
const SECRET_TARGETS: Record<string, { target: string; fallback: string }> = {
  twilio: { target: 'apiBaseUrl', fallback: DEFAULT_TWILIO_API_BASE_URL },
};

/**
 * A stored secret goes only to the origin it was given for (docs/api.md, "Secrets and their
 * targets"): a change of the target setting's origin (the default address counting as the
 * setting's when it is not set) must carry every stored secret again.
 */
function checkSecretTargets(spec: ProviderSpec, current: { config: Record<string, string>; secrets?: Record<string, string> }, config: Record<string, string>, sent: Record<string, string>): void {
  const bound = SECRET_TARGETS[spec.providerId];
  if (!bound) return;
  const before = urlOrigin(current.config[bound.target] ?? bound.fallback);
  const after = urlOrigin(config[bound.target] ?? bound.fallback);
  for (const name of spec.secretConfig) {
    const refused = secretTargetRefusal({
      secret: `config.${name}`, target: `config.${bound.target}`, before, after,
      keeps: current.secrets?.[name] !== undefined && sent[name] === undefined,
    });
    if (refused) throw new Invalid(refused);
  }
}

/**
 * A provider's `phoneNumber` is the number its carrier sends from and receives on: one another
 * organization holds (bought or brought, docs/numbers.md) is refused like a held number is.
 */
async function checkPhoneNumber(heldElsewhere: NumberHeldElsewhere, orgId: number, config: Record<string, string>): Promise<void> {
  const phone = config.phoneNumber;
  if (phone !== undefined && await heldElsewhere(orgId, phone)) {
    throw new Conflict(`config.phoneNumber ${phone} is held by another organization`);
  }
}

/**
 * Whether another organization than `orgId` holds `number` in phone_numbers (any state): the numbers
 * module's answer (numberTakenElsewhere with providers: false, src/modules/phone-numbers/holders.ts),
 * handed in by src/platform.ts because numbers sits above numbering (docs/architecture.md, "The
 * order of modules").
 */
export type NumberHeldElsewhere = (orgId: number, number: string) => Promise<boolean>;

export function numberingService(deps: { db: Db; box: SecretBox; heldElsewhere: NumberHeldElsewhere }) {
  const { db, box, heldElsewhere } = deps;
  const ancestors = ['partner', 'reseller'] as const;

  return {
    catalog(scope: Scope) {
      scope.requireActor(ancestors, 'list numbering providers');
      const numberingProviders = Object.values(PROVIDERS).map(({ aliases, patterns: _patterns, ...spec }) => ({
        ...spec, acceptedAliases: aliases,
      }));
      return { success: true, message: 'Numbering providers fetched successfully', numberingProviders };
    },

    async add(scope: Scope, targetOrganizationId: number, body: ProviderBody) {
      scope.requireActor(ancestors, 'add a numbering provider');
      const org = await scope.account(targetOrganizationId, ['organization'], 'targetOrganizationId');
      const spec = providerSpec(body.providerId, 'providerId');
      if (!body.config) throw new Invalid('config is required');
      const p = normalizeProviderConfig(spec, body.config, 'config');
      await checkPhoneNumber(heldElsewhere, org.id, p.config);
      const now = nowMs();
      try {
        const row = await db.transaction().execute(async (tx) => {
          const first = (await numberingRepo.listForOrg(tx, org.id)).length === 0;
          const isDefault = body.default === true || first;
          const inserted = await numberingRepo.insert(tx, {
            org_id: org.id, provider_id: p.providerId, is_default: flag(isDefault), enabled: flag(body.enabled !== false),
            config: JSON.stringify(p.config), secrets: Object.keys(p.secrets).length ? box.sealJson(p.secrets) : null,
            created_at: now, updated_at: now,
          });
          if (isDefault) await numberingRepo.clearDefault(tx, org.id, inserted.id);
          return inserted;
        });
        return { success: true, message: 'Numbering provider added', numberingProvider: presentProvider(row, box) };
      } catch (err) {
        if (isUniqueViolation(err)) throw new Invalid(`providerId '${p.providerId}' is already configured for organization ${org.id}; use PUT to change it`);
        throw err;
      }
    },

    async update(scope: Scope, targetOrganizationId: number, body: ProviderBody) {
      scope.requireActor(ancestors, 'update a numbering provider');
      const org = await scope.account(targetOrganizationId, ['organization'], 'targetOrganizationId');
      const spec = providerSpec(body.providerId, 'providerId');
      if (body.default === undefined && body.enabled === undefined && body.config === undefined) {
        throw new Invalid('nothing to update: send default, enabled or config');
      }
      const patch = body.config ? normalizeProviderConfig(spec, body.config, 'config', true) : undefined;
      if (patch) await checkPhoneNumber(heldElsewhere, org.id, patch.config);
      // Read and write in one transaction, the row locked (on PostgreSQL), so two concurrent
      // updates merge their settings instead of one overwriting the other.
      const updated = await db.transaction().execute(async (tx) => {
        const row = await numberingRepo.find(tx, org.id, spec.providerId, { lock: true });
        if (!row) throw new NotFound(`providerId '${spec.providerId}' is not configured for organization ${org.id}`);
        const current = openProviderSettings(row, box);
        const config = { ...current.config, ...(patch?.config ?? {}) };
        const secrets = { ...current.secrets, ...(patch?.secrets ?? {}) };
        checkSecretTargets(spec, current, config, patch?.secrets ?? {});
        await numberingRepo.update(tx, row.id, {
          config: JSON.stringify(config),
          secrets: Object.keys(secrets).length ? box.sealJson(secrets) : null,
          ...(body.default !== undefined ? { is_default: flag(body.default) } : {}),
          ...(body.enabled !== undefined ? { enabled: flag(body.enabled) } : {}),
          updated_at: nowMs(),
        });
        if (body.default === true) await numberingRepo.clearDefault(tx, org.id, row.id);
        return (await numberingRepo.find(tx, org.id, spec.providerId))!;
      });
      return { success: true, message: 'Numbering provider updated', numberingProvider: presentProvider(updated, box) };
    },
  };
}

export type NumberingService = ReturnType<typeof numberingService>;
