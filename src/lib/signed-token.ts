import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Tokens that carry a text and prove it was issued with a key: `<payload>.<mac>`, the payload
 * the text in base64url and the MAC an HMAC-SHA256 of the payload's base64url text, also in
 * base64url. Anyone can read the text; only the key's holder can make a token that verifies.
 */

function mac(payload: string, key: string): string {
  return createHmac('sha256', key).update(payload).digest('base64url');
}

export function signToken(text: string, key: string): string {
  const payload = Buffer.from(text, 'utf8').toString('base64url');
  return `${payload}.${mac(payload, key)}`;
}

/** The text of a token signed with this key, or undefined for any other string. */
export function verifyToken(token: string, key: string): string | undefined {
  const dot = token.indexOf('.');
  if (dot < 0) return undefined;
  const payload = token.slice(0, dot);
  // The MAC is compared as text, not as decoded bytes: base64url decoding skips stray
  // characters and the last character's spare bits, so an altered MAC could decode the same.
  const expected = Buffer.from(mac(payload, key));
  const given = Buffer.from(token.slice(dot + 1));
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined;
  return Buffer.from(payload, 'base64url').toString('utf8');
}
