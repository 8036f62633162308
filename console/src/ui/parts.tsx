// The console's shared parts: every control has a label, every error is said in words (the API's
// own message, which names the field), tables have headers, and nothing depends on colour alone.
import { useId, type ButtonHTMLAttributes, type InputHTMLAttributes, type ReactNode, type SelectHTMLAttributes, type TextareaHTMLAttributes } from 'react';
import { messageOf } from '../api.ts';

export function Page({ title, actions, children }: { title: string; actions?: ReactNode; children: ReactNode }) {
  return (
    <section aria-labelledby="page-title" className="page">
      <header className="page-head">
        <h1 id="page-title" tabIndex={-1}>{title}</h1>
        {actions ? <div className="actions">{actions}</div> : null}
      </header>
      {children}
    </section>
  );
}

export function Section({ title, actions, children }: { title: string; actions?: ReactNode; children: ReactNode }) {
  const id = useId();
  return (
    <section aria-labelledby={id} className="card">
      <div className="card-head"><h2 id={id}>{title}</h2>{actions ? <div className="actions">{actions}</div> : null}</div>
      {children}
    </section>
  );
}

/** An error said in words, announced to screen readers as it appears. */
export function ErrorNote({ error }: { error: unknown }) {
  if (!error) return null;
  return <p role="alert" className="error">{messageOf(error)}</p>;
}

export function Note({ children }: { children: ReactNode }) {
  return <p role="status" className="note">{children}</p>;
}

export function Loading({ what = 'Loading' }: { what?: string }) {
  return <p role="status" className="muted">{what}…</p>;
}

export function Button({ kind = 'normal', ...rest }: { kind?: 'normal' | 'primary' | 'danger' } & ButtonHTMLAttributes<HTMLButtonElement>) {
  return <button type="button" className={`btn btn-${kind}`} {...rest} />;
}

export function Field({ label, hint, ...rest }: { label: string; hint?: string } & InputHTMLAttributes<HTMLInputElement>) {
  const id = useId();
  return (
    <div className="field">
      <label htmlFor={id}>{label}</label>
      <input id={id} aria-describedby={hint ? `${id}-hint` : undefined} {...rest} />
      {hint ? <small id={`${id}-hint`} className="muted">{hint}</small> : null}
    </div>
  );
}

export function TextArea({ label, hint, ...rest }: { label: string; hint?: string } & TextareaHTMLAttributes<HTMLTextAreaElement>) {
  const id = useId();
  return (
    <div className="field">
      <label htmlFor={id}>{label}</label>
      <textarea id={id} aria-describedby={hint ? `${id}-hint` : undefined} {...rest} />
      {hint ? <small id={`${id}-hint`} className="muted">{hint}</small> : null}
    </div>
  );
}

export function Select({ label, options, ...rest }: { label: string; options: readonly (string | { value: string; label: string })[] } & SelectHTMLAttributes<HTMLSelectElement>) {
  const id = useId();
  return (
    <div className="field">
      <label htmlFor={id}>{label}</label>
      <select id={id} {...rest}>
        {options.map((o) => typeof o === 'string' ? <option key={o} value={o}>{o}</option> : <option key={o.value} value={o.value}>{o.label}</option>)}
      </select>
    </div>
  );
}

export interface Column<T> { key: string; label: string; cell: (row: T) => ReactNode }

/** A table with a caption and column headers; `empty` says what an empty one means. */
export function Table<T>({ caption, columns, rows, rowKey, empty = 'Nothing yet.' }: {
  caption: string; columns: Column<T>[]; rows: readonly T[]; rowKey: (row: T) => string | number; empty?: string;
}) {
  if (rows.length === 0) return <p className="muted">{empty}</p>;
  return (
    <div className="table-wrap" tabIndex={0} aria-label={caption}>
      <table>
        <caption className="sr-only">{caption}</caption>
        <thead><tr>{columns.map((c) => <th key={c.key} scope="col">{c.label}</th>)}</tr></thead>
        <tbody>
          {rows.map((r) => <tr key={rowKey(r)}>{columns.map((c) => <td key={c.key} data-label={c.label}>{c.cell(r)}</td>)}</tr>)}
        </tbody>
      </table>
    </div>
  );
}

/** A state in words and in a colour (never the colour alone). */
export function Badge({ tone = 'neutral', children }: { tone?: 'neutral' | 'good' | 'warn' | 'bad' | 'live'; children: ReactNode }) {
  return <span className={`badge badge-${tone}`}>{children}</span>;
}
