/**
 * The elements of a field whose value is a comma-separated list (RFC 9110, 5.6.1), white space
 * around each trimmed. Empty elements (`gzip,,br`, a trailing comma, an empty value) are not
 * elements: a recipient ignores them.
 */
export function listElements(value: string): string[] {
  const elements: string[] = [];
  for (const part of value.split(',')) {
    const element = part.trim();
    if (element !== '') elements.push(element);
  }
  return elements;
}
