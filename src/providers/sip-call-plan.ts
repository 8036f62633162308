// What an organization's SIP calls go out by, shared by the SIP carrier (sip.ts) and the attended
// transfer (sip-transfer.ts), which sip.ts runs: a file of its own so that neither imports the other
// for it.
import type { SipCredentials, SipRoute } from '../sip/call.ts';

/** An organization's way out: its routes in order, and who it calls as. */
export interface SipCallPlan {
  orgId: number;
  /**
   * Each route with the credentials that may answer its next hop's challenges (bound to that host):
   * its own, else the registration's when the next hop is the registrar, else none.
   */
  routes: Array<SipRoute & { text: string; credentials?: SipCredentials }>;
  /** Our user (sip:from@our host) or a full SIP URI: the registration's AOR when there is one. */
  from: string;
}
