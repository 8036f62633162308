// Agents: the agents of the organization acted on, each a link to its page, and a new one
// (createAccount; the API's message beside the form when refused).
import { useState, type FormEvent } from 'react';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { api, ok } from '../../api.ts';
import { accountQueries, agentsChanged } from '../../queries/accounts.ts';
import { Link, navigate } from '../../router.tsx';
import { useSession } from '../../session.tsx';
import { Button, ErrorNote, Field, Loading, Page, Section, Table } from '../../ui/parts.tsx';
import { useAccountName } from '../../ui/names.tsx';
import { ActiveBadge } from '../accounts/parts.tsx';

interface Row { id: number; name: string; active?: unknown }

export default function Agents() {
  const { orgId } = useSession();
  const client = useQueryClient();
  const orgName = useAccountName(orgId);
  const list = useQuery(accountQueries.agents(orgId));
  const [name, setName] = useState('');
  const create = useMutation({
    mutationFn: () => ok(api.POST('/api/v2/createAccount', { params: { query: { targetOrganizationId: orgId! } }, body: name ? { accountName: name } : {} })),
    onSuccess: (r) => { setName(''); void agentsChanged(client, orgId!); navigate(`/agents/${r.accountId}`); },
  });
  const submit = (e: FormEvent) => { e.preventDefault(); create.mutate(); };
  return (
    <Page title="Agents">
      <Section title={`Agents of ${orgName}`}>
        <form className="inline-form" onSubmit={submit} aria-label="Create an agent">
          <Field label="New agent's name" value={name} onChange={(e) => setName(e.target.value)} />
          <Button kind="primary" type="submit" disabled={create.isPending}>Create agent</Button>
        </form>
        <ErrorNote error={create.error} />
        {list.isPending ? <Loading /> : list.error ? <ErrorNote error={list.error} /> : (
          <Table<Row> caption="Agents" rows={list.data.accounts as Row[]} rowKey={(r) => r.id} empty="No agents."
            columns={[
              { key: 'name', label: 'Name', cell: (r) => <Link to={`/agents/${r.id}`}>{r.name}</Link> },
              { key: 'state', label: 'State', cell: (r) => <ActiveBadge active={r.active} /> },
            ]} />
        )}
      </Section>
    </Page>
  );
}
