/**
 * The facts a build fixes, written into dist/build-info.json for src/version.ts to read at start-up:
 * the commit and the time of the build. The commit is SOURCE_COMMIT when set (a container build has
 * no .git), else `git rev-parse HEAD` in a git checkout, else `unknown`. The time is SOURCE_DATE_EPOCH
 * when set (seconds since the epoch: the reproducible-builds convention, so that two builds of one
 * commit write the same file), else the build's clock; both in ISO 8601 UTC.
 */
import { execFileSync } from 'node:child_process';

const UNKNOWN = 'unknown';

/** The commit `cwd` is checked out at, or null outside git (or without it). */
function gitHead(cwd) {
  try {
    return execFileSync('git', ['rev-parse', '--verify', 'HEAD'], { cwd, encoding: 'utf8', stdio: 'pipe' }).trim();
  } catch {
    return null;
  }
}

/** `{ commit, build_time }` for a build in `cwd` under `env`; a SOURCE_DATE_EPOCH that is no time stops the build. */
export function buildFacts(env, cwd, now = new Date()) {
  const commit = env.SOURCE_COMMIT?.trim() || gitHead(cwd) || UNKNOWN;
  const epoch = env.SOURCE_DATE_EPOCH?.trim() || null;
  if (epoch !== null && !/^\d{1,11}$/.test(epoch)) {
    throw new Error(`SOURCE_DATE_EPOCH must be whole seconds since 1970-01-01 UTC, not ${JSON.stringify(epoch)}`);
  }
  const time = epoch === null ? now : new Date(Number(epoch) * 1000);
  return { commit, build_time: time.toISOString() };
}
