// The type every route plugin registers on. Route plugins import it from here, never from
// src/app.ts (which imports them): each plugin is handed the services it uses as its options.
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';

export type App = FastifyInstance<any, any, any, FastifyBaseLogger, TypeBoxTypeProvider>;
