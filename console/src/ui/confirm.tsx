// A destructive action asked twice, in the page (no window.confirm): the question and its two
// answers replace the button, the confirming one focused; Escape or "Cancel" goes back.
import { useEffect, useRef, useState, type ReactNode } from 'react';
import { Button } from './parts.tsx';

export function Confirm({ label, name, question, confirm, onConfirm, disabled, busy, kind = 'danger' }: {
  /** The button's text (`Delete`, `Return +12125550100`). */
  label: string;
  /** The button's accessible name when its text alone is ambiguous in a list (`Delete token cpl_ab…`). */
  name?: string;
  /** What is about to happen, in words. */
  question: ReactNode;
  /** The confirming button's text (`Yes, return it`). */
  confirm: string;
  onConfirm: () => void;
  disabled?: boolean;
  /** The confirming button waits (a request under way). */
  busy?: boolean;
  kind?: 'danger' | 'normal';
}) {
  const [asking, setAsking] = useState(false);
  const yes = useRef<HTMLButtonElement>(null);
  useEffect(() => { if (asking) yes.current?.focus(); }, [asking]);
  if (!asking) return <Button kind={kind} disabled={disabled} aria-label={name} onClick={() => setAsking(true)}>{label}</Button>;
  return (
    <span className="confirm" role="group" aria-label={typeof question === 'string' ? question : (name ?? label)}
      onKeyDown={(e) => { if (e.key === 'Escape') setAsking(false); }}>
      <span>{question}</span>
      <button type="button" className="btn btn-danger" ref={yes} disabled={busy} onClick={() => { setAsking(false); onConfirm(); }}>{confirm}</button>
      <Button onClick={() => setAsking(false)}>Cancel</Button>
    </span>
  );
}
