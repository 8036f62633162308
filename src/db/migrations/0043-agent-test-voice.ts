// Issue 36, voice mode (docs/testing-agents.md, "Voice mode"): a result of a run in voice mode keeps
// what the call measured beside its verdicts — each turn's latency as the caller heard it, the
// barge-ins (agent replies cut short), and what the caller heard the agent say through the
// recogniser. JSON; null for text mode's results.
import type { Kysely } from 'kysely';

export function agentTestVoice() {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema.alterTable('agent_test_results').addColumn('voice', 'text').execute();
    },
  };
}
