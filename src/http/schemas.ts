// Schema pieces shared by every module's routes.
import { Type, type TObject, type TProperties, type TSchema } from '@sinclair/typebox';

export const ErrorBody = Type.Object(
  { success: Type.Literal(false), message: Type.String(), requestId: Type.Optional(Type.String()) },
  { $id: 'ErrorBody', additionalProperties: true, description: 'Every error has this shape.' },
);
const errorRef = Type.Ref('ErrorBody');

/** `{success, message, …props}`; extra properties are kept so nothing we add is silently dropped. */
export function Envelope<P extends TProperties>(props: P, description?: string): TObject {
  return Type.Object<TProperties>(
    { success: Type.Boolean(), message: Type.Optional(Type.String()), ...props },
    { additionalProperties: true, ...(description ? { description } : {}) },
  );
}

/** An open object: the fields we document, plus any we add later. */
export const Obj = <P extends TProperties>(props: P, description?: string) =>
  Type.Object(props, { additionalProperties: true, ...(description ? { description } : {}) });

/** Error responses, keyed by status, for a route's `response` map. */
export function errors(...codes: number[]): Record<number, TSchema> {
  return Object.fromEntries([401, ...codes].map((c) => [c, errorRef]));
}

/** An id of an account at any level of the ladder: a positive integer, sent as a number or a string. */
/** Account ids are 32-bit serials on PostgreSQL: a larger id would fail inside the query (a 500). */
export const MAX_ACCOUNT_ID = 2_147_483_647;
export const AccountId = (description: string) => Type.Integer({ minimum: 1, maximum: MAX_ACCOUNT_ID, description });

export const PaginationQuery = {
  pagination: Type.Optional(Type.Boolean({ description: 'Whether to paginate; without it every row is returned' })),
  // Bounded so page × pageSize stays an exact integer that fits an SQL OFFSET.
  page: Type.Optional(Type.Integer({ minimum: 0, maximum: 1_000_000_000, description: 'Page number (0-based)' })),
  pageSize: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, description: 'Rows per page (default 20)' })),
};

/** Our extensions' paging: `limit` (default 100) rows after `offset`. */
export const LimitOffsetQuery = {
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, description: 'At most this many (default 100)' })),
  offset: Type.Optional(Type.Integer({ minimum: 0, maximum: 1_000_000_000, description: 'Skip this many' })),
};

export const Security = [{ apiKeyAuth: [] as string[] }];

/** A schema or null (OpenAPI: a union with null), with a description when given. */
export const Nullable = <T extends TSchema>(schema: T, description?: string) => Type.Union([schema, Type.Null()], description ? { description } : {});
