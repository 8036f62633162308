// Agents: the agents of the organization acted on, each a link to its page.
import { useQuery } from '@tanstack/react-query';
import { accountQueries } from '../../queries/accounts.ts';
import { Link } from '../../router.tsx';
import { useSession } from '../../session.tsx';
import { ErrorNote, Loading, Page, Section, Table } from '../../ui/parts.tsx';
import { useAccountName } from '../../ui/names.tsx';
import { ActiveBadge } from '../accounts/parts.tsx';

interface Row { id: number; name: string; active?: unknown }

export default function Agents() {
  const { orgId } = useSession();
  const orgName = useAccountName(orgId);
  const list = useQuery(accountQueries.agents(orgId));
  return (
    <Page title="Agents">
      <Section title={`Agents of ${orgName}`}>
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
