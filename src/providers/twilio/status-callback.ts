// Twilio's status callbacks (call progress, message status) read into our task outcomes.
import { callOutcome, textOutcome, type MapOptions, type ResultBase, type TaskOutcome } from '../carrier.ts';
import { TWILIO } from './carrier.ts';
import { first, toRecord, type TwilioParams } from './form.ts';

export interface StatusCallbackEvent {
  kind: 'call' | 'message';
  /** CallSid / MessageSid: the task's provider_ref. */
  providerRef: string;
  accountSid?: string;
  status: string;
  /** Twilio numbers call progress events; callbacks can arrive out of order. */
  sequenceNumber?: number;
  /** Our final outcome; null while the call or text is still under way. */
  final: TaskOutcome | null;
}

/**
 * A Twilio status callback (call progress or message status) → our outcome. null when the form is
 * not a status callback we understand (the route should answer 400).
 */
export function parseStatusCallback(form: TwilioParams, opts: MapOptions = {}): StatusCallbackEvent | null {
  const p = toRecord(form);
  const accountSid = first(p, 'AccountSid');
  const messageSid = first(p, 'MessageSid') ?? first(p, 'SmsSid');
  const messageStatus = first(p, 'MessageStatus') ?? first(p, 'SmsStatus');
  const callSid = first(p, 'CallSid');
  const callStatus = first(p, 'CallStatus');
  const errorCode = first(p, 'ErrorCode');
  if (messageSid && messageStatus) {
    const base: ResultBase = { provider: TWILIO, providerRef: messageSid };
    const to = first(p, 'To');
    const from = first(p, 'From');
    if (to) base.to = to;
    if (from) base.from = from;
    if (errorCode) base.errorCode = errorCode;
    return { kind: 'message', providerRef: messageSid, accountSid, status: messageStatus.toLowerCase(), final: textOutcome(messageStatus, base, opts) };
  }
  if (callSid && callStatus) {
    const base: ResultBase = { provider: TWILIO, providerRef: callSid };
    const duration = Number(first(p, 'CallDuration'));
    if (Number.isFinite(duration) && duration >= 0 && first(p, 'CallDuration') !== undefined) base.durationSeconds = duration;
    const to = first(p, 'To');
    const from = first(p, 'From');
    if (to) base.to = to;
    if (from) base.from = from;
    if (errorCode) base.errorCode = errorCode;
    const sip = first(p, 'SipResponseCode');
    if (sip) base.sipResponseCode = sip;
    const answeredBy = first(p, 'AnsweredBy');
    if (answeredBy) base.answeredBy = answeredBy;
    const seq = Number(first(p, 'SequenceNumber'));
    return {
      kind: 'call', providerRef: callSid, accountSid, status: callStatus.toLowerCase(),
      ...(Number.isInteger(seq) && first(p, 'SequenceNumber') !== undefined ? { sequenceNumber: seq } : {}),
      final: callOutcome(callStatus, base, opts),
    };
  }
  return null;
}
