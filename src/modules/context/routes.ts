// Context notes about one person (Knowledge in the contract).
import { Type } from '@sinclair/typebox';
import type { App } from '../../http/types.ts';
import { AccountId, Envelope, errors, Obj, Security } from '../../http/schemas.ts';
import type { ContextService } from './service.ts';

const tags = ['Knowledge'];
const Target = Type.String({ maxLength: 200, description: 'Phone number in E.164 format or username of the person' });
const TargetAccount = Type.Optional(AccountId('Organization (or agent account) the notes belong to; resellers and partners must name one'));

export async function contextRoutes(app: App, { context }: { context: ContextService }): Promise<void> {
  app.post('/api/v2/context', {
    schema: { operationId: 'addContext', tags, security: Security,
      summary: 'Add a context note about a person; notes accumulate (docs/api.md "Context notes")',
      querystring: Type.Object({ targetAccountId: TargetAccount }),
      body: Type.Object({ target: Target, context: Type.String({ maxLength: 100_000, description: 'The note' }) }),
      response: { 201: Envelope({ target: Type.String(), notes: Type.Integer({ description: 'Notes now kept for the person' }) }), ...errors(400, 403, 404) } },
  }, async (req, reply) => reply.status(201).send(await context.add(req.scope, req.query.targetAccountId, req.body)));

  app.get('/api/v2/context', {
    schema: { operationId: 'getContext', tags, security: Security, summary: "Fetch a person's context notes",
      querystring: Type.Object({ target: Target, targetAccountId: TargetAccount }),
      response: { 200: Envelope({
        target: Type.String(), context: Type.String({ description: 'The notes, oldest first, one per line' }),
        notes: Type.Array(Obj({ context: Type.String(), createdAt: Type.Integer() })),
      }), ...errors(400, 403, 404) } },
  }, async (req) => context.get(req.scope, req.query.targetAccountId, req.query.target));
}
