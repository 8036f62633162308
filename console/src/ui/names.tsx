// Accounts named by their names, not their numbers: GET /api/v2/account (one read per account,
// cached with the account tree's lists; console/src/queries/accounts.ts).
import { useQuery } from '@tanstack/react-query';
import { accountQueries } from '../queries/accounts.ts';
import { useSession } from '../session.tsx';

/** An account's name; its number only while the name is read, or when it cannot be. */
export function useAccountName(id: number | undefined): string {
  const { account } = useSession();
  const self = id === account.id;
  const q = useQuery({ ...accountQueries.account(id, self), enabled: id !== undefined && Number.isSafeInteger(id) && !self });
  if (id === undefined) return '';
  if (self) return account.name;
  return q.data?.name ?? `#${id}`;
}

export function AccountName({ id }: { id: number | undefined }) {
  return <>{useAccountName(id)}</>;
}
