// What an organization's SIP calls go out by, shared by the SIP carrier (sip.ts) and the attended
// transfer (sip-transfer.ts), which sip.ts runs: a file of its own so that neither imports the other
// for it.
import type { SipRoute } from '../sip/call.ts';

/** An organization's way out: its routes in order, and who it calls as. */
export interface SipCallPlan {
  orgId: number;
  routes: Array<SipRoute & { text: string }>;
  /** Our user (sip:from@our host) or a full SIP URI: the registration's AOR when there is one. */
  from: string;
  credentials?: { username: string; authUsername?: string; password: string };
}
