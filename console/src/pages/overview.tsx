// The first screen: who is signed in, the organization acted on, the path to a first agent with a
// number while one is missing (onboarding.tsx), and its tasks at a glance.
import { lazy, Suspense } from 'react';
import { useQuery } from '@tanstack/react-query';
import { taskQueries } from '../queries/tasks.ts';
import { useSession } from '../session.tsx';
import { ErrorNote, Loading, Page, Section } from '../ui/parts.tsx';
import { useAccountName } from '../ui/names.tsx';

// The path on a fresh install: its own chunk, off the first screen.
const Onboarding = lazy(() => import('./onboarding.tsx'));

export default function Overview() {
  const session = useSession();
  const { account, orgId } = session;
  const orgName = useAccountName(orgId);
  const tasks = useQuery({ ...taskQueries.stats(session), enabled: orgId !== undefined, refetchInterval: 5_000 });
  return (
    <Page title="Overview">
      <Section title={`${account.label} ${account.name}`}>
        <p>Signed in as {account.label.toLowerCase()} #{account.id}.{orgId !== undefined && orgId !== account.id ? ` Acting on organization ${orgName} (#${orgId}).` : ''}</p>
        <p className="muted">The pages you can use are listed on the left; everything here goes through the same API and token rights as any client.</p>
      </Section>
      <Suspense fallback={null}><Onboarding /></Suspense>
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
