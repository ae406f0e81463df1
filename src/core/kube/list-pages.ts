// Every page of a list, as one: the pages of a paginated list are one snapshot, at the first
// page's resourceVersion, so the merged list can be watched on from it. Bounded: a server that
// always answers `continue` ends the list with ListTooLongError, not a loop.
import type { ListOptions } from './cluster.js';
import type { ObjectList } from './objects.js';

/** The default bound: 5 million objects at 500 a page. */
export const MAX_LIST_PAGES = 10_000;

export class ListTooLongError extends Error {
  constructor(readonly maxPages: number) {
    super(`the list did not end after ${String(maxPages)} pages`);
    this.name = 'ListTooLongError';
  }
}

export async function listAllPages<T>(
  list: (options: ListOptions) => Promise<ObjectList<T>>,
  options: ListOptions,
  maxPages = MAX_LIST_PAGES,
): Promise<ObjectList<T>> {
  let page = await list(options);
  const items = page.items;
  for (let pages = 1; page.metadata.continue !== undefined && page.metadata.continue !== ''; pages++) {
    if (pages >= maxPages) throw new ListTooLongError(maxPages);
    page = await list({ ...options, continue: page.metadata.continue });
    for (const item of page.items) items.push(item);
  }
  const { resourceVersion } = page.metadata;
  return { metadata: resourceVersion !== undefined ? { resourceVersion } : {}, items };
}
