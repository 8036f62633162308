// A held phone number as the API shows it (times in unix seconds): the numbers operations, and
// the agent's own reads (GET /api/v2/account, GET /api/v2/agent/{agentId}) that carry its numbers.
import { bool } from '../../db/flags.ts';
import type { PhoneNumberRow } from '../../db/types.ts';

/** The number as the API shows it (times in unix seconds). */
export function presentNumber(row: PhoneNumberRow) {
  return {
    number: row.number,
    agentId: row.agent_id,
    kind: row.kind,
    state: row.state,
    provider: row.provider,
    simulated: bool(row.simulated),
    country: row.country,
    locality: row.locality,
    region: row.region,
    capabilities: row.capabilities ? JSON.parse(row.capabilities) as Record<string, boolean> : null,
    ...(row.last_error ? { lastError: row.last_error } : {}),
    createdAt: Math.floor(row.created_at / 1000),
  };
}
