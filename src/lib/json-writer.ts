/** A piece of JSON text already written, queued between the values still to write. */
class Written {
  constructor(readonly text: string) {}
}
const COMMA = new Written(',');
const CLOSE_ARRAY = new Written(']');
const CLOSE_OBJECT = new Written('}');

/**
 * JSON text of plain data (objects, arrays, strings, numbers, booleans, null) at any depth, without
 * recursion, as `JSON.stringify` writes it: members that are `undefined` are left out, and an array's
 * holes are `null`. `leaf` may write a value itself, returning its text, or `undefined` to leave it to
 * the rules above; objects are walked only when it does not.
 */
export function writeJson(value: unknown, leaf: (value: unknown) => string | undefined = () => undefined): string {
  let out = '';
  const pending: unknown[] = [value];
  while (pending.length > 0) {
    const item = pending.pop();
    if (item instanceof Written) {
      out += item.text;
      continue;
    }
    const own = leaf(item);
    if (own !== undefined) {
      out += own;
    } else if (Array.isArray(item)) {
      out += '[';
      pending.push(CLOSE_ARRAY);
      for (let i = item.length - 1; i >= 0; i--) {
        pending.push(item[i] ?? null);
        if (i > 0) pending.push(COMMA);
      }
    } else if (item !== null && typeof item === 'object') {
      out += '{';
      pending.push(CLOSE_OBJECT);
      const members = Object.entries(item).filter(([, member]) => member !== undefined);
      for (let i = members.length - 1; i >= 0; i--) {
        const [key, member] = members[i] as [string, unknown];
        pending.push(member, new Written(`${JSON.stringify(key)}:`));
        if (i > 0) pending.push(COMMA);
      }
    } else {
      out += JSON.stringify(item);
    }
  }
  return out;
}
