// The contract's `pagination`, `page` (0-based) and `pageSize` query parameters.
export interface PageQuery { pagination?: boolean; page?: number; pageSize?: number }
export interface Page { limit: number; offset: number; page: number; pageSize: number }

export const DEFAULT_PAGE_SIZE = 20;

/** A page when the caller asked for one (pagination=true, or page/pageSize given); else every row. */
export function pageOf(q: PageQuery): Page | undefined {
  if (q.pagination === false || (q.pagination === undefined && q.page === undefined && q.pageSize === undefined)) return undefined;
  const pageSize = q.pageSize ?? DEFAULT_PAGE_SIZE;
  const page = q.page ?? 0;
  return { limit: pageSize, offset: page * pageSize, page, pageSize };
}

export function pageInfo(page: Page | undefined, total: number) {
  return page ? { pagination: { page: page.page, pageSize: page.pageSize, total } } : {};
}
