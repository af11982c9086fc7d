/** What scripts/build-info.js writes into dist/build-info.json. */
export function buildFacts(
  env: Record<string, string | undefined>,
  cwd: string,
  now?: Date,
): { commit: string; build_time: string };
