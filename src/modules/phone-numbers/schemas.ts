// The schemas of a held number and its capabilities: the numbers operations answer them, and the
// agent's own reads (GET /api/v2/agent/{agentId}) carry its numbers in them.
import { Type } from '@sinclair/typebox';
import { Obj } from '../../http/schemas.ts';

export const Caps = Obj({ voice: Type.Boolean(), sms: Type.Boolean(), mms: Type.Boolean() });
export const Held = Obj({
  number: Type.String(), agentId: Type.Union([Type.Integer(), Type.Null()]), kind: Type.String({ description: 'bought | byo' }),
  state: Type.String({ description: 'active | reserved (being bought) | attention (docs/numbers.md, "Reconciliation")' }),
  provider: Type.Union([Type.String(), Type.Null()]), simulated: Type.Boolean(), country: Type.Union([Type.String(), Type.Null()]),
  locality: Type.Union([Type.String(), Type.Null()]), region: Type.Union([Type.String(), Type.Null()]),
  capabilities: Type.Union([Caps, Type.Null()]),
  lastError: Type.Optional(Type.String({ description: 'Why the number needs attention' })),
  createdAt: Type.Integer(),
});
