// An organization's tasks: the list (with its filters), one task, the counts by state, the daily
// counts and the limits (GET /api/v2/tasks, …/{taskId}, …/stats, …/dailyCounts, …/limits). Every
// key starts ['tasks', orgId], so a task added, changed or removed refreshes every view of them.
import { queryOptions, type QueryClient } from '@tanstack/react-query';
import type { operations } from '../../../sdk/schema.d.ts';
import { api, ok } from '../api.ts';
import type { Acting } from '../session.tsx';

/** The list's filters, paging and order (the target is the session's). */
export type TaskFilters = Omit<NonNullable<operations['listTasks']['parameters']['query']>, 'targetAccountId'>;

/** A task that may still change (the list and the detail refresh while one is shown). */
const live = (state: string) => state === 'pending' || state === 'running';

export const taskKeys = {
  all: (orgId: number | undefined) => ['tasks', orgId] as const,
  list: (orgId: number | undefined, filters: TaskFilters) => ['tasks', orgId, 'list', filters] as const,
  one: (orgId: number | undefined, id: string) => ['tasks', orgId, 'one', id] as const,
  stats: (orgId: number | undefined) => ['tasks', orgId, 'stats'] as const,
  /** `day` is `YYYY-MM-DD`, or 'today' for the organization's today (whose answer names the date). */
  daily: (orgId: number | undefined, day?: string) => (day === undefined ? ['tasks', orgId, 'daily'] as const : ['tasks', orgId, 'daily', day] as const),
  limits: (orgId: number | undefined) => ['tasks', orgId, 'limits'] as const,
};

const readLimits = (target: Acting['target']) => ok(api.GET('/api/v2/tasks/limits', { params: { query: { ...target } } }));
/** The limits as getTaskLimits (and updateTaskLimits) answer them. */
export type LimitsAnswer = Awaited<ReturnType<typeof readLimits>>;

export const taskQueries = {
  /** Refreshed every 2 s while a task it shows may still change. */
  list: ({ orgId, target }: Acting, filters: TaskFilters) => queryOptions({
    queryKey: taskKeys.list(orgId, filters),
    queryFn: () => ok(api.GET('/api/v2/tasks', { params: { query: { ...target, ...filters } } })),
    refetchInterval: (q) => (q.state.data?.tasks.some((t) => live(t.state)) ? 2_000 : false),
  }),
  /** Refreshed every 2 s while it is pending or running. */
  one: ({ orgId, target }: Acting, id: string) => queryOptions({
    queryKey: taskKeys.one(orgId, id),
    queryFn: () => ok(api.GET('/api/v2/tasks/{taskId}', { params: { path: { taskId: id }, query: { ...target } } })),
    refetchInterval: (q) => (q.state.data && live(q.state.data.task.state) ? 2_000 : false),
  }),
  stats: ({ orgId, target }: Acting) => queryOptions({
    queryKey: taskKeys.stats(orgId),
    queryFn: () => ok(api.GET('/api/v2/tasks/stats', { params: { query: { ...target } } })),
  }),
  daily: ({ orgId, target }: Acting, day: string) => queryOptions({
    queryKey: taskKeys.daily(orgId, day),
    queryFn: () => ok(api.GET('/api/v2/tasks/dailyCounts', { params: { query: { ...target, ...(day === 'today' ? {} : { date: day }) } } })),
  }),
  limits: ({ orgId, target }: Acting) => queryOptions({
    queryKey: taskKeys.limits(orgId),
    queryFn: () => readLimits(target),
  }),
};

/** Tasks were added, changed or removed: every list, task and count of the organization. */
export const tasksChanged = (client: QueryClient, orgId: number | undefined) =>
  client.invalidateQueries({ queryKey: taskKeys.all(orgId) });
/** The limits were saved: their answer is the new limits, and the daily counts (which show the caps) change. */
export function limitsSaved(client: QueryClient, orgId: number | undefined, answer: LimitsAnswer) {
  client.setQueryData(taskKeys.limits(orgId), answer);
  return client.invalidateQueries({ queryKey: taskKeys.daily(orgId) });
}
