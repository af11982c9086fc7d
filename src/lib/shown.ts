/**
 * User-given values in one-line error messages: the settings' refusals and the conformance kit's.
 * A value of any length makes a short line. Imports nothing, so the kit can take it as its own.
 */

/** The most characters of a refused value that its error line repeats: a value of any length is one short line. */
const MAX_SHOWN_CHARACTERS = 100;

/** A refused value as its error line shows it: quoted, and past MAX_SHOWN_CHARACTERS cut, saying how long it was. */
export function shown(value: string): string {
  if (value.length <= MAX_SHOWN_CHARACTERS) return JSON.stringify(value);
  return `${JSON.stringify(value.slice(0, MAX_SHOWN_CHARACTERS))}… (${value.length} characters)`;
}

/** A value an error line names unquoted (a path, a URL): as given, or past MAX_SHOWN_CHARACTERS cut as `shown` cuts it. */
export function named(value: string): string {
  return value.length <= MAX_SHOWN_CHARACTERS ? value : shown(value);
}

/** A parseArgs message, each argument it quotes ('--nope', "--nope") past MAX_SHOWN_CHARACTERS cut as `shown` cuts a value. */
export function withArgumentsShown(message: string): string {
  return message.replace(/'([^']*)'|"([^"]*)"/g, (quoted, single: string | undefined, double: string | undefined) => {
    const argument = single ?? double ?? '';
    return argument.length > MAX_SHOWN_CHARACTERS ? shown(argument) : quoted;
  });
}
