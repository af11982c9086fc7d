/** A media range of an Accept header, in lower case without its parameters, and its q. */
interface MediaRange {
  range: string;
  q: number;
}

function mediaRanges(accept: string): MediaRange[] {
  return accept
    .split(',')
    .map((part) => {
      const [range = '', ...parameters] = part.split(';');
      const q = parameters.map((p) => /^\s*q\s*=\s*([0-9.]+)\s*$/i.exec(p)?.[1]).find((v) => v !== undefined);
      return { range: range.trim().toLowerCase(), q: q === undefined ? 1 : Number(q) };
    })
    .filter(({ range }) => range !== '');
}

/**
 * The media ranges of an Accept header that a client accepts (q above 0), in lower case and
 * without parameters, in the order sent.
 */
export function acceptedRanges(accept: string): string[] {
  return mediaRanges(accept)
    .filter(({ q }) => q > 0)
    .map(({ range }) => range);
}

/**
 * Whether an Accept header lets the answer be `type` (`text/event-stream`): no Accept at all (or
 * one with no range in it), or the most specific range that matches it (`text/event-stream`,
 * `text/*`, `*\/*`, RFC 9110, 12.5.1) with q above 0.
 */
export function accepts(accept: string | undefined, type: string): boolean {
  const ranges = accept === undefined ? [] : mediaRanges(accept);
  if (ranges.length === 0) return true;
  const wildcard = `${type.slice(0, type.indexOf('/'))}/*`;
  for (const candidate of [type, wildcard, '*/*']) {
    const matching = ranges.filter(({ range }) => range === candidate);
    if (matching.length > 0) return matching.some(({ q }) => q > 0);
  }
  return false;
}
