/** The shape of a setting and of a concern's group of settings, shared by every file of this folder. */

/** A configuration value that cannot be used; its message is the one line printed before exit 1. */
export class ConfigError extends Error {
  override name = 'ConfigError';
}

export type Parse<T> = (raw: string) => T;

/**
 * One setting: where it comes from (its environment variable, and its command-line flag if it has
 * one), what `--help` says of it, its default and how its text is read (throwing an Error whose
 * message says what the value must be). A secret's value is never repeated in an error message,
 * and its default is not shown.
 */
export interface Setting<T> {
  env: string;
  flag?: string;
  secret?: true;
  help: string;
  default: T;
  /** The default in words, where its value would not say it (unset, or one that depends on another setting). */
  defaultText?: string;
  parse: (raw: string) => T;
}

export function setting<T>(definition: Setting<T>): Setting<T> {
  return definition;
}

/** A concern's settings by name. */
export type Settings = Record<string, Setting<unknown>>;

/** The values a group of settings reads: one per setting. */
export type SettingValues<S extends Settings> = { -readonly [K in keyof S]: S[K]['default'] };

/**
 * A concern's settings and the rules between them: `check` sees the values read (the whole
 * configuration, of which these are a part) and the names of those given, throws a ConfigError
 * for the first rule broken, and may set a default that depends on another setting.
 */
export interface Concern<S extends Settings> {
  settings: S;
  check?: (config: SettingValues<S>, given: Given<S>) => void;
}

/** Which settings of a group were given, rather than left at their default. */
export interface Given<S extends Settings> {
  has(key: keyof S): boolean;
}

export function concern<S extends Settings>(definition: Concern<S>): Concern<S> {
  return definition;
}
