// The organization's knowledge bases (what an agent's `knowledgeBases` names): list, create,
// delete; each one's documents (list, upload as multipart, delete) and a search of its chunks.
import { useState, type FormEvent } from 'react';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import type { components } from '../../../../sdk/schema.d.ts';
import { api, ok, when } from '../../api.ts';
import { agentSaved } from '../../queries/agents.ts';
import { basesChanged, documentsChanged, knowledgeQueries } from '../../queries/knowledge.ts';
import { useSession } from '../../session.tsx';
import { Badge, Button, ErrorNote, Field, Loading, Note, Section, Table } from '../../ui/parts.tsx';
import { Confirm } from '../../ui/confirm.tsx';

interface Base { id: string; name: string; description: string; documents?: number; createdAt: number }
interface Doc { id: string; name: string; format: string; bytes: number; chunks: number; createdAt: number }
interface Hit { documentName: string; chunk: number; content: string; score: number }

export default function Knowledge({ agentId, staging }: { agentId: number; staging: Pick<components['schemas']['AgentSettings'], 'knowledgeBases'> }) {
  const acting = useSession();
  const { orgId, target } = acting;
  const client = useQueryClient();
  const used = staging.knowledgeBases;
  // The agent's staging `knowledgeBases`: which of these bases it retrieves from once published.
  const use = useMutation({
    mutationFn: (next: string[]) => ok(api.POST('/api/v2/agent', { params: { query: { targetAccountId: agentId } }, body: { knowledgeBases: next } })),
    onSuccess: () => void agentSaved(client, agentId),
  });
  const bases = useQuery(knowledgeQueries.bases(acting));
  const [name, setName] = useState('');
  const [description, setDescription] = useState('');
  const [open, setOpen] = useState<string | null>(null);
  const create = useMutation({
    mutationFn: () => ok(api.POST('/api/v2/kb/knowledgebase', { params: { query: { ...target } }, body: { name, description } })),
    onSuccess: (r) => { setName(''); setDescription(''); setOpen(r.knowledgeBase.id); void basesChanged(client, orgId); },
  });
  const remove = useMutation({
    mutationFn: (kbId: string) => ok(api.DELETE('/api/v2/kb/knowledgebase/{kbId}', { params: { path: { kbId }, query: { ...target } } })),
    onSuccess: () => { setOpen(null); void basesChanged(client, orgId); },
  });
  const list = (bases.data?.knowledgeBases ?? []) as Base[];
  const chosen = list.find((b) => b.id === open);
  return (
    <>
      <Section title="Knowledge bases of the organization">
        <p className="muted">The agent retrieves from the knowledge bases its staging <code>knowledgeBases</code> names, once published.</p>
        <form className="inline-form" onSubmit={(e) => { e.preventDefault(); create.mutate(); }} aria-label="Create a knowledge base">
          <Field label="Knowledge base name" value={name} onChange={(e) => setName(e.target.value)} />
          <Field label="Knowledge base description" value={description} onChange={(e) => setDescription(e.target.value)} />
          <Button kind="primary" type="submit" disabled={create.isPending}>Create knowledge base</Button>
        </form>
        <ErrorNote error={create.error} />
        {bases.isPending ? <Loading /> : bases.error ? <ErrorNote error={bases.error} /> : (
          <Table<Base> caption="Knowledge bases" rows={list} rowKey={(b) => b.id} empty="No knowledge bases yet."
            columns={[
              { key: 'name', label: 'Name', cell: (b) => <>{b.name}<br /><code className="muted">{b.id}</code></> },
              { key: 'docs', label: 'Documents', cell: (b) => b.documents ?? '—' },
              { key: 'created', label: 'Created', cell: (b) => when(b.createdAt) },
              { key: 'used', label: 'This agent (staging)', cell: (b) => (used.includes(b.id) ? <Badge tone="good">Used</Badge> : <Badge>Not used</Badge>) },
              { key: 'actions', label: 'Actions', cell: (b) => (
                <div className="actions">
                  <Button disabled={use.isPending} aria-label={`${used.includes(b.id) ? 'Stop using' : 'Use'} ${b.name} in staging`}
                    onClick={() => use.mutate(used.includes(b.id) ? used.filter((x) => x !== b.id) : [...used, b.id])}>
                    {used.includes(b.id) ? 'Stop using' : 'Use in staging'}
                  </Button>
                  <Button onClick={() => setOpen(b.id)} aria-pressed={open === b.id} aria-label={`Documents of ${b.name}`}>Documents</Button>
                  <Confirm label="Delete" name={`Delete knowledge base ${b.name}`} question={`Delete knowledge base ${b.name}? This cannot be undone.`} confirm={`Yes, delete knowledge base ${b.name}`} busy={remove.isPending} onConfirm={() => remove.mutate(b.id)} />
                </div>
              ) },
            ]} />
        )}
        <ErrorNote error={remove.error ?? use.error} />
      </Section>
      {chosen ? <Documents base={chosen} /> : null}
    </>
  );
}

function Documents({ base }: { base: Base }) {
  const acting = useSession();
  const { orgId, target } = acting;
  const client = useQueryClient();
  const docs = useQuery(knowledgeQueries.documents(acting, base.id));
  const changed = () => void documentsChanged(client, orgId, base.id);
  const [file, setFile] = useState<File | null>(null);
  const [inputKey, setInputKey] = useState(0);
  const upload = useMutation({
    mutationFn: (f: File) => ok(api.POST('/api/v2/kb/knowledgebase/{kbId}/documents/upload', {
      params: { path: { kbId: base.id }, query: { ...target } },
      body: { file: f.name },
      bodySerializer: () => { const form = new FormData(); form.append('file', f, f.name); return form; },
    })),
    onSuccess: () => { setFile(null); setInputKey((k) => k + 1); changed(); },
  });
  const remove = useMutation({
    mutationFn: (documentId: string) => ok(api.DELETE('/api/v2/kb/knowledgebase/{kbId}/documents/{documentId}', {
      params: { path: { kbId: base.id, documentId }, query: { ...target } },
    })),
    onSuccess: changed,
  });
  const [q, setQ] = useState('');
  const search = useMutation({
    mutationFn: () => ok(api.POST('/api/v2/kb/knowledgebase/{kbId}/search', { params: { path: { kbId: base.id }, query: { ...target } }, body: { query: q } })),
  });
  const submitUpload = (e: FormEvent) => { e.preventDefault(); if (file) upload.mutate(file); };
  return (
    <Section title={`Documents of ${base.name}`}>
      <form className="inline-form" onSubmit={submitUpload} aria-label="Upload a document">
        <Field key={inputKey} label="Document (.txt, .md, .html or .pdf)" type="file" accept=".txt,.md,.markdown,.html,.htm,.pdf,text/plain,text/markdown,text/html,application/pdf"
          onChange={(e) => setFile(e.target.files?.[0] ?? null)} />
        <Button kind="primary" type="submit" disabled={!file || upload.isPending}>{upload.isPending ? 'Uploading…' : 'Upload document'}</Button>
      </form>
      <ErrorNote error={upload.error} />
      {docs.isPending ? <Loading /> : docs.error ? <ErrorNote error={docs.error} /> : (
        <Table<Doc> caption={`Documents of ${base.name}`} rows={docs.data.documents as Doc[]} rowKey={(d) => d.id} empty="No documents yet."
          columns={[
            { key: 'name', label: 'Name', cell: (d) => d.name },
            { key: 'format', label: 'Format', cell: (d) => d.format },
            { key: 'size', label: 'Size', cell: (d) => `${Math.ceil(d.bytes / 1024)} KB, ${d.chunks} chunk${d.chunks === 1 ? '' : 's'}` },
            { key: 'created', label: 'Uploaded', cell: (d) => when(d.createdAt) },
            { key: 'actions', label: 'Actions', cell: (d) => <Confirm label="Delete" name={`Delete document ${d.name}`} question={`Delete document ${d.name}? This cannot be undone.`} confirm={`Yes, delete document ${d.name}`} busy={remove.isPending} onConfirm={() => remove.mutate(d.id)} /> },
          ]} />
      )}
      <ErrorNote error={remove.error} />
      <form className="inline-form" onSubmit={(e) => { e.preventDefault(); search.mutate(); }} aria-label="Search the knowledge base">
        <Field label="Search the documents" type="search" value={q} onChange={(e) => setQ(e.target.value)} />
        <Button type="submit" disabled={search.isPending || !q.trim()}>Search</Button>
      </form>
      <ErrorNote error={search.error} />
      {search.data ? (
        (search.data.results as Hit[]).length === 0 ? <Note>Nothing matches.</Note> : (
          <ol className="hits" aria-label="Search results, best first">
            {(search.data.results as Hit[]).map((h, i) => (
              <li key={i}><p className="muted">{h.documentName}, chunk {h.chunk + 1}</p><p>{h.content}</p></li>
            ))}
          </ol>
        )
      ) : null}
    </Section>
  );
}
