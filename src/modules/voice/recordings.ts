// Call recordings on disk: `<dataDir>/recordings/<orgId>/<conversationId>.wav`, written by the
// worker that carried the call (src/media/call-recorder.ts, started in start-call.ts), read by
// GET /api/v2/conversation/{roomId}/{uuid}/recording in whichever process serves the API (so
// processes share DATA_DIR/recordings), and swept by maintenance: past the retention, left over
// from a crash (`.part`), or whose conversation was deleted. docs/voice.md, "Recording".
import fs from 'node:fs';
import path from 'node:path';
import type { ConversationRow, Db } from '../../db/types.ts';
import { conversationRepo } from '../conversations/repository.ts';

const DAY_MS = 86_400_000;
/** Files looked at per sweep, and deleted per sweep: one run stays short whatever piles up. */
export const SWEEP_MAX_EXAMINED = 5000;
export const SWEEP_MAX_DELETED = 1000;
/** Conversations asked about per statement. */
const EXISTS_BATCH = 500;
const ID = /^[A-Za-z0-9_-]{1,100}$/;

/** The API path of a conversation's recording (GET /api/v2/conversation/{roomId}/{uuid}/recording): the contract's voicemailRecording. */
export function recordingPath(c: Pick<ConversationRow, 'id' | 'account_id' | 'room_id'>): string {
  return `/api/v2/conversation/${c.account_id}:${c.room_id}/${c.id}/recording`;
}

export interface RecordingStoreDeps {
  db: Db;
  /** `<dataDir>/recordings`. */
  dir: string;
  retentionDays: number;
  /** The longest recording (a `.part` file older than this and an hour is a crashed worker's). */
  maxSeconds: number;
  now?: () => number;
  log?: { warn(obj: object, msg: string): void };
}

export function recordingStore(deps: RecordingStoreDeps) {
  const clock = deps.now ?? Date.now;
  /** Where the last sweep stopped (one sweep may not get through them all): the organization done last, or a file within one. */
  let cursor = -1;
  let resume: { orgId: number; after: string } | undefined;

  function fileOf(orgId: number, conversationId: string): string | null {
    if (!Number.isSafeInteger(orgId) || orgId <= 0 || !ID.test(conversationId)) return null;
    return path.join(deps.dir, String(orgId), `${conversationId}.wav`);
  }

  async function remove(file: string): Promise<boolean> {
    try {
      await fs.promises.unlink(file);
      return true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') deps.log?.warn({ file, err: (err as Error).message }, 'a recording could not be deleted');
      return false;
    }
  }

  return {
    /** Where a conversation's recording is written; null for ids that cannot name a file. */
    fileOf,

    /** The path relative to the data directory, for the conversation's record. */
    relative(file: string): string {
      return path.join('recordings', path.relative(deps.dir, file));
    },

    /** The recording as a stream and its size, or null when there is none. */
    async open(orgId: number, conversationId: string): Promise<{ stream: fs.ReadStream; size: number } | null> {
      const file = fileOf(orgId, conversationId);
      if (!file) return null;
      const stat = await fs.promises.stat(file).catch(() => undefined);
      if (!stat?.isFile()) return null;
      return { stream: fs.createReadStream(file, { start: 0, end: Math.max(0, stat.size - 1) }), size: stat.size };
    },

    /** Deletes a conversation's recording (nothing when there is none). */
    async delete(orgId: number, conversationId: string): Promise<boolean> {
      const file = fileOf(orgId, conversationId);
      return file ? remove(file) : false;
    },

    /**
     * One bounded pass of the sweep: deletes recordings older than the retention (by the file's
     * time), partial files of crashed workers, and recordings whose conversation no longer exists
     * (an organization or agent deleted with its conversations). Returns how many it deleted.
     */
    async sweep(): Promise<number> {
      const now = clock();
      const expired = now - deps.retentionDays * DAY_MS;
      const abandoned = now - deps.maxSeconds * 1000 - 3_600_000;
      const orgs = (await fs.promises.readdir(deps.dir).catch(() => [] as string[]))
        .filter((n) => /^\d{1,15}$/.test(n)).map(Number).sort((a, b) => a - b);
      const first = resume?.orgId ?? cursor + 1;
      const order = [...orgs.filter((o) => o >= first), ...orgs.filter((o) => o < first)];
      let examined = 0;
      let deleted = 0;
      for (const orgId of order) {
        if (examined >= SWEEP_MAX_EXAMINED || deleted >= SWEEP_MAX_DELETED) break;
        const orgDir = path.join(deps.dir, String(orgId));
        const from = resume?.orgId === orgId ? resume.after : '';
        resume = undefined;
        const names = (await fs.promises.readdir(orgDir).catch(() => [] as string[])).filter((n) => n > from).sort();
        const kept: string[] = [];
        let complete = true;
        let last = from;
        for (const name of names) {
          if (examined >= SWEEP_MAX_EXAMINED || deleted >= SWEEP_MAX_DELETED) {
            complete = false;
            break;
          }
          examined++;
          last = name;
          const file = path.join(orgDir, name);
          const stat = await fs.promises.stat(file).catch(() => undefined);
          if (!stat?.isFile()) continue;
          const id = name.endsWith('.wav') ? name.slice(0, -4) : undefined;
          if (name.endsWith('.wav.part') ? stat.mtimeMs < abandoned : stat.mtimeMs < expired) {
            if (await remove(file)) deleted++;
          } else if (id && ID.test(id)) {
            kept.push(id);
          }
        }
        for (let i = 0; i < kept.length && deleted < SWEEP_MAX_DELETED; i += EXISTS_BATCH) {
          const batch = kept.slice(i, i + EXISTS_BATCH);
          const exist = await conversationRepo.existingIds(deps.db, orgId, batch);
          for (const id of batch) {
            if (!exist.has(id) && deleted < SWEEP_MAX_DELETED && await remove(path.join(orgDir, `${id}.wav`))) deleted++;
          }
        }
        if (!complete) {
          resume = { orgId, after: last };
          break;
        }
        cursor = orgId;
        // An organization's emptied directory goes once nothing has been written there for a day.
        const left = await fs.promises.readdir(orgDir).catch(() => ['?']);
        const dirStat = await fs.promises.stat(orgDir).catch(() => undefined);
        if (left.length === 0 && dirStat && dirStat.mtimeMs < now - DAY_MS) await fs.promises.rmdir(orgDir).catch(() => {});
      }
      return deleted;
    },
  };
}

export type RecordingStore = ReturnType<typeof recordingStore>;
