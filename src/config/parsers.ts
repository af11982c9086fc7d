/** The readers of values that settings of several concerns share: each throws an Error saying what the value must be. */

import type { Parse } from './setting.js';

export function integer(min: number, max: number): Parse<number> {
  return (raw) => {
    const value = Number(raw);
    if (!/^\d+$/.test(raw) || value < min || value > max) {
      throw new Error(`must be an integer from ${min} to ${max}`);
    }
    return value;
  };
}

export const BOOLEANS = new Map([
  ['true', true],
  ['1', true],
  ['false', false],
  ['0', false],
]);

export function boolean(raw: string): boolean {
  const value = BOOLEANS.get(raw.toLowerCase());
  if (value === undefined) throw new Error('must be true, false, 1 or 0');
  return value;
}

/** A decimal number from 0 to 1, as OpenTelemetry writes sampling ratios: `0.25`, `.5`, `1`. */
export function fraction(raw: string): number {
  if (!/^(?:0|1)?(?:\.\d+)?$/.test(raw) || raw === '' || raw === '.' || Number(raw) > 1) {
    throw new Error('must be a decimal number from 0 to 1, such as 0.25');
  }
  return Number(raw);
}

export function oneOf<T extends string>(values: readonly T[], unsupported = ''): Parse<T> {
  return (raw) => {
    const value = values.find((v) => v === raw);
    if (value === undefined) throw new Error(`must be one of ${values.join(', ')}${unsupported}`);
    return value;
  };
}

/** An OTLP/HTTP endpoint: an http or https URL, as the exporter posts to it. */
export function httpUrl(raw: string): string {
  if (!/^https?:\/\//.test(raw) || !URL.canParse(raw) || new URL(raw).hostname === '') {
    throw new Error('must be an http:// or https:// URL such as http://collector:4318');
  }
  return raw;
}

/** An HTTP token: what a header's name is made of. */
export const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/**
 * OpenTelemetry's `key=value,key=value` lists (OTEL_RESOURCE_ATTRIBUTES, OTEL_EXPORTER_OTLP_HEADERS),
 * the values percent-decoded, each key checked by `isKey`.
 */
export function keyValueList(
  isKey: (key: string) => boolean,
  example: string,
): Parse<readonly (readonly [string, string])[]> {
  return (raw) => {
    const shape = `must be a comma-separated list of key=value such as ${example}, the values percent-encoded`;
    return raw.split(',').map((member) => {
      const equals = member.indexOf('=');
      const key = member.slice(0, equals).trim();
      if (equals === -1 || !isKey(key)) throw new Error(shape);
      let value: string;
      try {
        value = decodeURIComponent(member.slice(equals + 1).trim());
      } catch {
        throw new Error(shape);
      }
      // A header's value may not break its line; an attribute's text should not either.
      if (/[\0\r\n]/.test(value)) throw new Error(`${shape}, with no line breaks or NUL`);
      return [key, value] as const;
    });
  };
}
