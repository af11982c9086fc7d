import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

// package.json sits one level above both src/ and dist/.
export const { version: VERSION, license: LICENSE } = createRequire(import.meta.url)('../package.json') as {
  version: string;
  license: string;
};

/** The one version of the API there is: what `API-Version` says and what clients may ask for. */
export const API_VERSION = '1';

/** What a build or a fact is when nothing said it: a service run from its sources, a build outside git. */
export const UNKNOWN = 'unknown';

/** The file the build writes beside the built modules (scripts/bundle.js): the commit and the build's time. */
export const BUILD_FILE = 'build-info.json';

/**
 * Which build this process runs, in one place for `GET /version`, the `build_info` metric and
 * `--version`: the package's version, the commit and the time of the build (fixed by the build,
 * `unknown` when run from the sources), and the Node that runs it.
 */
export interface BuildInfo {
  version: string;
  commit: string;
  build_time: string;
  runtime: string;
}

/** The commit and build time the build wrote, or `unknown` for each where there is no build. */
function builtFacts(): Pick<BuildInfo, 'commit' | 'build_time'> {
  try {
    const { commit, build_time } = JSON.parse(readFileSync(new URL(BUILD_FILE, import.meta.url), 'utf8')) as BuildInfo;
    return { commit, build_time };
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    return { commit: UNKNOWN, build_time: UNKNOWN };
  }
}

export const BUILD_INFO: Readonly<BuildInfo> = Object.freeze({
  version: VERSION,
  ...builtFacts(),
  runtime: `node ${process.version}`,
});
