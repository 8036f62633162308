// The voices an agent can name, per text-to-speech engine (GET /api/v2/voices?engine=…): the
// process's list, so one key per engine whichever agent asks. Kept a minute (the server keeps a
// provider's list for five).
import { queryOptions } from '@tanstack/react-query';
import { api, ok } from '../api.ts';
import type { paths } from '../../../sdk/schema.d.ts';

/** An engine agentTtsEngine takes. */
export type TtsEngine = NonNullable<paths['/api/v2/voices']['get']['parameters']['query']>['engine'] & string;

export const voiceKeys = {
  list: (engine: TtsEngine) => ['voices', engine] as const,
};

export const voiceQueries = {
  list: (engine: TtsEngine) => queryOptions({
    queryKey: voiceKeys.list(engine),
    queryFn: () => ok(api.GET('/api/v2/voices', { params: { query: { engine } } })),
    staleTime: 60_000,
  }),
};
