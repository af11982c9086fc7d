import { type ParseArgsConfig, parseArgs } from 'node:util';
import { shown, withArgumentsShown } from '../lib/shown.js';
import { CODINGS } from './codings.js';
import { OPERATIONS } from './operations.js';
import { PROTOCOLS } from './protocols.js';
import { REDIS } from './redis.js';
import { SERVICE } from './service.js';
import { type Concern, ConfigError, type SettingValues } from './setting.js';
import { STREAMS } from './streams.js';
import { TRACING } from './tracing.js';

export { ConfigError } from './setting.js';

/** The concerns, in the order `--help` and docs/configuration.md list their settings: a new one is one more entry. */
export const CONCERNS = [SERVICE, CODINGS, PROTOCOLS, REDIS, TRACING, OPERATIONS, STREAMS] as const;

/** The settings of every concern of a list, as one object's type. */
type Merged<C> = C extends readonly [Concern<infer S>, ...infer Rest] ? S & Merged<Rest> : unknown;

/** Every setting the service reads, parsed and validated once at start-up: add one to its concern's group. */
export const SETTINGS = Object.assign({}, ...CONCERNS.map(({ settings }) => settings)) as Merged<typeof CONCERNS>;

/** Everything the service reads from its environment: one value per setting of SETTINGS. */
export type Config = SettingValues<typeof SETTINGS>;

export const DEFAULT_CONFIG: Readonly<Config> = Object.fromEntries(
  Object.entries(SETTINGS).map(([key, { default: value }]) => [key, value]),
) as unknown as Config;

/** What the command line asks for: help, the version, or a start with these flags' values. */
export interface CommandLine {
  help: boolean;
  version: boolean;
  /** The value of each setting's flag that was given, by flag name. */
  flags: Record<string, string | undefined>;
}

/** The flags of the settings, as node:util parseArgs takes them, and --help and --version. */
const OPTIONS = {
  help: { type: 'boolean', short: 'h' },
  version: { type: 'boolean' },
  ...Object.fromEntries(
    Object.values(SETTINGS).flatMap(({ flag }) => (flag === undefined ? [] : [[flag, { type: 'string' }]])),
  ),
} as const satisfies ParseArgsConfig['options'];

/** Reads the command line; an unknown flag, a flag without its value or a stray argument is a ConfigError. */
export function parseCommandLine(argv: readonly string[]): CommandLine {
  try {
    const { help, version, ...flags } = parseArgs({
      args: [...argv],
      options: OPTIONS,
      strict: true,
      allowPositionals: false,
    }).values as Record<string, string | boolean | undefined>;
    return { help: help === true, version: version === true, flags: flags as CommandLine['flags'] };
  } catch (error) {
    throw new ConfigError(withArgumentsShown((error as Error).message));
  }
}

/** A setting as the user gave it: `--port` if it came from its flag, else `PORT`. */
function sourceName(key: keyof Config, flags: CommandLine['flags']): string {
  const { env, flag } = SETTINGS[key];
  return flag !== undefined && flags[flag] !== undefined ? `--${flag}` : env;
}

/**
 * Reads the configuration: a flag wins over its environment variable, which wins over the
 * default. An empty variable counts as unset. Throws ConfigError naming the first bad value, or
 * the headers timeout when it is longer than the request timeout. `--help` and `--version` are
 * accepted and left to the caller, which looks at `parseCommandLine` first.
 */
export function loadConfig(argv: readonly string[], env: NodeJS.ProcessEnv): Config {
  const { flags } = parseCommandLine(argv);

  const config: Record<string, unknown> = { ...DEFAULT_CONFIG };
  const given = new Set<keyof Config>();
  for (const key of Object.keys(SETTINGS) as (keyof Config)[]) {
    const { env: name, flag, secret, parse } = SETTINGS[key];
    const fromFlag = flag === undefined ? undefined : flags[flag];
    const raw = fromFlag ?? (env[name] === '' ? undefined : env[name]);
    if (raw === undefined) continue;
    given.add(key);
    try {
      config[key] = parse(raw);
    } catch (error) {
      const value = secret ? '' : ` ${shown(raw)}`;
      throw new ConfigError(`invalid ${sourceName(key, flags)}${value}: ${(error as Error).message}`);
    }
  }
  for (const { check } of CONCERNS) check?.(config as unknown as Config, given);
  return config as unknown as Config;
}

/**
 * Why listening where the configuration says failed, as the one line printed before exit 1: it
 * names the setting at fault as the user gave it (`argv`: the command line the configuration was
 * read from), and the cause in words rather than an error code.
 */
export function listenError(
  error: unknown,
  { port, host }: Pick<Config, 'port' | 'host'>,
  argv: readonly string[],
): ConfigError {
  const { flags } = parseCommandLine(argv);
  const portName = `${sourceName('port', flags)} ${port}`;
  const hostName = `${sourceName('host', flags)} ${shown(host)}`;
  const { code, syscall, message } = error as NodeJS.ErrnoException;
  if (syscall === 'getaddrinfo') return new ConfigError(`${hostName} cannot be resolved to an address (${code})`);
  switch (code) {
    case 'EADDRINUSE':
      return new ConfigError(`${portName} is already in use on ${host}`);
    case 'EACCES':
      return new ConfigError(
        `${portName} needs privileges this process does not have: most systems keep the ports below 1024 for root`,
      );
    case 'EADDRNOTAVAIL':
      return new ConfigError(`${hostName} is not an address of this machine`);
    case 'EAFNOSUPPORT':
      return new ConfigError(`${hostName} is of an address family this machine does not support`);
    default:
      return new ConfigError(`cannot listen on ${hostName}, ${portName}: ${message}`);
  }
}
