// The browser's figures for docs/benchmarks.md, measured in headless Chromium on the release
// bundle (dist/) beside the CLI built for speed (target/fast/memplan), side by side in one run.
// The test suite asserts what these runs do; this script only measures. Writes its figures to
// the folder given (default target/browser-bench): responsiveness.txt, perf.json, big-dump.txt,
// onnx-20mb.txt, remat-browser.txt and solver-browser.txt. Usage: node scripts/browser-bench.mjs [DIR]
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { bigDump as bigDumpText, cli, fastCli, hooks, launch, root, serve, syntheticCsv } from '../tests/e2e/harness.mjs';

const out = process.argv[2] ?? join(root, 'target/browser-bench');
await mkdir(out, { recursive: true });
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const server = await serve({
  '/fixtures/transformer-training.json': await readFile(join(root, 'static/examples/transformer-training.json'), 'utf8'),
});
const { browser, page } = await launch();
const { testid, bytesOf } = hooks(() => page);
const noProgress = () => page.waitForFunction(() => !document.querySelector('[data-testid="progress"]'));

/** A 10k-buffer CSV from the file input to the drawn timeline; 50k rectangles panned and zoomed. */
async function drawing() {
  await page.goto(`${server.url}?strategy=best`);
  await testid('summary').waitFor();
  const started = Date.now();
  await testid('file-input').setInputFiles({ name: 'ten-k.csv', mimeType: 'text/csv', buffer: Buffer.from(syntheticCsv(10000)) });
  await page.waitForFunction(() => document.querySelector('[data-testid=timeline-canvas]')?.dataset.items === '10000', null, { timeout: 60000 });
  const loadMs = Date.now() - started;
  await page.goto(`${server.url}?strategy=first-fit&view=arena`);
  await testid('summary').waitFor();
  await testid('file-input').setInputFiles({ name: 'fifty-k.csv', mimeType: 'text/csv', buffer: Buffer.from(syntheticCsv(50000)) });
  await page.waitForFunction(() => document.querySelector('[data-testid=arena-canvas]')?.dataset.items === '50000', null, { timeout: 120000 });
  const box = await testid('arena-canvas').boundingBox();
  const frames = [];
  for (let i = 0; i < 20; i++) {
    await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
    if (i % 2) await page.mouse.wheel(0, i < 10 ? -120 : 120);
    else await page.keyboard.press(i % 4 ? 'a' : 'd');
    await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
    frames.push(Number(await testid('arena-canvas').getAttribute('data-draw-ms')));
  }
  frames.sort((a, b) => a - b);
  const figures = {
    load_plan_draw_10k_ms: loadMs,
    arena_50k_frame_ms_median: frames[frames.length >> 1],
    arena_50k_frame_ms_max: frames[frames.length - 1],
  };
  await writeFile(join(out, 'perf.json'), JSON.stringify(figures, null, 1) + '\n');
}

/**
 * The page's longest tasks while a 62,000-buffer CSV loads and is drawn, with each panel open:
 * the page's thread only draws (the worker plans), so none should pass 200 ms.
 */
async function responsiveness() {
  await page.setViewportSize({ width: 1400, height: 900 });
  const csv = Buffer.from(syntheticCsv(62000));
  const lines = [];
  for (const panel of ['peak', 'flips', 'sweep', 'devices', 'compare', 'spaces']) {
    await page.goto(`${server.url}?panel=${panel}`);
    await testid('summary').waitFor();
    await page.evaluate(() => {
      window.longTasks = [];
      new PerformanceObserver((l) => l.getEntries().forEach((e) => window.longTasks.push(Math.round(e.duration)))).observe({ type: 'longtask' });
    });
    await testid('file-input').setInputFiles({ name: 'sixty-two-k.csv', mimeType: 'text/csv', buffer: csv });
    await page.waitForFunction(() => document.querySelector('[data-testid=tensor-count]')?.textContent === '62000'
      && !document.querySelector('[data-testid=progress]'), null, { timeout: 120000 });
    await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
    const tasks = await page.evaluate(() => window.longTasks);
    lines.push(`| ${panel} | ${Math.max(0, ...tasks)} | ${tasks.join(', ') || 'none'} |`);
  }
  await writeFile(join(out, 'responsiveness.txt'), [
    "The page's tasks over 50 ms while a 62,000-buffer minimalloc CSV loads in the worker and is drawn, with each panel open (Chromium's long tasks):",
    '',
    '| panel open | longest task (ms) | every long task (ms) |',
    '|---|---:|---|',
    ...lines,
  ].join('\n') + '\n');
}

/** A 50.5 MB dump loaded in the worker. */
async function bigDump() {
  await page.goto(server.url);
  await testid('summary').waitFor();
  const { text, tensors } = bigDumpText(50.5e6);
  const file = join(out, 'big.json');
  await writeFile(file, text);
  const started = Date.now();
  await testid('file-input').setInputFiles(file);
  await page.waitForFunction((n) => document.querySelector('[data-testid=tensor-count]')?.textContent === String(n), tensors, { timeout: 120000 });
  const seconds = (Date.now() - started) / 1000;
  await writeFile(join(out, 'big-dump.txt'), `${(text.length / 1e6).toFixed(1)} MB: loaded ${tensors} tensors in ${seconds.toFixed(1)} s\n`);
}

/** A 20 MB ONNX model read, imported and planned in the worker. */
async function onnx() {
  const file = join(out, 'synthetic-20mb.onnx');
  cli('bench', '--onnx-mb', '20', '--write-onnx', file);
  await page.goto(server.url);
  await testid('summary').waitFor();
  const started = Date.now();
  await testid('file-input').setInputFiles(file);
  await page.waitForFunction(() => /synthetic-20mb\.onnx/.test(document.querySelector('[data-testid=summary]')?.innerText ?? ''), null, { timeout: 60000 });
  const seconds = (Date.now() - started) / 1000;
  await writeFile(join(out, 'onnx-20mb.txt'), `20 MB ONNX model (21.2 MB file): read, imported and planned in the worker in ${seconds.toFixed(2)} s\n`);
}

/** A flip, a fit and a sweep on the 2,000-tensor training step, in the worker and natively. */
async function remat() {
  await page.setViewportSize({ width: 1400, height: 900 });
  const src = `${server.url}fixtures/transformer-training.json`;
  await page.goto(`${server.url}?src=${encodeURIComponent(src)}&panel=flips`);
  await testid('flips-table').waitFor();
  const first = await page.locator('[data-testid^="flip-"][type="checkbox"]').first().getAttribute('data-testid');
  // Two toggles to warm up, then nine measured, each from the click to the new footprint on
  // the page and the frame that draws it (a mutation observer sees the change in the task that
  // makes it; the second animation frame after it starts once the first is done).
  const toggles = async () => {
    const times = [];
    for (let i = 0; i < 11; i++) {
      const ms = await page.evaluate(async (id) => {
        const peak = () => document.querySelector('[data-testid="peak-bytes"]').dataset.bytes;
        const before = peak();
        const changed = new Promise((resolve) => {
          const seen = new MutationObserver(() => {
            if (peak() !== before) {
              seen.disconnect();
              resolve();
            }
          });
          seen.observe(document.body, { subtree: true, childList: true, attributes: true, characterData: true });
        });
        const t0 = performance.now();
        document.querySelector(`[data-testid="${id}"]`).click();
        await changed;
        await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
        return performance.now() - t0;
      }, first);
      if (i >= 2) times.push(ms);
    }
    return times.sort((a, b) => a - b);
  };
  const timesBest = await toggles();
  await page.waitForFunction(() => /flip=/.test(location.search));
  await testid('strategy-select').selectOption('first-fit');
  await page.waitForFunction(() => /strategy=first-fit/.test(location.search));
  const times = await toggles();
  const tensors = await testid('tensor-count').textContent();
  if (await testid('clear-flips').count()) await testid('clear-flips').click();
  await page.waitForFunction(() => !/flip=/.test(location.search) && !document.querySelector('[data-testid="flip-delta"]'));
  const baseline = await bytesOf('peak-bytes');
  // Three rounds side by side: a fit and a 32-point sweep in the worker, each from the click to
  // what it shows anew, then `memplan bench --remat` natively; only rounds run together make a
  // ratio on a machine that drifts.
  const shownAnew = (button, shown) => page.evaluate(async ([button, shown]) => {
    const before = document.querySelector(`[data-testid="${shown}"]`)?.textContent;
    const t0 = performance.now();
    document.querySelector(`[data-testid="${button}"]`).click();
    const now = () => document.querySelector(`[data-testid="${shown}"]`)?.textContent;
    while (now() === undefined || now() === before) {
      if (performance.now() - t0 > 30000) throw new Error(`no new ${shown} 30 s after a click on ${button}`);
      await new Promise((r) => setTimeout(r, 1));
    }
    return Math.round(performance.now() - t0);
  }, [button, shown]);
  const src32 = join(root, 'static/examples/transformer-training.json');
  const rounds = [];
  const open = async (tab, panel) => (await testid(panel).count()) || testid(tab).click();
  for (let round = 0; round < 3; round++) {
    await open('tab-flips', 'flips-panel');
    await testid('budget-input').fill(String(Math.floor(baseline * 0.8) - round));
    const fitMs = await shownAnew('fit-button', 'fit-log');
    await open('tab-sweep', 'sweep-points');
    await testid('sweep-points').fill(round === 1 ? '33' : '32');
    await testid('sweep-points').press('Tab');
    const sweepMs = await shownAnew('sweep-button', 'sweep-table');
    const bench = fastCli('bench', '--remat', src32, '--synthetic', '0', '--all-live', '0');
    const row = (task) => Number(bench.split('\n').find((l) => l.startsWith(`| ${task} |`)).split('|').at(-2));
    rounds.push({ fitMs, sweepMs, nativeFit: row('fit, every candidate'), nativeSweep: row('32-point sweep') });
  }
  const mid = (key) => median(rounds.map((r) => r[key]));
  const listed = (key) => rounds.map((r) => Math.round(r[key])).join(', ');
  const ratio = (wasm, native) => (mid(wasm) / mid(native)).toFixed(2);
  await writeFile(join(out, 'remat-browser.txt'), [
    ...[['best, the default', timesBest], ['first-fit', times]].map(([strategy, times]) =>
      `one flip on transformer-training (${tensors} tensors, ${strategy}, in the worker): re-planned and redrawn in ${times[4].toFixed(0)} ms (median of 9 after 2 to warm up; ${times.map((t) => t.toFixed(0)).join(', ')})`),
    `fit to 80% of the footprint without flips, every candidate: ${mid('fitMs')} ms in the worker to the plan log, ${mid('nativeFit').toFixed(1)} ms natively, ${ratio('fitMs', 'nativeFit')}x (medians of 3 rounds side by side: worker ${listed('fitMs')}; native ${listed('nativeFit')})`,
    `32-point sweep: ${mid('sweepMs')} ms in the worker to the table (the middle round sweeps 33), ${mid('nativeSweep').toFixed(0)} ms natively, ${ratio('sweepMs', 'nativeSweep')}x (worker ${listed('sweepMs')}; native ${listed('nativeSweep')})`,
  ].join('\n') + '\n');
}

/** `search` on minimalloc A-F: the first search of a fresh page, 0 and 3 s after the load, and again. */
async function solver() {
  const searchMs = async () => Number(await testid('search-time').getAttribute('data-ms'));
  const lines = [];
  for (const name of ['A', 'B', 'C', 'D', 'E', 'F']) {
    const path = join(root, `tests/data/minimalloc/${name}.1048576.csv`);
    const runs = [0, 1, 2].map(() => JSON.parse(fastCli('plan', path, '--json', '--strategy', 'search')));
    const native = runs[0];
    const nativeMs = median(runs.map((run) => run.elapsed_ms));
    const firsts = { 0: [], 3000: [] };
    const shownAfter = [];
    for (const settle of [0, 3000]) for (let fresh = 0; fresh < 3; fresh++) {
      await page.goto(`${server.url}?strategy=first-fit`);
      await testid('summary').waitFor();
      await testid('file-input').setInputFiles({ name: `${name}.csv`, mimeType: 'text/csv', buffer: await readFile(path) });
      await page.waitForFunction((n) => document.querySelector('[data-testid=tensor-count]')?.textContent === String(n), native.placements.length);
      await noProgress();
      // The wait is what is measured: the first search right after a load, and 3 s after it.
      if (settle) await page.waitForTimeout(settle);
      const browserMs = await page.evaluate(async (b) => {
        const select = document.querySelector('[data-testid=strategy-select]');
        const t0 = performance.now();
        select.value = 'search';
        select.dispatchEvent(new Event('change', { bubbles: true }));
        const shown = () => !document.querySelector('[data-testid="progress"]')
          && document.querySelector('[data-testid=peak-bytes]').dataset.bytes === String(b);
        while (!shown()) await new Promise((r) => setTimeout(r, 1));
        return Math.round(performance.now() - t0);
      }, native.footprint_bytes);
      firsts[settle].push(await searchMs());
      if (settle === 0) shownAfter.push(browserMs);
    }
    const again = [];
    for (let round = 0; round < 5; round++) {
      await testid('strategy-select').selectOption('first-fit');
      await page.waitForFunction(() => /strategy=first-fit/.test(location.search) && !document.querySelector('[data-testid="progress"]')
        && !document.querySelector('[data-testid=search-time]'));
      await testid('strategy-select').selectOption('search');
      await page.waitForFunction((b) => /strategy=search/.test(location.search) && !document.querySelector('[data-testid="progress"]')
        && document.querySelector('[data-testid=search-time]')
        && document.querySelector('[data-testid=peak-bytes]').dataset.bytes === String(b), native.footprint_bytes, { timeout: 60000 });
      again.push(await searchMs());
    }
    const ratio = (ms) => (ms / Math.max(nativeMs, 1)).toFixed(2);
    const first = (settle) => `${median(firsts[settle])} (${firsts[settle].join(', ')}) | ${ratio(median(firsts[settle]))}`;
    const againMs = median(again);
    lines.push(`| ${name} | ${native.footprint_bytes} | ${native.optimal ? 'yes' : 'no'} | ${nativeMs} | ${first(0)} | ${first(3000)} | ${againMs} | ${ratio(againMs)} | ${median(shownAfter)} |`);
  }
  await writeFile(join(out, 'solver-browser.txt'), [
    'search on minimalloc A-F: the CLI built for speed (`elapsed_ms`, median of 3 runs) and the worker in Chromium (its search time, shown in the summary: the first search of a fresh page, right after the file is loaded and, on other pages, 3 s after it, the median of 3 pages and each; then the median of 5 more on the last page; and from selecting `search` to the plan drawn, the first time right after the load, the median of the 3 pages), side by side in one run',
    '',
    '| file | footprint | optimal | native search (ms) | worker, first search right after the load (ms; median, each page) | / native | worker, first search 3 s after the load (ms; median, each page) | / native | worker, again (ms) | again / native | worker, to the plan drawn (ms) |',
    '|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...lines,
  ].join('\n') + '\n');
}

try {
  for (const run of [responsiveness, drawing, bigDump, onnx, remat, solver]) {
    await run();
    console.log(`${run.name}: measured`);
  }
  if (page.problems.length) throw new Error(`the page reported: ${page.problems.join('; ')}`);
} finally {
  await browser.close();
  await server.close();
}
