// Cancelling a load keeps the plan shown, its controls, and a worker that holds its dump:
// whether the page shares a stop flag with the worker (cross-origin isolated, as Trunk.toml
// serves it) or not (a host that cannot send those headers), and whether the load was reading
// or planning. So does a worker that runs out of memory under a load, which says so.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { bigDump, closePage, fastCli, hooks, openPage, output, root, syntheticCsv } from './harness.mjs';

const idle = (page) => page.waitForFunction(() => !document.querySelector('[data-testid=progress]'), null, { timeout: 120000 });
const progressSays = (page, re, timeout = 30000) =>
  page.waitForFunction((source) => new RegExp(source).test(document.querySelector('[data-testid=progress]')?.innerText ?? ''), re.source, { timeout });
const peakIs = (page, bytes) =>
  page.waitForFunction((b) => document.querySelector('[data-testid=peak-bytes]')?.dataset.bytes === String(b), bytes, { timeout: 120000 });
const showing = (page, n, timeout = 120000) =>
  page.waitForFunction((n) => document.querySelector('[data-testid=tensor-count]')?.textContent === String(n), n, { timeout });

/** Runs `body` with a page of its own (served as `options` say), closed after. */
async function onPage(options, body) {
  const opened = await openPage({}, options);
  try {
    await body({ ...opened, ...hooks(() => opened.page) });
  } finally {
    await closePage(opened);
  }
}

/** The convnet example shown with relu0 recomputed (`query` added to its link), planned. */
async function convnetFlipped({ page, server, testid }, query = '') {
  await page.goto(`${server.url}?example=convnet-training&panel=flips${query}`);
  await testid('flips-table').waitFor();
  await testid('flip-relu0').check();
  await page.waitForFunction(() => /flip=relu0/.test(location.search));
  await idle(page);
}

/** Grows the worker's wasm memory to its 4 GiB from outside its allocator: the allocator's
 *  next growth fails, as it would past a large dump's needs. Returns the memory's size. */
async function starveWorker(page) {
  const [worker] = page.workers();
  return worker.evaluate(async () => {
    const wasm = await wasm_bindgen();
    wasm.memory.grow(65536 - wasm.memory.buffer.byteLength / 65536);
    return wasm.memory.buffer.byteLength;
  });
}

/** Selects `strategy` and waits for the page to be idle with no error: the worker holds the
 *  dump shown (where it holds none, the page says "nothing is loaded to plan"). */
async function replan({ page, testid }, strategy) {
  await testid('strategy-select').selectOption(strategy);
  // The link leaves out the default strategy, `best`.
  await page.waitForFunction((s) => (new URLSearchParams(location.search).get('strategy') ?? 'best') === s
    && !document.querySelector('[data-testid=progress]') && !document.querySelector('[data-testid=error]'), strategy, { timeout: 120000 });
}

for (const isolated of [true, false]) {
  test(`a load cancelled while it reads leaves the plan shown, its flips, and a worker that plans it (${isolated ? '' : 'not '}isolated)`, () => onPage({ isolated }, async (p) => {
    const { page, testid, bytesOf, cancellable } = p;
    const file = join(output, 'cancelled.json');
    await writeFile(file, bigDump(40e6).text);
    await convnetFlipped(p);
    assert.equal(await page.evaluate(() => crossOriginIsolated), isolated);
    const flipped = await bytesOf('peak-bytes');
    const cancel = await cancellable();
    await testid('file-input').setInputFiles(file);
    await progressSays(page, /cancelled\.json/);
    await cancel();
    // The flips of the plan shown came back with it, and the link still names them.
    assert.equal(await testid('flip-relu0').isChecked(), true);
    assert.equal(await bytesOf('peak-bytes'), flipped);
    await page.waitForFunction(() => /flip=relu0/.test(location.search));
    // The worker holds the convnet: a toggle plans it, with the flip, and another gives the
    // plan shown before the load back.
    await replan(p, 'bump');
    assert.ok(await bytesOf('peak-bytes') >= flipped, 'bump packs no tighter');
    await replan(p, 'best');
    await peakIs(page, flipped);
    assert.deepEqual(page.problems, []);
  }));
}

test('a load cancelled while its search runs shows its best plan so far', () => onPage({}, async (p) => {
  const { page, server, testid, bytesOf } = p;
  const csv = join(root, 'tests/data/minimalloc/D.1048576.csv');
  const firstFit = JSON.parse(fastCli('plan', csv, '--json', '--strategy', 'first-fit'));
  await page.goto(`${server.url}?strategy=search&work-limit=200000000`);
  await testid('summary').waitFor();
  await idle(page);
  await testid('file-input').setInputFiles(csv);
  await testid('solver-progress').waitFor({ timeout: 60000 });
  await testid('cancel').click();
  await testid('cancelled').waitFor();
  await idle(page);
  assert.equal(await testid('tensor-count').innerText(), String(firstFit.placements.length));
  assert.equal(await testid('checker').innerText(), 'valid');
  assert.ok(await bytesOf('peak-bytes') <= firstFit.footprint_bytes);
  // The worker holds D: a toggle plans it.
  await replan(p, 'first-fit');
  await peakIs(page, firstFit.footprint_bytes);
  assert.deepEqual(page.problems, []);
}));

test('a worker out of memory under a load says so, naming the file and the CLI, and the page keeps what it shows', () => onPage({}, async (p) => {
  const { page, server, testid } = p;
  const file = join(output, 'too-big.json');
  await writeFile(file, bigDump(20e6).text);
  await page.goto(server.url);
  await testid('summary').waitFor();
  const before = await testid('tensor-count').innerText();
  // The worker's warm-up rounds end (they leave their memory free for the next to reuse).
  await page.waitForTimeout(3000);
  assert.equal(await starveWorker(page), 4 * 2 ** 30);
  await testid('file-input').setInputFiles(file);
  await testid('error').waitFor({ timeout: 60000 });
  assert.match(await testid('error').innerText(),
    /^too-big\.json: the worker ran out of memory: it held 4\.00 GiB and asked for [\d.]+ [KMG]?i?B more, past what a browser gives a page's worker \(4 GiB at most\); the CLI has no such limit \(`memplan plan too-big\.json`\)/);
  const said = await testid('error').innerText();
  await idle(page);
  assert.equal(await testid('tensor-count').innerText(), before);
  assert.equal(await testid('error').innerText(), said, 'the plan of the dump sent again leaves the error on screen');
  await page.screenshot({ path: join(output, 'out-of-memory.png') });
  // A fresh worker was sent the dump shown: a toggle plans it.
  await page.locator('[data-testid=error] .dismiss').click();
  await replan(p, 'bump');
  assert.equal(await testid('tensor-count').innerText(), before);
}));

test('a worker out of memory under a plan of the dump shown says so, and the next plan sends a fresh one that dump', () => onPage({}, async (p) => {
  const { page, server, testid } = p;
  const file = join(output, 'replanned.csv');
  await writeFile(file, syntheticCsv(300000));
  await page.goto(`${server.url}?strategy=first-fit`);
  await testid('summary').waitFor();
  await testid('file-input').setInputFiles(file);
  await showing(page, 300000);
  await idle(page);
  await starveWorker(page);
  // Another strategy's plan of the dump shown needs more than the worker has left.
  await testid('strategy-select').selectOption('best-fit');
  await testid('error').waitFor({ timeout: 60000 });
  assert.match(await testid('error').innerText(), /^replanned\.csv: the worker ran out of memory: it held 4\.00 GiB/);
  await idle(page);
  assert.equal(await testid('tensor-count').innerText(), '300000', 'the plan shown stays');
  // The next plan asked sends a fresh worker the dump, under that plan's scenario.
  await replan(p, 'bump');
  await peakIs(page, JSON.parse(fastCli('plan', file, '--json', '--strategy', 'bump')).footprint_bytes);
  assert.equal(await testid('tensor-count').innerText(), '300000');
  assert.equal(await testid('error').count(), 0);
}));

test('a load cancelled while first-fit lays it out ends with no plan of it, and a worker that plans the one shown', () => onPage({}, async (p) => {
  const { page, server, testid, cancellable } = p;
  // A million buffers: the cancel comes within first-fit's decode, which it ends with no
  // layout; the load is dropped with no error and nothing of it shown (`cancellable` checks).
  const file = join(output, 'cancelled-first-fit.csv');
  await writeFile(file, syntheticCsv(1000000));
  await page.goto(`${server.url}?strategy=first-fit`);
  await testid('summary').waitFor();
  await idle(page);
  const before = await testid('tensor-count').innerText();
  const cancel = await cancellable();
  await testid('file-input').setInputFiles(file);
  await progressSays(page, /planning with first-fit/, 120000);
  await cancel();
  assert.equal(await testid('cancelled').count(), 0, 'no plan of the cancelled load is shown');
  // The worker holds the dump shown: a toggle plans it.
  await replan(p, 'bump');
  assert.equal(await testid('tensor-count').innerText(), before);
  assert.deepEqual(page.problems, []);
}));

test('a file chosen right after a cancel loads, with nothing of the cancelled load or the flips before it', () => onPage({}, async (p) => {
  const { page, testid, bytesOf } = p;
  // A million buffers: first-fit lays them out for seconds, and the cancel comes while it does.
  const file = join(output, 'cancelled.csv');
  await writeFile(file, syntheticCsv(1000000));
  const csv = join(root, 'tests/data/minimalloc/D.1048576.csv');
  const d = JSON.parse(fastCli('plan', csv, '--json', '--strategy', 'first-fit'));
  await convnetFlipped(p, '&strategy=first-fit');
  // Every tensor count the page shows from now on.
  await page.evaluate(() => {
    window.counts = new Set();
    const count = () => window.counts.add(document.querySelector('[data-testid=tensor-count]')?.textContent);
    new MutationObserver(count).observe(document.body, { subtree: true, childList: true, characterData: true });
  });
  await testid('file-input').setInputFiles(file);
  await progressSays(page, /planning with first-fit/, 120000);
  // The next file is sent while the worker still lays out the cancelled one: the cancel must
  // still stop that one, and none of its answers undo the next load.
  await testid('cancel').click();
  await testid('file-input').setInputFiles(csv);
  await showing(page, d.placements.length);
  await idle(page);
  assert.equal(await testid('error').count(), 0);
  assert.equal(await bytesOf('peak-bytes'), d.footprint_bytes);
  assert.ok(!(await page.evaluate(() => window.counts.has('1000000'))), 'the cancelled load was never shown');
  assert.doesNotMatch(await page.evaluate(() => location.search), /flip=/, 'the flips of the dump before are not given back to this one');
  // The worker holds D: a toggle plans it.
  await replan(p, 'bump');
  assert.equal(await testid('tensor-count').innerText(), String(d.placements.length));
}));

test('a file chosen while another still parses loads, and the other failing after it undoes nothing', () => onPage({}, async (p) => {
  const { page, testid, bytesOf } = p;
  // Valid JSON up to its last bytes, refused once all of it is read.
  const file = join(output, 'fails-late.json');
  await writeFile(file, bigDump(40e6).text.slice(0, -1));
  const csv = join(root, 'tests/data/minimalloc/D.1048576.csv');
  const d = JSON.parse(fastCli('plan', csv, '--json'));
  await convnetFlipped(p);
  await testid('file-input').setInputFiles(file);
  await progressSays(page, /parsing and checking fails-late\.json/);
  await testid('file-input').setInputFiles(csv);
  await showing(page, d.placements.length, 60000);
  await idle(page);
  assert.equal(await bytesOf('peak-bytes'), d.footprint_bytes);
  assert.equal(await testid('error').count(), 0, 'the failed load, which D replaced, says nothing');
  assert.doesNotMatch(await page.evaluate(() => location.search), /flip=/, 'the flips of the dump before are not given back to D');
}));
