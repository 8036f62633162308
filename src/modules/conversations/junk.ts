// The junk rules: whether a room belongs in the junk inbox, and why. Pure functions, called by the
// conversation engine when a room opens or an inbound message arrives (and by the history when the
// organization clears its own decision). docs/conversations.md, "Junk".
//
// In order, the first that applies decides:
//   1. the organization's own decision (junk_override: 1 junk, 0 not junk), set with
//      POST /api/v2/conversations/{roomId}/junk — reason `marked`;
//   2. the counterpart (or its caller name) matches the agent's live cnamAutoRejectRegex — reason
//      `cnamAutoRejectRegex`;
//   3. on SMS: a short code (3–6 digits) — `shortCode`; an alphanumeric sender id (2–11 letters,
//      digits, spaces, `&._-`, at least one letter) — `alphanumericSender`;
//   4. on any channel: an automated address (no-reply@, noreply@, do-not-reply@, mailer-daemon@ …)
//      — `automatedAddress`.
// Short codes and sender ids are judged on SMS only: over the API a sourceAddress such as `4521`
// or `alice` is the caller's own user id, and a 4-digit caller on a SIP trunk is an extension.
import type { ConversationChannel } from '../../db/types.ts';
import type { AgentSettings } from '../agents/settings.ts';

export type JunkReason = 'marked' | 'cnamAutoRejectRegex' | 'shortCode' | 'alphanumericSender' | 'automatedAddress';

export interface JunkDecision {
  junk: 0 | 1;
  /** Why it is junk; null when it is not. */
  reason: JunkReason | null;
}

export interface JunkSubject {
  /** The room's counterpart as stored: E.164, `web:<visitor>`, or a lowercased address. */
  counterpart: string;
  /** The caller name (CNAM) or display name, when known. */
  displayName?: string | null;
  /** The channel the counterpart reached the agent on. */
  channel: ConversationChannel;
  /** The organization's own decision: 1 junk, 0 not junk, null (or absent) the rules decide. */
  override?: number | null;
}

const SHORT_CODE = /^\+?\d{3,6}$/;
const ALPHANUMERIC_SENDER = /^(?=.*[a-z])[a-z0-9][a-z0-9 &._-]{1,10}$/i;
const AUTOMATED_ADDRESS = /^(?:no[-_.]?reply|do[-_.]?not[-_.]?reply|mailer[-_.]?daemon)(?:[+.-][^@]*)?@/i;

/** A 3–6 digit sender (SMS short codes). */
export const isShortCode = (counterpart: string): boolean => SHORT_CODE.test(counterpart.trim());

/** An alphanumeric SMS sender id: 2–11 characters with at least one letter (`AMAZON`, `Uber`, `BANK-INFO`). */
export const isAlphanumericSender = (counterpart: string): boolean => ALPHANUMERIC_SENDER.test(counterpart.trim());

/** An address machines send from and nobody reads: no-reply@, noreply@, do-not-reply@, mailer-daemon@ (any case). */
export const isAutomatedAddress = (counterpart: string): boolean => AUTOMATED_ADDRESS.test(counterpart.trim());

/**
 * Whether the agent's cnamAutoRejectRegex matches the counterpart or its caller name. The
 * configuration was checked when written (a regex that compiles and cannot backtrack
 * catastrophically); one that no longer compiles matches nothing.
 */
export function matchesRejectRegex(config: AgentSettings, subject: Pick<JunkSubject, 'counterpart' | 'displayName'>): boolean {
  const source = config.cnamAutoRejectRegex;
  if (source === null || source === '') return false;
  let re: RegExp;
  try {
    re = new RegExp(source);
  } catch {
    return false;
  }
  return re.test(subject.counterpart) || (typeof subject.displayName === 'string' && subject.displayName !== '' && re.test(subject.displayName));
}

/** The rules alone, without the organization's decision. */
export function junkByRules(subject: JunkSubject, config: AgentSettings): JunkDecision {
  if (matchesRejectRegex(config, subject)) return { junk: 1, reason: 'cnamAutoRejectRegex' };
  if (subject.channel === 'sms') {
    if (isShortCode(subject.counterpart)) return { junk: 1, reason: 'shortCode' };
    if (isAlphanumericSender(subject.counterpart)) return { junk: 1, reason: 'alphanumericSender' };
  }
  if (isAutomatedAddress(subject.counterpart)) return { junk: 1, reason: 'automatedAddress' };
  return { junk: 0, reason: null };
}

/** Whether the room is junk: the organization's decision when it made one, else the rules. */
export function decideJunk(subject: JunkSubject, config: AgentSettings): JunkDecision {
  if (subject.override === 1) return { junk: 1, reason: 'marked' };
  if (subject.override === 0) return { junk: 0, reason: null };
  return junkByRules(subject, config);
}
