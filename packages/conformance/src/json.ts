import { Decimal } from 'decimal.js';

/**
 * JSON read from its text, keeping what JSON.parse loses: every number as the exact decimal it
 * spells (a Decimal), and the order of every object's keys, integer-like ones included.
 */

export type Token =
  | { kind: 'punct'; text: '{' | '}' | '[' | ']' | ':' | ',' }
  | { kind: 'string'; value: string }
  | { kind: 'number'; text: string }
  | { kind: 'literal'; text: 'true' | 'false' | 'null' };

export type Exact = null | boolean | string | Decimal | Exact[] | ExactObject;

/** An object in key order, as sent; `keys` keeps repeated keys too. */
export interface ExactObject {
  readonly keys: string[];
  readonly values: Map<string, Exact>;
}

const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
const WHITE = /[ \t\n\r]*/y;

/** The tokens of a JSON text; throws SyntaxError where it is not JSON (JSON.parse is the judge). */
export function tokenize(text: string): Token[] {
  JSON.parse(text);
  const tokens: Token[] = [];
  let i = 0;
  const skipWhite = (): void => {
    WHITE.lastIndex = i;
    WHITE.exec(text);
    i = WHITE.lastIndex;
  };
  for (skipWhite(); i < text.length; skipWhite()) {
    const c = text[i] as string;
    if ('{}[]:,'.includes(c)) {
      tokens.push({ kind: 'punct', text: c as '{' });
      i += 1;
    } else if (c === '"') {
      let end = i + 1;
      while (text[end] !== '"') end += text[end] === '\\' ? 2 : 1;
      tokens.push({ kind: 'string', value: JSON.parse(text.slice(i, end + 1)) as string });
      i = end + 1;
    } else if (c === 't' || c === 'f' || c === 'n') {
      const literal = c === 't' ? 'true' : c === 'f' ? 'false' : 'null';
      tokens.push({ kind: 'literal', text: literal });
      i += literal.length;
    } else {
      NUMBER.lastIndex = i;
      const match = NUMBER.exec(text);
      if (match === null) throw new SyntaxError(`unexpected ${c} at ${i}`);
      tokens.push({ kind: 'number', text: match[0] });
      i = NUMBER.lastIndex;
    }
  }
  return tokens;
}

/**
 * One line per token, numbers by their exact value: two JSON texts have the same canonical form
 * when they hold the same values, keys in the same order, whatever their spacing, escapes or
 * spelling of numbers (1e2 and 100.0 are one value; 0.1000000000000000000001 is not 0.1).
 */
export function canonical(tokens: readonly Token[]): string {
  return tokens
    .map((token) => {
      if (token.kind === 'punct' || token.kind === 'literal') return token.text;
      if (token.kind === 'string') return JSON.stringify(token.value);
      const value = new Decimal(token.text);
      return value.isZero() ? '0' : value.toString();
    })
    .join('\n');
}

/**
 * The tokens of the value that `key` has in the top-level object of `tokens`, or undefined.
 * Scans without recursion, so any depth of nesting is read.
 */
export function memberTokens(tokens: readonly Token[], key: string): Token[] | undefined {
  let depth = 0;
  for (let i = 0; i < tokens.length; i += 1) {
    const token = tokens[i] as Token;
    if (token.kind === 'punct' && (token.text === '{' || token.text === '[')) depth += 1;
    else if (token.kind === 'punct' && (token.text === '}' || token.text === ']')) depth -= 1;
    else if (depth === 1 && token.kind === 'string' && tokens[i + 1]?.kind === 'punct') {
      const next = tokens[i + 1] as Token;
      if (next.kind !== 'punct' || next.text !== ':' || token.value !== key) continue;
      const start = i + 2;
      let end = start;
      let inner = 0;
      do {
        const t = tokens[end] as Token;
        if (t.kind === 'punct' && (t.text === '{' || t.text === '[')) inner += 1;
        if (t.kind === 'punct' && (t.text === '}' || t.text === ']')) inner -= 1;
        end += 1;
      } while (inner > 0);
      return tokens.slice(start, end);
    }
  }
  return undefined;
}

/** The value of a JSON text with exact numbers and ordered keys; built with a stack, not recursion. */
export function parseExact(text: string): Exact {
  const tokens = tokenize(text);
  const stack: { container: Exact[] | ExactObject; key: string | undefined }[] = [];
  let result: Exact = null;
  let pendingKey: string | undefined;
  const add = (value: Exact): void => {
    const top = stack[stack.length - 1];
    if (top === undefined) result = value;
    else if (Array.isArray(top.container)) top.container.push(value);
    else {
      top.container.keys.push(top.key as string);
      top.container.values.set(top.key as string, value);
      top.key = undefined;
    }
  };
  for (const token of tokens) {
    const top = stack[stack.length - 1];
    if (token.kind === 'punct') {
      if (token.text === '{' || token.text === '[') {
        const container: Exact[] | ExactObject = token.text === '[' ? [] : { keys: [], values: new Map() };
        add(container);
        stack.push({ container, key: undefined });
      } else if (token.text === '}' || token.text === ']') stack.pop();
      else if (token.text === ':' && top !== undefined) top.key = pendingKey;
      continue;
    }
    if (token.kind === 'string' && top !== undefined && !Array.isArray(top.container) && top.key === undefined) {
      pendingKey = token.value;
      continue;
    }
    if (token.kind === 'string') add(token.value);
    else if (token.kind === 'number') add(new Decimal(token.text));
    else add(token.text === 'null' ? null : token.text === 'true');
  }
  return result;
}

export function isExactObject(value: Exact | undefined): value is ExactObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !Decimal.isDecimal(value);
}
