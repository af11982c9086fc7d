import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, it } from 'node:test';
import { parse } from 'yaml';
import { DEFAULT_CONFIG, loadConfig } from '../src/config/index.js';
import { NGINX_CONF, PLACEHOLDERS, placeholdersIn } from './cluster/nginx.js';
import { ROOT } from './server-process.js';

/**
 * deploy/: what cannot run here (Docker) is checked for what it says. compose.yaml is read as
 * YAML, and by docker-compose where it is installed; nginx.conf for the settings the service
 * relies on. The cluster test runs nginx.conf itself.
 */

const DEPLOY = join(ROOT, 'deploy');
const COMPOSE_FILE = join(DEPLOY, 'compose.yaml');
const INSTANCES = ['instance-1', 'instance-2', 'instance-3'];

interface Service {
  build?: { context: string; dockerfile: string };
  image?: string;
  environment?: Record<string, string>;
  volumes?: string[];
  ports?: string[];
}

const compose = parse(readFileSync(COMPOSE_FILE, 'utf8'), { merge: true }) as { services: Record<string, Service> };
const nginxConf = readFileSync(NGINX_CONF, 'utf8');
const services = compose.services;

/** An instance's environment, with compose's `${VAR:?message}` interpolation given a value. */
function instanceEnvironment(name: string): Record<string, string> {
  return Object.fromEntries(
    Object.entries(services[name]?.environment ?? {}).map(([key, value]) => [
      key,
      String(value).replace(/\$\{[A-Z_]+(?::\?[^}]*)?\}/g, 'a secret given to docker compose, 32+ chars'),
    ]),
  );
}

/** The value of a directive inside the `upstream` block of nginx.conf. */
function upstreamDirective(name: string): string | undefined {
  // To the brace alone on its line: the placeholders hold braces too.
  const block = /upstream greeting_service \{\n([\s\S]*?)\n\s*\}\n/.exec(nginxConf)?.[1] ?? '';
  return new RegExp(`^\\s*${name}\\s+([^;]+);`, 'm').exec(block)?.[1];
}

describe('deploy/compose.yaml', () => {
  it('runs three instances built from the Dockerfile', () => {
    for (const name of INSTANCES) {
      const build = services[name]?.build;
      assert.ok(build !== undefined, `${name} is built`);
      assert.equal(resolve(DEPLOY, build.context, build.dockerfile), join(ROOT, 'Dockerfile'));
    }
    assert.ok(existsSync(join(ROOT, 'Dockerfile')));
  });

  it('gives the three one REDIS_URL, naming its Redis service, and one CURSOR_SECRET', () => {
    const environments = INSTANCES.map((name) => services[name]?.environment ?? {});
    const redisUrls = new Set(environments.map((env) => env.REDIS_URL));
    assert.deepEqual([...redisUrls], ['redis://redis:6379']);
    assert.ok(services.redis?.image?.startsWith('redis:'));
    const secrets = new Set(environments.map((env) => env.CURSOR_SECRET));
    assert.equal(secrets.size, 1);
    assert.match(String([...secrets][0]), /^\$\{CURSOR_SECRET:\?/, 'required from the environment, not written here');
  });

  it("gives the instances settings the service accepts, keep-alive above nginx's", () => {
    for (const name of INSTANCES) {
      const config = loadConfig([], instanceEnvironment(name));
      assert.ok(config.trustProxy !== false && config.trustProxy !== true, 'TRUST_PROXY believes the balancer only');
      assert.ok(config.keepAliveTimeoutMs > seconds(upstreamDirective('keepalive_timeout')) * 1000);
    }
  });

  it('publishes a port for nginx alone, which runs deploy/nginx.conf with every placeholder given', () => {
    for (const [name, service] of Object.entries(services)) {
      assert.equal(service.ports !== undefined, name === 'nginx', `${name} publishes a port`);
    }
    const nginx = services.nginx as Service;
    const [source, target] = (nginx.volumes?.[0] ?? '').split(':');
    assert.equal(resolve(DEPLOY, source as string), NGINX_CONF);
    assert.equal(target, '/etc/nginx/templates/nginx.conf.template');
    const env = nginx.environment ?? {};
    assert.equal(env.NGINX_ENVSUBST_OUTPUT_DIR, '/etc/nginx');
    // NGINX_RESOLVER comes from a script the image's entrypoint sources (an executable .envsh).
    const script = nginx.volumes?.find((volume) => volume.includes('/docker-entrypoint.d/'))?.split(':') ?? [];
    assert.match(String(script[1]), /^\/docker-entrypoint\.d\/[^/]+\.envsh$/);
    assert.ok(statSync(resolve(DEPLOY, String(script[0]))).mode & 0o100, `${script[0]} is executable`);
    assert.match(readFileSync(resolve(DEPLOY, String(script[0])), 'utf8'), /^export NGINX_RESOLVER$/m);
    for (const name of PLACEHOLDERS.filter((name) => name !== 'NGINX_RESOLVER')) {
      assert.ok(env[name] !== undefined, `nginx's environment sets ${name}`);
    }
    // The instances listen on the service's default port.
    assert.deepEqual(
      [env.INSTANCE_1, env.INSTANCE_2, env.INSTANCE_3],
      INSTANCES.map((name) => `${name}:${DEFAULT_CONFIG.port}`),
    );
  });

  const dockerCompose = spawnSync('docker-compose', ['version']).error === undefined;
  it('is a valid Compose file for docker-compose', {
    skip: !dockerCompose && 'docker-compose is not installed',
  }, () => {
    const check = spawnSync('docker-compose', ['-f', COMPOSE_FILE, 'config', '-q'], {
      encoding: 'utf8',
      env: { ...process.env, CURSOR_SECRET: 'a secret given to docker compose, 32+ chars' },
    });
    assert.equal(check.status, 0, check.stderr);
  });
});

/** nginx's time: `60s`, `1m`, or a bare number of seconds. */
function seconds(value: string | undefined): number {
  const match = /^(\d+)(s|m)?$/.exec(value ?? '');
  assert.ok(match, `a time: ${value}`);
  return Number(match[1]) * (match[2] === 'm' ? 60 : 1);
}

describe('deploy/nginx.conf', () => {
  it('has exactly the placeholders a deployment fills in', () => {
    assert.deepEqual(placeholdersIn(nginxConf).sort(), [...PLACEHOLDERS].sort());
  });

  it("closes idle upstream connections before the service would: keepalive_timeout below KEEP_ALIVE_TIMEOUT_MS's default", () => {
    assert.ok(upstreamDirective('keepalive') !== undefined, 'upstream connections are kept alive');
    assert.ok(seconds(upstreamDirective('keepalive_timeout')) * 1000 < DEFAULT_CONFIG.keepAliveTimeoutMs);
    assert.match(nginxConf, /^\s*proxy_http_version 1\.1;/m);
    assert.match(nginxConf, /^\s*proxy_set_header Connection "";/m);
  });

  it('passes idempotent requests on to another instance, never a POST or PATCH once sent', () => {
    const nextUpstream = /^\s*proxy_next_upstream ([^;]+);/m.exec(nginxConf)?.[1]?.split(/\s+/) ?? [];
    for (const condition of ['error', 'timeout']) assert.ok(nextUpstream.includes(condition), condition);
    assert.ok(!nextUpstream.includes('non_idempotent'));
    assert.ok(!nextUpstream.includes('http_503'), "a 503 is the service's answer (Redis down), not a failed instance");
  });

  it("answers what it answers by itself in the service's envelope: JSON in UTF-8, with X-Request-Id", () => {
    const statuses = [...nginxConf.matchAll(/^\s*error_page ([\d ]+?)(?: =\d+)? \/\.nginx-error;/gm)].flatMap(
      (match) => match[1]?.split(' ') ?? [],
    );
    for (const status of ['400', '413', '414', '494', '500', '502', '503', '504'])
      assert.ok(statuses.includes(status), status);
    // Both servers, the balancer and the instances' listeners, have the page.
    const pages = nginxConf.split('location = /.nginx-error {').slice(1);
    assert.equal(pages.length, 2);
    for (const page of pages) {
      assert.match(page, /^\s*internal;/m);
      assert.match(page, /^\s*default_type "application\/json; charset=utf-8";/m);
      assert.match(page, /^\s*add_header X-Request-Id \$request_id_out always;/m);
    }
  });

  it("finds the instances by name as it goes, at the network's name server, not once at start", () => {
    assert.match(nginxConf, /^\s*resolver \$\{NGINX_RESOLVER\} valid=1s/m);
    assert.match(nginxConf, /^\s*proxy_pass http:\/\/\$instance;/m);
    for (const n of [1, 2, 3]) {
      assert.match(nginxConf, new RegExp(`^\\s*server unix:\\$\\{NGINX_RUN_DIR\\}/instance-${n}\\.sock `, 'm'));
      assert.match(
        nginxConf,
        new RegExp(`^\\s*"unix:\\$\\{NGINX_RUN_DIR\\}/instance-${n}\\.sock" \\$\\{INSTANCE_${n}\\};`, 'm'),
      );
    }
  });

  it("leaves the service's answers as they are, and passes Host, X-Request-Id and an appended X-Forwarded-For", () => {
    assert.match(nginxConf, /^\s*proxy_intercept_errors off;/m);
    assert.match(nginxConf, /^\s*proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;/m);
    assert.match(nginxConf, /^\s*proxy_set_header X-Request-Id \$request_id_out;/m);
    assert.match(nginxConf, /^\s*proxy_set_header Host \$host_out;/m);
  });

  it('passes content codings through both ways: it neither compresses nor decodes, nor drops Accept-Encoding', () => {
    assert.match(nginxConf, /^\s*gzip off;/m);
    assert.match(nginxConf, /^\s*gunzip off;/m);
    assert.doesNotMatch(nginxConf, /^\s*(gzip|gunzip) on;/m);
    assert.doesNotMatch(nginxConf, /proxy_set_header Accept-Encoding/i);
  });

  it('passes the WebSocket echo’s upgrade on at both hops, idle longer than the service’s pings', () => {
    const locations = nginxConf.split('location ~ ^/api(/v1)?/echo/websocket/?$ {').slice(1);
    assert.equal(locations.length, 2, 'the balancer and the instances’ listeners');
    for (const location of locations) {
      const block = location.slice(0, location.indexOf('\n        }'));
      assert.match(block, /^\s*proxy_http_version 1\.1;/m);
      assert.match(block, /^\s*proxy_set_header Upgrade \$http_upgrade;/m);
      assert.match(block, /^\s*proxy_set_header Connection \$connection_upgrade;/m);
      const read = seconds(/^\s*proxy_read_timeout ([^;]+);/m.exec(block)?.[1]);
      assert.ok(read * 1000 > 2 * DEFAULT_CONFIG.wsPingIntervalMs, `proxy_read_timeout ${read}s`);
    }
    assert.match(nginxConf, /map \$http_upgrade \$connection_upgrade \{\n\s*default upgrade;\n\s*""\s+"";/);
  });
});
