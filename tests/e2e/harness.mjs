// Shared set-up of the end-to-end tests: a static server for the release bundle (dist/) on
// 127.0.0.1, and Debian's Chromium driven by playwright-core, failing on any console error.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer } from 'node:http';
import { mkdir, readFile } from 'node:fs/promises';
import { basename, extname, join, normalize, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

export const root = resolve(fileURLToPath(import.meta.url), '../../..');
export const dist = join(root, 'dist');
export const output = join(root, 'tests/e2e/output');

const types = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript',
  '.wasm': 'application/wasm',
  '.css': 'text/css',
  '.json': 'application/json',
  '.csv': 'text/csv',
};

/** The CLI the tests compare the page with; `cli(...args)` runs it and returns its stdout. */
export const memplanBin = join(root, 'target/debug/memplan');
export const cli = (...args) => execFileSync(memplanBin, args, { encoding: 'utf8', maxBuffer: 1 << 28 });
/** The CLI built for speed (`--profile fast`), for native timings beside the worker's. */
export const fastBin = join(root, 'target/fast/memplan');
export const fastCli = (...args) => execFileSync(fastBin, args, { encoding: 'utf8', maxBuffer: 1 << 28 });

/**
 * Hooks on the page `current()` returns (it is launched in `before`): an element by its
 * `data-testid`, and the bytes an element carries in `data-bytes`.
 */
export function hooks(current) {
  const testid = (id) => current().getByTestId(id);
  const bytesOf = async (id) => Number(await testid(id).getAttribute('data-bytes'));
  /**
   * Arms a cancel of the load about to start: `cancel()` clicks it once the load is under way,
   * waits for the page to be idle, checks that the plan shown stayed, and returns the seconds
   * from the click to the page idle. Where the page shares a stop flag with its worker
   * (cross-origin isolated) the worker hears the cancel and lives on; elsewhere it is
   * terminated, and the page sends a fresh one the dump it shows.
   */
  const cancellable = async () => {
    const before = await testid('tensor-count').innerText();
    const [loading] = current().workers();
    const ended = new Promise((resolve) => loading.on('close', () => resolve(true)));
    return async () => {
      const isolated = await current().evaluate(() => crossOriginIsolated);
      const clicked = Date.now();
      await testid('cancel').click();
      await current().waitForFunction(() => !document.querySelector('[data-testid=progress]'), null, { timeout: 120000, polling: 50 });
      const seconds = (Date.now() - clicked) / 1000;
      assert.equal(await testid('error').count(), 0, 'a cancel is no error');
      assert.equal(await testid('tensor-count').innerText(), before, 'a cancelled load changes nothing');
      const settled = new Promise((resolve) => setTimeout(() => resolve(false), isolated ? 500 : 10000));
      assert.equal(await Promise.race([ended, settled]), !isolated, isolated ? 'the worker heard the cancel' : 'the worker was terminated');
      return seconds;
    };
  };
  /** Opens the file at `path` through the file input; resolves once the summary names it. */
  const opened = async (path) => {
    await testid('file-input').setInputFiles(path);
    await current().waitForFunction((name) => (document.querySelector('[data-testid=summary]')?.innerText ?? '').includes(name), basename(path));
  };
  return { testid, bytesOf, cancellable, opened };
}

/** A minimalloc CSV of `n` buffers (fixed seed), for load and drawing tests and measurements. */
export function syntheticCsv(n) {
  let seed = 12345;
  const next = () => ((seed = (seed * 1103515245 + 12345) % 2147483648), seed);
  const rows = ['id,lower,upper,size'];
  for (let i = 0; i < n; i++) {
    const lower = next() % n;
    const upper = lower + 1 + (next() % 64);
    rows.push(`b${i},${lower},${upper},${256 * (1 + (next() % 4096))}`);
  }
  return rows.join('\n') + '\n';
}

/** A memplan JSON chain of tensors with long ids, at least `bytes` long: `{ text, tensors }`. */
export function bigDump(bytes) {
  const tensors = [];
  const steps = [];
  const pad = 'x'.repeat(150);
  for (let i = 0, size = 0; size < bytes; i++) {
    const t = { id: `t${i}_${pad}`, bytes: 256 + (i % 1000) * 64 };
    const s = { id: `s${i}`, reads: i ? [`t${i - 1}_${pad}`] : [], writes: [`t${i}_${pad}`] };
    tensors.push(t);
    steps.push(s);
    size += JSON.stringify(t).length + JSON.stringify(s).length + 2;
  }
  return { text: JSON.stringify({ memplan: 1, tensors, steps }), tensors: tensors.length };
}

/** What the tests need built first, with the command that builds it. */
const prerequisites = [
  [join(dist, 'index.html'), 'the release bundle: run `trunk build --release` (./scripts/test.sh does)'],
  [memplanBin, 'the CLI: run `cargo build -p memplan-cli` (./scripts/test.sh does)'],
  [fastBin, 'the CLI built for speed: run `cargo build --profile fast -p memplan-cli` (./scripts/test.sh does)'],
];

/**
 * Cross-origin isolation, as Trunk.toml serves the explorer: the page may then share a stop flag
 * with its worker, so a cancel stops a running search at once.
 */
const isolation = { 'cross-origin-opener-policy': 'same-origin', 'cross-origin-embedder-policy': 'require-corp' };

/**
 * Serves `dist/` under `base` (the host's root by default; `/some/path/` as a site serving the
 * explorer from a sub-path), and `/fixtures/...` from extra files, until `close()`; `url` is
 * where the explorer is. `isolated: false` leaves out the isolation headers, as a host that
 * cannot send them does.
 */
export async function serve(extra = {}, { base = '/', isolated = true } = {}) {
  const headers = isolated ? isolation : {};
  for (const [path, what] of prerequisites) {
    if (!existsSync(path)) throw new Error(`${path} is missing: the end-to-end tests need ${what}`);
  }
  const server = createServer(async (req, res) => {
    const path = decodeURIComponent(new URL(req.url, 'http://x').pathname);
    if (extra[path] !== undefined) {
      res.writeHead(200, { 'content-type': types[extname(path)] ?? 'application/octet-stream', ...headers });
      res.end(extra[path]);
      return;
    }
    if (!path.startsWith(base)) {
      res.writeHead(404).end();
      return;
    }
    const inside = path.slice(base.length - 1);
    const file = normalize(join(dist, inside === '/' ? 'index.html' : inside));
    if (!file.startsWith(dist)) {
      res.writeHead(403).end();
      return;
    }
    try {
      const body = await readFile(file);
      res.writeHead(200, { 'content-type': types[extname(file)] ?? 'application/octet-stream', ...headers });
      res.end(body);
    } catch {
      res.writeHead(404).end();
    }
  });
  await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
  const url = `http://127.0.0.1:${server.address().port}${base}`;
  return { url, close: () => new Promise((ok) => server.close(ok)) };
}

export const chromiumFlags = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** A browser page that records console errors and uncaught exceptions in `page.problems`. */
export async function launch() {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    args: chromiumFlags,
  });
  const page = await browser.newPage({ viewport: { width: 1280, height: 1100 } });
  page.problems = [];
  page.on('console', (m) => {
    if (m.type() === 'error') page.problems.push(`console: ${m.text()}`);
  });
  page.on('pageerror', (e) => page.problems.push(`page error: ${e.message}`));
  return { browser, page };
}

/** What a test file opens before its tests: the release bundle served with `fixtures` (path to
 *  body, as `serve` takes them, with its `options`) and a page in a fresh headless Chromium. */
export async function openPage(fixtures = {}, options = {}) {
  await mkdir(output, { recursive: true });
  const server = await serve(fixtures, options);
  const { browser, page } = await launch();
  return { server, browser, page };
}

/** Closes what `openPage` opened (either may be missing when `before` failed part way). */
export async function closePage({ browser, server }) {
  await browser?.close();
  await server?.close();
}
