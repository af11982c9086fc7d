import { type Config, SETTINGS } from './config/index.js';
import { BUILD_INFO, VERSION } from './version.js';

const NAME = 'greeting-service';

/** A default as the variable would be written: `*`, `false`, `1048576`, `a.example,b.example`. */
function shownDefault(value: Config[keyof Config]): string {
  if (value === null || (Array.isArray(value) && value.length === 0)) return 'unset';
  return Array.isArray(value) ? value.join(',') : String(value);
}

/** One line of the configuration's description: a variable, its flag, what it takes, its default as shown. */
export interface SettingRow {
  env: string;
  flag?: string;
  help: string;
  /** Undefined for a secret, whose default is not shown. */
  shownDefault?: string;
}

/**
 * Every setting, generated from SETTINGS so that `--help` (and docs/configuration.md, made from
 * the same rows) never lists a setting the service does not read, nor misses one.
 */
export function settingRows(): SettingRow[] {
  const rows: SettingRow[] = Object.values(SETTINGS).map((setting) => ({
    env: setting.env,
    ...(setting.flag !== undefined && { flag: setting.flag }),
    help: setting.help,
    ...(!setting.secret && { shownDefault: setting.defaultText ?? shownDefault(setting.default) }),
  }));
  // TZ is read by Node itself, not by the configuration, but sets the zone of the local timestamps.
  rows.push({
    env: 'TZ',
    help: 'time zone of the local timestamps: an IANA name such as Asia/Kolkata or UTC, or a POSIX form Node reads such as GMT+5 or :Asia/Kolkata',
    shownDefault: "the system's",
  });
  return rows;
}

/** `--help`: the commands, then every setting, its flag and its default. */
export function helpText(): string {
  const rows = settingRows().map(({ env, flag, help, shownDefault }) => {
    const name = flag === undefined ? env : `${env}, --${flag}`;
    return [name, shownDefault === undefined ? help : `${help} (default: ${shownDefault})`] as const;
  });
  const width = Math.max(...rows.map(([name]) => name.length)) + 2;
  return [
    `${NAME} ${VERSION}: the Greeting and Echo Service, a JSON-over-HTTP API`,
    '',
    `Usage: ${NAME} [--port N] [--host ADDRESS]`,
    `       ${NAME} --help | -h`,
    `       ${NAME} --version`,
    `       ${NAME} conformance <base-url> [options]   checks a running service (conformance --help)`,
    '',
    'Configuration, from environment variables; a flag wins over its variable, an empty variable',
    'counts as unset, and a bad value stops the start with exit code 1:',
    '',
    ...rows.map(([name, text]) => `  ${name.padEnd(width)}${text}`),
    '',
    'Serves /api/..., /healthz, /readyz, /version, /openapi.json, /docs and /metrics; SIGTERM or SIGINT shuts down gracefully.',
    '',
  ].join('\n');
}

/**
 * `--version`: the package's version alone on the first line, as scripts read it; then the build's
 * other facts, one `name: value` a line, named as `GET /version` names them.
 */
export function versionText(): string {
  const { version, ...facts } = BUILD_INFO;
  return [version, ...Object.entries(facts).map(([name, value]) => `${name}: ${value}`), ''].join('\n');
}
