import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';
import Fastify from 'fastify';
import fp from 'fastify-plugin';
import type { Browser, Page } from 'playwright-core';
import { buildApp } from '../../src/app.js';
import { DOCS_CSP } from '../../src/plugins/response-headers.js';
import { PAGE_PATHS } from '../../src/routes/docs.js';
import { BROWSER_SKIP, launchBrowser } from '../browser.js';
import {
  assertEnvelope,
  type Client,
  listening,
  parseRawResponse,
  rawExchange,
  testConfig,
  transports,
} from '../helpers.js';

for (const [transport, connect] of transports) {
  describe(`GET /docs (${transport})`, () => {
    let client: Client;
    before(async () => {
      client = await connect();
    });
    after(() => client.close());

    it('serves the Swagger UI page with its own Content-Security-Policy', async () => {
      const res = await client.send({ path: '/docs' });
      assert.equal(res.status, 200);
      assert.equal(res.headers['content-type'], 'text/html; charset=utf-8');
      assert.equal(res.headers['content-security-policy'], DOCS_CSP);
      assert.equal(typeof res.headers['x-request-id'], 'string');
      assert.equal(res.headers['x-content-type-options'], 'nosniff');
      assert.match(res.text, /<script src="\/docs\/static\/swagger-ui-bundle\.js"/);
      assert.doesNotMatch(res.text, /https?:\/\//, 'nothing is loaded from another host');
    });

    it('serves the page’s assets from the installed package, with the same policy', async () => {
      const res = await client.send({ path: '/docs/static/swagger-ui-bundle.js' });
      assert.equal(res.status, 200);
      assert.match(String(res.headers['content-type']), /^application\/javascript/);
      assert.equal(res.headers['content-security-policy'], DOCS_CSP);
      assert.ok(res.text.length > 100_000);
    });

    // Found by the fuzz suite: a file the package does not have was a 405 naming the method as allowed,
    // and a path @fastify/static refuses to look up (a backslash, a NUL byte) a 403.
    for (const path of [
      '/docs/static/nope.js',
      '/docs/static/index.css/',
      '/docs/static/.hidden',
      '/docs/static/%5C',
      '/docs/static/index.css/%5C',
      '/docs/static/a%00b',
    ]) {
      it(`answers GET ${path}, which names no file, with 404`, async () => {
        const error = assertEnvelope(await client.send({ path }), 404, 'NOT_FOUND');
        assert.equal(error.message, `No route for GET ${path}.`);
      });
    }

    it('answers the conditions and ranges of its static files with the envelope', async () => {
      const path = '/docs/static/index.css';
      assertEnvelope(await client.send({ path, headers: { 'if-match': '"nope"' } }), 412, 'PRECONDITION_FAILED');
      const range = await client.send({ path, headers: { range: 'bytes=999999999-' } });
      assertEnvelope(range, 416, 'RANGE_NOT_SATISFIABLE');
      assert.equal((await client.send({ path, headers: { range: 'bytes=0-3' } })).text, 'html');
    });

    it('redirects the page’s old address to the page, its query string kept', async () => {
      for (const [path, location] of [
        ['/docs/static/index.html', '/docs/'],
        ['/docs/static/index.html?x=1', '/docs/?x=1'],
        ['/docs/static/index.html/', '/docs/'],
      ] as const) {
        const res = await client.send({ path });
        assert.equal(res.status, 302, path);
        assert.equal(res.headers.location, location, path);
      }
    });

    it('reads the same document as GET /openapi.json', async () => {
      const page = await client.send({ path: '/docs/json' });
      const document = await client.send({ path: '/openapi.json' });
      assert.equal(page.status, 200);
      assert.deepEqual(page.json(), document.json());
    });

    it('leaves the API’s own policy on every other response', async () => {
      const res = await client.send({ path: '/api/hello' });
      assert.equal(res.headers['content-security-policy'], "default-src 'none'; frame-ancestors 'none'");
    });
  });
}

describe('the page’s paths', () => {
  it('are those @fastify/swagger-ui adds, each of which the service routes to it', async () => {
    const ui = Fastify({ exposeHeadRoutes: false });
    const added: string[] = [];
    ui.addHook('onRoute', ({ method, url }) => {
      if ([method].flat().includes('GET')) added.push(url);
    });
    // The decorator Swagger UI names as its dependency; no document is read here.
    const swagger = (() => ({})) as unknown as FastifyInstance['swagger'];
    await ui.register(
      fp(
        async (app) => {
          app.decorate('swagger', swagger);
        },
        { name: '@fastify/swagger' },
      ),
    );
    await ui.register(swaggerUi, { routePrefix: '/docs', theme: { title: 'x' } });
    await ui.ready();
    assert.deepEqual(added.sort(), PAGE_PATHS.map((path) => `/docs${path}`).sort());
    await ui.close();
  });
});

describe('GET /docs under a context path', () => {
  it('links its assets under the context path, with or without a trailing slash', async () => {
    const app = await buildApp(testConfig({ contextPath: '/svc' }));
    try {
      const bare = await app.inject('/svc/docs');
      assert.equal(bare.statusCode, 200);
      assert.match(bare.body, /href="\/svc\/docs\/static\/swagger-ui\.css"/);
      const slash = await app.inject('/svc/docs/');
      assert.match(slash.body, /href="\.\/static\/swagger-ui\.css"/);
      assert.equal((await app.inject('/svc/docs/static/swagger-ui.css')).statusCode, 200);
      assert.equal((await app.inject('/docs')).statusCode, 404);
      const old = await app.inject('/svc/docs/static/index.html?x=1');
      assert.deepEqual([old.statusCode, old.headers.location], [302, '/svc/docs/?x=1']);
    } finally {
      await app.close();
    }
  });
});

describe('GET /docs/static/index.html in absolute form', () => {
  it('redirects to the page on this service, never to the host the target names', async () => {
    const { app, port } = await listening();
    try {
      const response = await rawExchange(
        port,
        'GET http://evil.example/docs/static/index.html?x=1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
      );
      const res = parseRawResponse(response);
      assert.equal(res.status, 302, response);
      assert.equal(res.headers.location, '/docs/?x=1');
    } finally {
      await app.close();
    }
  });
});

// -----------------------------------------------------------------------------------------------
// The page in a real browser: Debian's Chromium, driven by playwright-core.

const SCREENSHOT = fileURLToPath(new URL('../artifacts/docs.png', import.meta.url));

/**
 * Executes an expanded operation from the page and returns the status and the body the page shows,
 * parsed as JSON unless told otherwise.
 */
async function execute(
  page: Page,
  operation: string,
  { json = true } = {},
): Promise<{ status: string; body: unknown }> {
  const block = page.locator(`#${operation}`);
  await block.locator('.btn.execute').click();
  const answer = block.locator('.live-responses-table .response');
  await answer.waitFor();
  const status = (await answer.locator('.response-col_status').innerText()).trim();
  if (!json) return { status, body: undefined };
  const body = await answer.locator('.response-col_description pre').first().innerText();
  return { status, body: JSON.parse(body) };
}

describe('GET /docs in Chromium', {
  skip: BROWSER_SKIP,
  // Swagger UI re-renders the whole page on every click: about a minute on an idle machine of two
  // cores, twice that beside other suites. The limit is there to end a hang, not to time the page.
  timeout: 300_000,
}, () => {
  let app: FastifyInstance;
  let origin: string;
  let browser: Browser;
  let page: Page;
  const requests: string[] = [];
  const consoleErrors: string[] = [];

  before(async () => {
    app = await buildApp(testConfig());
    origin = await app.listen({ host: '127.0.0.1', port: 0 });
    browser = await launchBrowser();
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    page.on('request', (request) => requests.push(request.url()));
    page.on('console', (message) => {
      if (message.type() === 'error') consoleErrors.push(message.text());
    });
    page.on('pageerror', (error) => consoleErrors.push(error.message));
    // A blocked resource is also a console error; the event names the directive, for the message.
    await page.addInitScript({
      content: `document.addEventListener('securitypolicyviolation', (event) => {
        console.error('CSP violation: ' + event.effectiveDirective + ' blocked ' + event.blockedURI);
      });`,
    });
    await page.goto(`${origin}/docs`);
  });

  after(async () => {
    await browser?.close();
    await app?.close();
  });

  it('lists every operation of /openapi.json', async () => {
    const document = (await app.inject('/openapi.json')).json();
    const documented = Object.entries<object>(document.paths).flatMap(([path, item]) =>
      Object.keys(item).map((method) => `${method.toUpperCase()} ${path}`),
    );
    const blocks = page.locator('.opblock');
    await blocks.nth(documented.length - 1).waitFor();
    const listed = await blocks.evaluateAll((elements) =>
      elements.map(
        (element) =>
          `${element.querySelector('.opblock-summary-method')?.textContent} ` +
          `${element.querySelector('.opblock-summary-path')?.getAttribute('data-path')}`,
      ),
    );
    assert.deepEqual(listed.sort(), documented.sort());
  });

  it('sends GET /api/hello/{name} and shows the answer', async () => {
    await page.locator('#operations-greeting-getGreeting .opblock-summary-control').click();
    await page.locator('#operations-greeting-getGreeting tr[data-param-name="name"] input').fill('Grace Hopper');
    const { status, body } = await execute(page, 'operations-greeting-getGreeting');
    assert.equal(status, '200');
    assert.deepEqual(body, { greeting: 'Hello, Grace Hopper!' });
  });

  it('sends POST /api/echo with a body typed into the page and shows the answer', async () => {
    await page.locator('#operations-echo-echo .opblock-summary-control').click();
    const sent = { name: 'Ada', languages: ['Analytical Engine'], year: 1843 };
    await page.locator('#operations-echo-echo textarea.body-param__text').fill(JSON.stringify(sent));
    const { status, body } = await execute(page, 'operations-echo-echo');
    assert.equal(status, '200');
    const { received, echo } = body as { received: unknown; echo: boolean };
    assert.deepEqual({ received, echo }, { received: sent, echo: true });
  });

  it('sends every other operation with the examples the page fills in, each answered 2xx', async () => {
    const done = new Set(['operations-greeting-getGreeting', 'operations-echo-echo']);
    const operations = (await page.locator('.opblock').evaluateAll((elements) => elements.map((e) => e.id))).filter(
      (id) => !done.has(id),
    );
    const answers: string[] = [];
    for (const operation of operations) {
      await page.locator(`#${operation} .opblock-summary-control`).click();
      const { status } = await execute(page, operation, { json: false });
      answers.push(`${operation} ${status}`);
      await page.locator(`#${operation} .opblock-summary-control`).click(); // closed again, to keep the page short
    }
    assert.deepEqual(
      answers.filter((answer) => !/ 2\d\d$/.test(answer)),
      [],
    );
  });

  it('saves a screenshot of the page with the echo request and its answer', async () => {
    await mkdir(new URL('../artifacts/', import.meta.url), { recursive: true });
    // The request's URL and curl line above, the answer's status and body below.
    await page
      .locator('#operations-echo-echo .responses-inner > div > div')
      .first()
      .evaluate((element) => {
        element.scrollIntoView({ block: 'center' });
      });
    await page.screenshot({ path: SCREENSHOT });
    assert.ok(existsSync(SCREENSHOT));
  });

  it('loaded everything from this service, with no console error and no CSP violation', () => {
    const elsewhere = requests.filter((url) => !url.startsWith(`${origin}/`) && !url.startsWith('data:'));
    assert.deepEqual(elsewhere, []);
    assert.ok(requests.includes(`${origin}/docs/json`), 'the page read the document');
    assert.deepEqual(consoleErrors, []);
  });
});
