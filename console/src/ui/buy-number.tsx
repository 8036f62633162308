// Buying a number: a number of the SIMULATED inventory is free and bought at once; a real
// provider's asks first, with its monthly price (or that the provider did not say it), since it
// spends money on the organization's account. Used by the onboarding's buy step and the Numbers page.
import { Button } from './parts.tsx';
import { Confirm } from './confirm.tsx';

export interface Buyable {
  number: string;
  simulated: boolean;
  monthlyPrice?: { amount: string; currency: string } | null;
}

export function BuyNumber({ n, agentName, disabled, onBuy, simulatedLabel = `Buy ${n.number}`, simulatedName }: {
  n: Buyable;
  agentName: string;
  disabled?: boolean;
  onBuy: () => void;
  /** The simulated number's button text. */
  simulatedLabel?: string;
  /** Its accessible name when the text alone is ambiguous in a list. */
  simulatedName?: string;
}) {
  if (n.simulated) return <Button kind="primary" disabled={disabled} onClick={onBuy} aria-label={simulatedName}>{simulatedLabel}</Button>;
  const price = n.monthlyPrice ? `${n.monthlyPrice.amount} ${n.monthlyPrice.currency}` : undefined;
  return (
    <Confirm
      kind="normal" label={`Buy ${n.number}`} disabled={disabled} onConfirm={onBuy}
      confirm={`Yes, buy ${n.number}${price ? ` for ${price} a month` : ''}`}
      question={`Buy ${n.number} for ${agentName} at the organization's provider? ${price ? `It costs ${price} a month.` : 'The provider did not say its price.'}`}
    />
  );
}
