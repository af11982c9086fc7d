import { type Config, SETTINGS } from './config.js';
import { VERSION } from './version.js';

const NAME = 'greeting-service';

/** A default as the variable would be written: `*`, `false`, `1048576`, `a.example,b.example`. */
function shownDefault(value: Config[keyof Config]): string {
  return Array.isArray(value) ? value.join(',') : String(value);
}

/**
 * `--help`: every setting, its flag and its default, generated from SETTINGS so that it never
 * lists a setting the service does not read, nor misses one.
 */
export function helpText(): string {
  const rows = Object.values(SETTINGS).map(({ env, flag, secret, help, default: value }) => {
    const name = flag === undefined ? env : `${env}, --${flag}`;
    const shown = secret ? '' : ` (default: ${shownDefault(value)})`;
    return [name, `${help}${shown}`] as const;
  });
  // TZ is read by Node itself, not by the configuration, but sets the zone of the local timestamps.
  rows.push(['TZ', "time zone of the local timestamps, such as Asia/Kolkata or UTC (default: the system's)"]);
  const width = Math.max(...rows.map(([name]) => name.length)) + 2;
  return [
    `${NAME} ${VERSION}: the Greeting and Echo Service, a JSON-over-HTTP API`,
    '',
    `Usage: ${NAME} [--port N] [--host ADDRESS]`,
    `       ${NAME} --help | -h`,
    `       ${NAME} --version`,
    '',
    'Configuration, from environment variables; a flag wins over its variable, an empty variable',
    'counts as unset, and a bad value stops the start with exit code 1:',
    '',
    ...rows.map(([name, text]) => `  ${name.padEnd(width)}${text}`),
    '',
    'Serves /api/..., /healthz, /readyz, /openapi.json, /docs and /metrics; SIGTERM or SIGINT shuts down gracefully.',
    '',
  ].join('\n');
}

/** `--version`: the package's version, alone on its line. */
export function versionText(): string {
  return `${VERSION}\n`;
}
