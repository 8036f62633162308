// The first screen: who is signed in, the organization acted on, and its tasks at a glance.
import { useQuery } from '@tanstack/react-query';
import { taskQueries } from '../queries/tasks.ts';
import { useSession } from '../session.tsx';
import { ErrorNote, Loading, Page, Section } from '../ui/parts.tsx';

export default function Overview() {
  const session = useSession();
  const { account, orgId } = session;
  const tasks = useQuery({ ...taskQueries.stats(session), enabled: orgId !== undefined, refetchInterval: 5_000 });
  return (
    <Page title="Overview">
      <Section title={`${account.label} ${account.name}`}>
        <p>Signed in as {account.label.toLowerCase()} #{account.id}.{orgId !== undefined && orgId !== account.id ? ` Acting on organization #${orgId}.` : ''}</p>
        <p className="muted">The pages you can use are listed on the left; everything here goes through the same API and token rights as any client.</p>
      </Section>
      {orgId !== undefined ? (
        <Section title="Tasks">
          {tasks.isPending ? <Loading /> : tasks.error ? <ErrorNote error={tasks.error} /> : (
            <dl className="stats">
              <div><dt>Pending</dt><dd>{tasks.data.byState.pending}</dd></div>
              <div><dt>Running</dt><dd>{tasks.data.byState.running}</dd></div>
              <div><dt>Finished</dt><dd>{tasks.data.byState.finished}</dd></div>
              <div><dt>All</dt><dd>{tasks.data.total}</dd></div>
            </dl>
          )}
        </Section>
      ) : null}
    </Page>
  );
}
