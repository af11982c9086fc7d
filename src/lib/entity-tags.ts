/** Entity tags in If-Match and If-None-Match (RFC 9110, 8.8.3 and 13.1). */

export interface EntityTag {
  weak: boolean;
  opaque: string;
}

// One list element: an entity tag (`"3"`, `W/"3"`) followed by the end or a comma, or
// anything else up to the next comma. Tags may contain commas, so the list is not split on them.
const LIST_ELEMENT = /[\s,]*(?:(W\/)?"([^"]*)"[ \t]*(?=,|$)|[^,]*)/y;

/**
 * The entity tags of an `If-Match` or `If-None-Match` value: `*`, or the list's tags. Elements
 * that are not entity tags (`3` without quotes, say) are dropped, so they match nothing.
 */
export function parseEntityTags(header: string): '*' | EntityTag[] {
  if (header.trim() === '*') return '*';
  const tags: EntityTag[] = [];
  LIST_ELEMENT.lastIndex = 0;
  while (LIST_ELEMENT.lastIndex < header.length) {
    const match = LIST_ELEMENT.exec(header);
    if (match === null) break;
    if (match[2] !== undefined) tags.push({ weak: match[1] !== undefined, opaque: match[2] });
  }
  return tags;
}

/**
 * Whether an If-None-Match value names the answer whose strong tag is `tag` (`"3-br"`): it is `*`,
 * or one of its tags has the same opaque part, weak or not (weak comparison, RFC 9110, 8.8.3.2).
 */
export function namesWeakly(header: string, tag: string): boolean {
  const tags = parseEntityTags(header);
  if (tags === '*') return true;
  const opaque = tag.slice(1, -1);
  return tags.some((named) => named.opaque === opaque);
}
