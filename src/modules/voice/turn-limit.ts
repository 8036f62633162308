// The turn time limit of every spoken path, enforced in one place: the agent's turn (the model and
// the tools it calls) runs with an abort signal, and past the limit (the call policy's
// VOICE_TURN_TIMEOUT_MS unless the process was given another) the signal aborts it with
// `TurnTooSlow` and nobody waits for it any longer. Gather (twilio/calls.ts) and the
// voice session (session.ts) both run their turns here and turn what went wrong into the one event
// the policy decides on (`turnFailure`).
import type { TurnInput, TurnResult, TurnRunner } from '../conversations/turn.ts';
import type { CallEvent } from './call-policy.ts';

/** The turn did not finish within its limit. */
export class TurnTooSlow extends Error {
  readonly limitMs: number;
  constructor(limitMs: number) {
    super(`the turn took longer than ${limitMs} ms`);
    this.name = 'TurnTooSlow';
    this.limitMs = limitMs;
  }
}

/**
 * Runs the turn with `abort`'s signal, bounded by `limitMs`: past it the signal is aborted with a
 * `TurnTooSlow`, which the returned promise rejects with. A turn that settles later (a step that
 * does not listen to the signal) is nobody's then.
 */
export async function boundedTurn(turns: Pick<TurnRunner, 'run'>, input: Omit<TurnInput, 'signal'>, limitMs: number, abort = new AbortController()): Promise<TurnResult> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => { const e = new TurnTooSlow(limitMs); abort.abort(e); reject(e); }, limitMs);
  });
  const run = turns.run({ ...input, signal: abort.signal });
  run.catch(() => undefined);
  try {
    return await Promise.race([run, expired]);
  } finally {
    clearTimeout(timer);
  }
}

/** What a turn that threw means to the call policy: too slow, or failed (with why). */
export function turnFailure(err: unknown): Extract<CallEvent, { kind: 'turnTooSlow' | 'turnFailed' }> {
  if (err instanceof TurnTooSlow) return { kind: 'turnTooSlow', limitMs: err.limitMs };
  return { kind: 'turnFailed', reason: err instanceof Error ? err.message : String(err) };
}
