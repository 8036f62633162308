// The do-not-call list (#/o/<orgId>/do-not-call; docs/campaigns.md, "Do-not-call"): the
// organization's list, or, for a reseller or partner, its own list (which applies to every
// organization below it), paged newest first (listDoNotCall), with a number added
// (addDoNotCall) or removed (removeDoNotCall, asked twice), a CSV imported (importDoNotCall: the
// report's refused lines shown) and the list exported (exportDoNotCall, as a download). The API's
// own message is shown beside each form.
import { useState, type FormEvent } from 'react';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { api, CallplaneError, ok, when } from '../../api.ts';
import { useSession } from '../../session.tsx';
import { useBlobUrl } from '../../ui/blob-url.ts';
import { Confirm } from '../../ui/confirm.tsx';
import { Badge, Button, ErrorNote, Field, Loading, Note, Page, Section, Select, Table } from '../../ui/parts.tsx';

const PAGE = 50;

interface Entry { number: string; source: string; evidence: string | null; note: string | null; createdAt: number; listOf: number }
interface ImportReport { rows: number; valid: number; invalid: number; added: number; complete: boolean; errors: { line: number; message: string }[] }

const SOURCES: Record<string, string> = {
  api: 'added by hand or by the API', csv: 'imported from a CSV file', 'sms-stop': 'the person texted STOP', 'call-analysis': 'asked on a call not to be called again',
};

export default function DoNotCall() {
  const { account, orgId } = useSession();
  const above = account.kind === 'partner' || account.kind === 'reseller';
  // Whose list: the organization's (default), or the signed-in reseller's or partner's own.
  const [whose, setWhose] = useState<'organization' | 'own'>('organization');
  const target = whose === 'own' || !above ? undefined : orgId!;
  return (
    <Page title="Do-not-call list">
      <p className="muted">
        Numbers here are never called or texted: a task to one is refused when it is submitted, and one
        already queued is canceled before it is dialled or sent. A number also arrives here when its
        person texts STOP (START takes it off) or asks on a call not to be called again.
      </p>
      {above ? (
        <Select label="List" value={whose} onChange={(e) => setWhose(e.target.value as 'organization' | 'own')}
          options={[{ value: 'organization', label: 'This organization\'s list' }, { value: 'own', label: `Your own list (${account.kind}: applies to every organization below you)` }]} />
      ) : null}
      <List key={`${whose}:${target ?? 'self'}`} target={target} />
    </Page>
  );
}

const listKey = (target: number | undefined) => ['do-not-call', target ?? 'self'] as const;

function List({ target }: { target: number | undefined }) {
  const client = useQueryClient();
  const [offset, setOffset] = useState(0);
  const query = { ...(target !== undefined ? { targetAccountId: target } : {}) };
  const list = useQuery({
    queryKey: [...listKey(target), offset],
    queryFn: () => ok(api.GET('/api/v2/do-not-call', { params: { query: { ...query, limit: PAGE, offset } } })),
  });
  const refresh = () => void client.invalidateQueries({ queryKey: listKey(target) });
  const remove = useMutation({
    mutationFn: (number: string) => ok(api.DELETE('/api/v2/do-not-call/{number}', { params: { path: { number }, query } })),
    onSuccess: refresh,
  });
  const rows = (list.data?.numbers ?? []) as Entry[];
  const total = list.data?.total ?? 0;
  return (
    <>
      <Add query={query} onAdded={refresh} />
      <Section title="Numbers on the list">
        {list.isPending ? <Loading /> : list.error ? <ErrorNote error={list.error} /> : (
          <>
            <p className="muted">{total === 0 ? 'The list is empty.' : `${total} number${total === 1 ? '' : 's'}, newest first.`}</p>
            <Table<Entry> caption="Do-not-call numbers" rows={rows} rowKey={(e) => e.number} empty="No number on this list."
              columns={[
                { key: 'number', label: 'Number', cell: (e) => <code>{e.number}</code> },
                { key: 'source', label: 'How it came', cell: (e) => <>{e.source === 'sms-stop' || e.source === 'call-analysis' ? <Badge tone="warn">{e.source}</Badge> : e.source} <span className="muted">{SOURCES[e.source] ?? ''}</span></> },
                { key: 'note', label: 'Note', cell: (e) => e.note ?? (e.evidence ? <span className="muted">conversation {e.evidence}</span> : '—') },
                { key: 'at', label: 'Added', cell: (e) => when(e.createdAt) },
                { key: 'actions', label: 'Actions', cell: (e) => (
                  <Confirm label="Remove" name={`Remove ${e.number}`} question={`Take ${e.number} off the list? It may be called and texted again.`}
                    confirm="Yes, remove it" busy={remove.isPending} onConfirm={() => remove.mutate(e.number)} />
                ) },
              ]} />
            <ErrorNote error={remove.error} />
            {total > PAGE ? (
              <div className="actions" aria-label="Pages">
                <Button disabled={offset === 0} onClick={() => setOffset(Math.max(0, offset - PAGE))}>Newer</Button>
                <span className="muted">{offset + 1}–{Math.min(offset + PAGE, total)} of {total}</span>
                <Button disabled={offset + PAGE >= total} onClick={() => setOffset(offset + PAGE)}>Older</Button>
              </div>
            ) : null}
          </>
        )}
      </Section>
      <Import query={query} onImported={refresh} />
      <Export query={query} />
    </>
  );
}

function Add({ query, onAdded }: { query: { targetAccountId?: number }; onAdded: () => void }) {
  const [number, setNumber] = useState('');
  const [note, setNote] = useState('');
  const add = useMutation({
    mutationFn: () => ok(api.POST('/api/v2/do-not-call', { params: { query }, body: { number: number.trim(), ...(note.trim() ? { note: note.trim() } : {}) } })),
    onSuccess: () => { setNumber(''); setNote(''); onAdded(); },
  });
  const submit = (e: FormEvent) => { e.preventDefault(); add.mutate(); };
  return (
    <Section title="Add a number">
      <form onSubmit={submit} aria-label="Add a number to the list">
        <Field label="Number" value={number} onChange={(e) => setNumber(e.target.value)} required placeholder="+14155552671" hint="Any way of writing it; stored as E.164" />
        <Field label="Note (optional)" value={note} onChange={(e) => setNote(e.target.value)} maxLength={500} />
        <div className="actions"><Button kind="primary" type="submit" disabled={add.isPending}>Add to the list</Button></div>
        {add.isSuccess ? <Note>{add.data.added ? `${add.data.numbers.join(', ')} is on the list.` : `${add.data.numbers.join(', ')} was already on the list.`}</Note> : null}
        <ErrorNote error={add.error} />
      </form>
    </Section>
  );
}

function Import({ query, onImported }: { query: { targetAccountId?: number }; onImported: () => void }) {
  const [file, setFile] = useState<File | null>(null);
  const upload = useMutation({
    mutationFn: async (): Promise<ImportReport> => {
      const form = new FormData();
      form.append('csv', file!, file!.name);
      const url = new URL('/api/v2/do-not-call/csv', window.location.origin);
      if (query.targetAccountId !== undefined) url.searchParams.set('targetAccountId', String(query.targetAccountId));
      const res = await fetch(url, { method: 'POST', body: form, credentials: 'same-origin', headers: { 'x-callplane-console': '1' } });
      const body = await res.json().catch(() => ({})) as Record<string, unknown>;
      if (!res.ok) throw new CallplaneError(res.status, { ...body, success: false, message: typeof body.message === 'string' ? body.message : `${res.status} ${res.statusText}` });
      return body as unknown as ImportReport;
    },
    onSuccess: onImported,
  });
  const submit = (e: FormEvent) => { e.preventDefault(); if (file) upload.mutate(); };
  const r = upload.data;
  return (
    <Section title="Import from a CSV file">
      <form onSubmit={submit} aria-label="Import numbers from a CSV file">
        <label className="field">
          <span>CSV file: the number in the first column, an optional header row (number, note)</span>
          <input type="file" accept=".csv,text/csv" onChange={(e) => setFile(e.target.files?.[0] ?? null)} />
        </label>
        <div className="actions"><Button kind="primary" type="submit" disabled={!file || upload.isPending}>Import</Button></div>
        {r ? (
          <div role="status">
            <p>{r.rows} row{r.rows === 1 ? '' : 's'} read: {r.added} added, {r.valid - r.added} already on the list, {r.invalid} refused.</p>
            {r.errors.length ? <ul className="errors">{r.errors.map((x) => <li key={x.line}>Line {x.line}: {x.message}</li>)}</ul> : null}
          </div>
        ) : null}
        <ErrorNote error={upload.error} />
      </form>
    </Section>
  );
}

function Export({ query }: { query: { targetAccountId?: number } }) {
  const [blob, setBlob] = useState<Blob | null>(null);
  const link = useBlobUrl<HTMLAnchorElement>(blob, 'href');
  const fetchCsv = useMutation({
    mutationFn: async () => {
      const r = await api.GET('/api/v2/do-not-call/csv', { params: { query }, parseAs: 'blob' });
      if (r.error || !r.data) throw new CallplaneError(r.response.status, { success: false, message: `${r.response.status} ${r.response.statusText}` });
      return r.data as Blob;
    },
    onSuccess: setBlob,
  });
  return (
    <Section title="Export">
      <p className="muted">The whole list as CSV (number, source, evidence, note, createdAt, listOf), which the import reads back.</p>
      {blob ? <a ref={link} download="do-not-call.csv">Download do-not-call.csv</a> : (
        <Button onClick={() => fetchCsv.mutate()} disabled={fetchCsv.isPending}>Prepare the CSV</Button>
      )}
      <ErrorNote error={fetchCsv.error} />
    </Section>
  );
}
