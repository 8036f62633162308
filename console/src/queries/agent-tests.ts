// An agent's tests (docs/testing-agents.md): its suites (their YAML text through export and import),
// its runs (polled while queued or running), a run's results and its comparison with the previous
// run on live. Keyed by the agent's number.
import { queryOptions, type QueryClient } from '@tanstack/react-query';
import { api, ok } from '../api.ts';

const path = (id: number) => ({ agentId: `camp${id}` });

export const agentTestKeys = {
  all: (id: number) => ['agent', id, 'tests'] as const,
  suites: (id: number) => ['agent', id, 'tests', 'suites'] as const,
  yaml: (id: number, suiteId: string) => ['agent', id, 'tests', 'suites', suiteId, 'yaml'] as const,
  runs: (id: number) => ['agent', id, 'tests', 'runs'] as const,
  run: (id: number, runId: string) => ['agent', id, 'tests', 'runs', runId] as const,
  comparison: (id: number, runId: string) => ['agent', id, 'tests', 'runs', runId, 'comparison'] as const,
};

const open = (state: string | undefined) => state === 'pending' || state === 'running';

export const agentTestQueries = {
  suites: (id: number) => queryOptions({
    queryKey: agentTestKeys.suites(id),
    queryFn: () => ok(api.GET('/api/v2/agent/{agentId}/tests/suites', { params: { path: path(id) } })),
  }),
  /** A suite's current document as YAML (the text a customer keeps in a repository). */
  yaml: (id: number, suiteId: string) => queryOptions({
    queryKey: agentTestKeys.yaml(id, suiteId),
    queryFn: () => ok(api.GET('/api/v2/agent/{agentId}/tests/suites/{suiteId}/export', { params: { path: { ...path(id), suiteId }, query: { format: 'yaml' } } })),
  }),
  runs: (id: number) => queryOptions({
    queryKey: agentTestKeys.runs(id),
    queryFn: () => ok(api.GET('/api/v2/agent/{agentId}/tests/runs', { params: { path: path(id) } })),
    // Watched while any run is under way.
    refetchInterval: (q) => (q.state.data?.runs.some((r) => open(r.state)) ? 1000 : false),
  }),
  run: (id: number, runId: string) => queryOptions({
    queryKey: agentTestKeys.run(id, runId),
    queryFn: () => ok(api.GET('/api/v2/agent/{agentId}/tests/runs/{runId}', { params: { path: { ...path(id), runId } } })),
    refetchInterval: (q) => (open(q.state.data?.run.state) ? 1000 : false),
  }),
  comparison: (id: number, runId: string) => queryOptions({
    queryKey: agentTestKeys.comparison(id, runId),
    queryFn: () => ok(api.GET('/api/v2/agent/{agentId}/tests/runs/{runId}/comparison', { params: { path: { ...path(id), runId } } })),
  }),
};

/** A suite was imported (created or its next version): the suites and its text. */
export const suitesChanged = (client: QueryClient, id: number) => client.invalidateQueries({ queryKey: agentTestKeys.suites(id) });
/** A run was started: the runs. */
export const runsChanged = (client: QueryClient, id: number) => client.invalidateQueries({ queryKey: agentTestKeys.runs(id) });
