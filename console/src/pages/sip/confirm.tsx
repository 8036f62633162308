// A destructive action asked twice, in the page (no window.confirm): the question and its two
// answers appear in place of the button, the "yes" focused, Escape or "Cancel" to go back.
import { useEffect, useRef, useState } from 'react';
import { Button } from '../../ui/parts.tsx';
import './confirm.css';

export function ConfirmButton({ label, question, yes, onConfirm, disabled }: {
  /** The button's name (`Return +12125550100`). */
  label: string;
  /** What is about to happen, in words. */
  question: string;
  /** The confirming button's name (`Yes, return it`). */
  yes: string;
  onConfirm: () => void;
  disabled?: boolean;
}) {
  const [asking, setAsking] = useState(false);
  const yesRef = useRef<HTMLButtonElement>(null);
  useEffect(() => { if (asking) yesRef.current?.focus(); }, [asking]);
  if (!asking) return <Button kind="danger" disabled={disabled} onClick={() => setAsking(true)}>{label}</Button>;
  return (
    <span className="confirm" role="group" aria-label={question} onKeyDown={(e) => { if (e.key === 'Escape') setAsking(false); }}>
      <span>{question}</span>
      <button type="button" className="btn btn-danger" ref={yesRef} onClick={() => { setAsking(false); onConfirm(); }}>{yes}</button>
      <Button onClick={() => setAsking(false)}>Cancel</Button>
    </span>
  );
}
