// An organization's message signing secret (whsec_…, Standard Webhooks): it signs its agents'
// replies to receiveMessage and the calls its agents' webhook actions make. Issued on first use
// (or by POST /api/v2/updateOrganization, which answers it once in full), stored sealed.
import type { Executor } from '../../db/types.ts';
import type { SecretBox } from '../../lib/crypto.ts';
import { newSigningSecret } from '../../webhooks/deliver.ts';
import { accountRepo } from './repository.ts';

export async function messageSecret(db: Executor, box: SecretBox, orgId: number): Promise<string> {
  const sealed = await accountRepo.ensureMessageSecret(db, orgId, box.seal(newSigningSecret()));
  if (!sealed) throw new Error(`organization ${orgId} was not found`);
  return box.open(sealed);
}
