// Issue 27, voicemail on outbound calls: who answered a call (`answered_by`: human, machine or
// unknown — Twilio's answering-machine detection, or the audio detector on SIP) and when that was
// decided; `voicemail_recording`, the API path of the recording holding the message left on a
// machine (the contract's `voicemailRecording`). A call task's `voicemail` is its own choice of
// what to do on a machine (JSON `{action, message}`), over the agent's voicemailAction.
import type { Kysely } from 'kysely';

export function voicemail() {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema.alterTable('conversations').addColumn('answered_by', 'text').execute();
      await db.schema.alterTable('conversations').addColumn('answered_by_at', 'bigint').execute();
      await db.schema.alterTable('conversations').addColumn('voicemail_recording', 'text').execute();
      await db.schema.alterTable('tasks').addColumn('voicemail', 'text').execute();
    },
  };
}
