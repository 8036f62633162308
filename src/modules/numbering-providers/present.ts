// How an organization's numbering providers look on the wire (contract field names, unix seconds,
// secrets masked).
import type { NumberingProviderRow } from '../../db/types.ts';
import { bool } from '../../db/flags.ts';
import type { SecretBox } from '../../lib/crypto.ts';
import { toUnixSeconds } from '../../lib/time.ts';
import { maskRecord } from '../accounts/present.ts';
import { openProviderSettings } from './carriers.ts';

export function presentProvider(row: NumberingProviderRow, box: SecretBox) {
  const { config, secrets = {} } = openProviderSettings(row, box);
  return {
    providerId: row.provider_id,
    default: bool(row.is_default),
    enabled: bool(row.enabled),
    config: { ...config, ...maskRecord(secrets, () => true) },
    createdAt: toUnixSeconds(row.created_at),
    updatedAt: toUnixSeconds(row.updated_at),
  };
}
