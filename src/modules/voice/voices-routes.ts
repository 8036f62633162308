// GET /api/v2/voices (callplane extension): the voices an agent can name, per text-to-speech engine
// (docs/api.md, docs/voice.md "Choosing a voice"). Any authenticated token may read it: the list
// is the process's, not a tenant's.
import { Type } from '@sinclair/typebox';
import { StringEnum } from '../../http/checker.ts';
import { Envelope, errors, Security, Nullable } from '../../http/schemas.ts';
import type { App } from '../../http/types.ts';
import { TTS_ENGINES } from '../agents/catalog.ts';
import type { VoicesService } from './voices.ts';

const Voice = Type.Object({
  id: Type.String({ description: 'What agentVoice takes, with agentTtsEngine set to this engine' }),
  name: Type.String(),
  engine: StringEnum(TTS_ENGINES),
  language: Nullable(Type.String({ description: 'BCP-47 or a bare language, as the provider says it; null: any (the agent\'s agentLang)' })),
  gender: Nullable(Type.String({ description: 'female or male, when the provider says' })),
  previewUrl: Nullable(Type.String({ description: 'A short sample the provider hosts' })),
});

const Engine = Type.Object({
  engine: StringEnum(TTS_ENGINES),
  available: Type.Boolean({ description: 'This process can speak with it (its key is configured, or it is the configured voice); an agent naming one that is not gets the configured voice' }),
  error: Type.Optional(Type.String({ description: 'Why the provider\'s list could not be read now (the last list read, if any, is given)' })),
});

export async function voicesRoutes(app: App, { voices }: { voices: VoicesService }): Promise<void> {
  app.get('/api/v2/voices', {
    schema: {
      operationId: 'listVoices', tags: ['Agents'], security: Security,
      summary: 'The voices an agent can name, per text-to-speech engine (callplane extension)',
      querystring: Type.Object({
        engine: Type.Optional(StringEnum(TTS_ENGINES, { description: 'Only this engine\'s voices' })),
      }),
      response: {
        200: Envelope({ voices: Type.Array(Voice), engines: Type.Array(Engine) }),
        ...errors(400),
      },
    },
  }, async (req) => voices.list(req.query.engine));
}
