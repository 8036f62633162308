// An organization's integrations: reading and changing the appData of one it has, sealed at rest
// (the SecretBox, like numbering providers' secrets) and masked in every answer.
import type { Db } from '../../db/types.ts';
import { Invalid, NotFound } from '../../http/errors.ts';
import type { Scope } from '../../http/auth.ts';
import type { SecretBox } from '../../lib/crypto.ts';
import { secretTargetRefusal, urlOrigin } from '../../lib/secret-target.ts';
import { nowMs } from '../../lib/time.ts';
import { maskAppData } from '../accounts/present.ts';
import { integrationRepo } from '../numbering-providers/repository.ts';
import { checkSize, validateAppData } from './validation.ts';

type AppData = Record<string, unknown>;

/**
 * The stored appData with `patch` merged in, key by key: a key sent replaces its value, a key
 * sent as null is removed, a key not sent is kept. A value sent back exactly as an answer showed
 * it masked (`****1234`) keeps the stored secret, so a client may PUT what it got from GET.
 */
export function mergeAppData(stored: AppData, patch: AppData): AppData {
  const out: AppData = { ...stored };
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) { delete out[k]; continue; }
    if (k in stored) {
      const shown = (maskAppData({ [k]: stored[k] }) as AppData)[k];
      const masked = JSON.stringify(shown) !== JSON.stringify(stored[k]);
      if (masked && JSON.stringify(shown) === JSON.stringify(v)) continue;
    }
    out[k] = v;
  }
  return out;
}

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

/** A top-level value's origin when it is an absolute URL with a host (a base URL, an endpoint), else null. */
function originOf(value: unknown): string | null {
  if (typeof value !== 'string') return null;
  try {
    return new URL(value.trim()).host === '' ? null : urlOrigin(value);
  } catch {
    return null;
  }
}

/**
 * A stored secret goes only to the origin it was given for (docs/api.md, "Secrets and their
 * targets"). appData says nothing of which secret goes where, so every top-level key holding a URL
 * is taken as a target of every top-level secret (a key whose value answers masked): when a URL's
 * origin changes (set, changed or removed), each secret the merge keeps must be sent again (or
 * removed with null) in the same PUT. 400 naming the first one otherwise.
 */
export function checkAppDataTargets(stored: AppData, patch: AppData, merged: AppData): void {
  const keys = [...new Set([...Object.keys(stored), ...Object.keys(merged)])];
  const moved = keys.find((k) => originOf(stored[k]) !== originOf(merged[k]));
  if (moved === undefined) return;
  for (const [k, v] of Object.entries(stored)) {
    const shown = (maskAppData({ [k]: v }) as AppData)[k];
    const secret = !same(shown, v);
    // Kept: not sent, or sent back as an answer showed it (masked).
    const kept = !Object.hasOwn(patch, k) || same(patch[k], shown);
    const refused = secretTargetRefusal({
      secret: `appData.${k}`, target: `appData.${moved}`, before: originOf(stored[moved]), after: originOf(merged[moved]),
      keeps: secret && kept,
    });
    if (refused) throw new Invalid(refused);
  }
}

export function integrationService(deps: { db: Db; box: SecretBox }) {
  const { db, box } = deps;

  function answer(message: string, row: { app_id: string; app_version: string; app_data: string; updated_at: number }) {
    return {
      success: true, message, appId: row.app_id, appVersion: row.app_version,
      appData: maskAppData(box.openJson<AppData>(row.app_data)) as AppData,
      updatedAt: Math.floor(row.updated_at / 1000),
    };
  }

  function notFound(orgId: number, slug: string, version: string): NotFound {
    return new NotFound(`Integration data not found: organization ${orgId} has no integration ${slug} ${version}`);
  }

  return {
    async get(scope: Scope, targetAccountId: number | undefined, slug: string, version: string) {
      const org = await scope.target(targetAccountId, ['organization']);
      const row = await integrationRepo.find(db, org.id, slug);
      if (!row || row.app_version !== version) throw notFound(org.id, slug, version);
      return answer('Integration data fetched successfully', row);
    },

    async update(scope: Scope, targetAccountId: number | undefined, slug: string, version: string, appData: unknown) {
      const org = await scope.target(targetAccountId, ['organization']);
      const patch = validateAppData(appData);
      // Read, merge and write under the row's lock (PostgreSQL; SQLite has one writer), so two
      // concurrent PUTs of different keys both keep theirs.
      const row = await db.transaction().execute(async (tx) => {
        const found = await integrationRepo.find(tx, org.id, slug, { lock: true });
        if (!found || found.app_version !== version) throw notFound(org.id, slug, version);
        const stored = box.openJson<AppData>(found.app_data);
        const merged = mergeAppData(stored, patch);
        checkAppDataTargets(stored, patch, merged);
        checkSize(merged);
        return integrationRepo.updateData(tx, found.id, box.sealJson(merged), nowMs());
      });
      return answer('Integration data updated successfully', row);
    },
  };
}

export type IntegrationService = ReturnType<typeof integrationService>;
