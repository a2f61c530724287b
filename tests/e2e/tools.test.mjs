// The panels that change or explain the plan, end to end on the release bundle. Flips: the
// candidates of a training step, a toggle that re-plans to the CLI's footprint with the delta
// against the plan without flips, a fit to a budget with its plan log, flips and budget in the
// link, and the same in the worker for a dump the user brings. Spaces: the table, counts and
// diagnostics of `memplan spaces`. Embedding: a host page hands a dump over by postMessage.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { cli, closePage, hooks, openPage, output, root, syntheticCsv } from './harness.mjs';

const convnet = join(root, 'static/examples/convnet-training.json');
const cliFootprint = (...inline) =>
  JSON.parse(cli('plan', convnet, '--json', ...(inline.length ? ['--flips', inline.join(',')] : []))).footprint_bytes;

/** An output no step writes: `memplan spaces` flags it. */
const noWriter = {
  memplan: 1,
  name: 'no writer',
  tensors: [
    { id: 'x', bytes: 4096, kind: 'input' },
    { id: 'h', bytes: 4096 },
    { id: 'y', bytes: 1024, kind: 'output' },
  ],
  steps: [{ id: 's0', reads: ['x'], writes: ['h'] }],
};

let server, browser, page;
before(async () => {
  ({ server, browser, page } = await openPage({
    '/fixtures/convnet.json': await readFile(convnet, 'utf8'),
    '/fixtures/nowriter.json': JSON.stringify(noWriter),
    '/fixtures/embed-example.html': await readFile(join(root, 'docs/embed-example.html'), 'utf8'),
    '/fixtures/transformer-training.json': await readFile(join(root, 'static/examples/transformer-training.json'), 'utf8'),
  }));
  await writeFile(join(output, 'nowriter.json'), JSON.stringify(noWriter));
});
after(() => closePage({ browser, server }));

const { testid, bytesOf } = hooks(() => page);

test('a flip re-plans at once to the CLI footprint, with the delta against no flips', async () => {
  await page.setViewportSize({ width: 1400, height: 900 });
  await page.goto(`${server.url}?example=convnet-training&panel=flips`);
  await testid('flips-table').waitFor();
  const names = await page.locator('[data-testid^="flip-"][type="checkbox"]').evaluateAll((els) =>
    els.map((e) => e.dataset.testid.slice('flip-'.length)));
  assert.equal(names.length, 9, names.join(', '));
  const baseline = await bytesOf('peak-bytes');
  assert.equal(baseline, cliFootprint());
  assert.equal(await testid('flip-delta').count(), 0, 'no delta without flips');

  await testid('flip-relu0').check();
  await page.waitForFunction((b) => Number(document.querySelector('[data-testid="peak-bytes"]').dataset.bytes) !== b, baseline);
  const flipped = await bytesOf('peak-bytes');
  assert.equal(flipped, cliFootprint('relu0'));
  assert.equal(await bytesOf('baseline-bytes'), baseline);
  assert.equal(await bytesOf('flip-delta'), flipped - baseline);
  assert.ok(flipped < baseline, `${flipped} vs ${baseline}`);
  await page.waitForFunction(() => /flip=relu0/.test(location.search));
  await page.screenshot({ path: join(output, 'flips-1400x900.png') });

  // Unflipping gives the baseline back.
  await testid('flip-relu0').uncheck();
  await page.waitForFunction((b) => Number(document.querySelector('[data-testid="peak-bytes"]').dataset.bytes) === b, baseline);
  await page.waitForFunction(() => !/flip=/.test(location.search));
});

test('fit meets a budget, shows its plan log and applies its flips; the link keeps them', async () => {
  await page.setViewportSize({ width: 1366, height: 768 });
  await page.goto(`${server.url}?example=convnet-training&panel=flips`);
  await testid('flips-table').waitFor();
  assert.equal(await testid('no-candidates').count(), 0);
  assert.match(await testid('search').getAttribute('placeholder'), /tensors, ops/);
  const baseline = await bytesOf('peak-bytes');
  const budget = Math.floor(baseline * 0.8);
  await testid('budget-input').fill(String(budget));
  await testid('fit-button').click();
  await testid('fit-log').waitFor();
  const expected = JSON.parse(cli('fit', convnet, '--target', String(budget), '--json'));
  await page.waitForFunction((b) => Number(document.querySelector('[data-testid="peak-bytes"]').dataset.bytes) === b, expected.final_bytes);
  const flips = await testid('fit-flip').allTextContents();
  assert.deepEqual(flips.map((f) => f.split(':')[0]), expected.flips.map((f) => f.tensor));
  assert.ok(expected.within_target && expected.final_bytes <= budget);
  for (const f of expected.flips) assert.ok(await testid(`flip-${f.tensor}`).isChecked(), f.tensor);
  // Round one's solo reliefs fill the table: each accepted flip first in line relieves alone
  // what it relieved first.
  const first = expected.flips[0];
  assert.equal(Number(await testid(`solo-${first.tensor}`).getAttribute('data-bytes')), first.relief_bytes);
  assert.match(await testid('fit-log').textContent(), /within target/);
  // Units: bytes in binary units (exact only beside them), costs with SI prefixes.
  const log = await testid('fit-log').textContent();
  assert.doesNotMatch(log.replace(/\([\d,]+ B\)/g, ''), /\d{5,} B/, log);
  assert.match(flips[0], /relieves [\d.]+ (KiB|MiB|GiB), cost [\d.]+ [kMGTPE]?FLOPs$/);
  await page.screenshot({ path: join(output, 'flips-fit-1366x768.png') });

  // The link carries the flips and the budget: opening it shows the same plan.
  const link = page.url();
  assert.match(link, new RegExp(`target=${budget}`));
  await page.goto('about:blank');
  await page.goto(link);
  await testid('flips-table').waitFor();
  await page.waitForFunction((b) => Number(document.querySelector('[data-testid="peak-bytes"]').dataset.bytes) === b, expected.final_bytes);
  assert.equal(await testid('budget-input').inputValue(), String(budget));

  // A budget that is not one says so.
  await testid('budget-input').fill('lots');
  await testid('fit-button').click();
  await page.getByTestId('error').filter({ hasText: 'not a size' }).waitFor();
});

test('a dump the user brings fits in the worker', async () => {
  await page.setViewportSize({ width: 1400, height: 900 });
  await page.goto(`${server.url}?src=${encodeURIComponent(`${server.url}fixtures/convnet.json`)}&panel=flips&strategy=first-fit`);
  await testid('flips-table').waitFor();
  await testid('budget-input').fill('minimize');
  await testid('fit-button').click();
  await testid('fit-log').waitFor();
  const expected = JSON.parse(cli('fit', convnet, '--target', 'minimize', '--strategy', 'first-fit', '--json'));
  await page.waitForFunction((b) => Number(document.querySelector('[data-testid="peak-bytes"]').dataset.bytes) === b, expected.final_bytes);
  assert.equal(await testid('fit-flip').count(), expected.flips.length);
});

test('a flip, a fit and a sweep on a 2,000-tensor training step in the worker', async () => {
  // Their times are measured by scripts/browser-bench.mjs.
  await page.setViewportSize({ width: 1400, height: 900 });
  const file = join(root, 'static/examples/transformer-training.json');
  const src = `${server.url}fixtures/transformer-training.json`;
  await page.goto(`${server.url}?src=${encodeURIComponent(src)}&panel=flips&strategy=first-fit`);
  await testid('flips-table').waitFor();
  const first = await page.locator('[data-testid^="flip-"][type="checkbox"]').first().getAttribute('data-testid');
  const id = first.slice('flip-'.length);
  const flipped = JSON.parse(cli('plan', file, '--json', '--strategy', 'first-fit', '--flips', id)).footprint_bytes;
  await testid(first).click();
  await page.waitForFunction((b) => Number(document.querySelector('[data-testid="peak-bytes"]').dataset.bytes) === b, flipped);
  await testid(first).click();
  await page.waitForFunction(() => !/flip=/.test(location.search) && !document.querySelector('[data-testid="flip-delta"]'));
  const baseline = await bytesOf('peak-bytes');
  // A fit to 80% of the footprint without flips: the plan log and its plan, as the CLI's.
  const budget = Math.floor(baseline * 0.8);
  const fitted = JSON.parse(cli('fit', file, '--target', String(budget), '--strategy', 'first-fit', '--json'));
  await testid('budget-input').fill(String(budget));
  await testid('fit-button').click();
  await testid('fit-log').waitFor();
  await page.waitForFunction((b) => Number(document.querySelector('[data-testid="peak-bytes"]').dataset.bytes) === b, fitted.final_bytes);
  // A 32-point sweep: its table, row for row.
  await testid('tab-sweep').click();
  await testid('sweep-points').fill('32');
  await testid('sweep-points').press('Tab');
  await testid('sweep-button').click();
  // Each target's fit considers all 288 candidates (about 20 s natively for the 32).
  await testid('sweep-table').waitFor({ timeout: 150000 });
  assert.equal(await testid('sweep-table').locator('tbody tr').count(), 32);
  // 288 candidates: the largest 200 and the recomputed ones are listed, the rest counted (the
  // fit recomputes most of them, so its flips are cleared first).
  const candidates = JSON.parse(await readFile(file, 'utf8')).remat_candidates.length;
  await testid('tab-flips').click();
  await testid('clear-flips').click();
  await page.waitForFunction(() => !/flip=/.test(location.search));
  await page.waitForFunction(() => !document.querySelector('[data-testid^="flip-"][type="checkbox"]:checked'));
  const rows = await page.locator('[data-testid^="flip-"][type="checkbox"]').count();
  assert.ok(rows >= 200 && rows < candidates, `${rows} rows`);
  assert.match(await testid('flips-more').textContent(), new RegExp(`^\\+ ${candidates - rows} smaller candidates`));
  // About a thousand tensors are live at this step's peak: the largest 200 are listed, the rest
  // counted.
  assert.equal(await testid('peak-row').count(), 200);
  assert.match(await testid('peak-more').textContent(), /^\+ \d+ smaller tensors/);
});

test('the flips panel fits a 700x400 frame', async () => {
  await page.setViewportSize({ width: 700, height: 400 });
  await page.goto(`${server.url}?example=convnet-training&panel=flips`);
  await testid('flips-table').waitFor();
  await page.screenshot({ path: join(output, 'flips-700x400.png') });
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
  assert.ok(overflow <= 0, `horizontal overflow ${overflow}`);
});

test('the spaces panel shows what memplan spaces says', async () => {
  await page.setViewportSize({ width: 1400, height: 900 });
  await page.goto(`${server.url}?example=mlp-training`);
  await testid('tab-spaces').click();
  await testid('spaces-table').waitFor();
  const text = cli('spaces', join(root, 'static/examples/mlp-training.json'));
  const lines = text.trim().split('\n');
  assert.equal(await testid('space-row').count(), lines.length - 2);
  assert.equal((await testid('space-counts').textContent()).trim(), lines.at(-1));
  const first = (await testid('space-row').first().locator('td').allTextContents()).map((t) => t.trim());
  assert.deepEqual(first.slice(0, 4), lines[1].split(/\s+/).slice(0, 4));
  assert.equal(await testid('space-diagnostics').count(), 0);
  await page.waitForFunction(() => /panel=spaces/.test(location.search));
  await page.screenshot({ path: join(output, 'spaces-1400x900.png') });

  // An output with no writer: the diagnostic, as the CLI words it.
  await page.goto(`${server.url}?src=${encodeURIComponent(`${server.url}fixtures/nowriter.json`)}&panel=spaces`);
  await testid('space-diagnostics').waitFor();
  assert.match(await testid('space-diagnostics').textContent(), /output #0 \(`y`\) has no kernel writer or backing alias/);
  assert.match(await testid('spaces-table').textContent(), /output #0 has no writer/);
});

test('a 62,000-buffer CSV with the spaces or flips panel open lists what a page can hold', async () => {
  // A minimalloc CSV has no ops: no candidates to recompute; its 62,000 slots are listed up to
  // the largest 200, the rest counted (the page once built a row for each, and froze).
  await page.goto(`${server.url}?panel=flips`);
  await testid('summary').waitFor();
  await testid('file-input').setInputFiles({ name: 'sixty-two-k.csv', mimeType: 'text/csv', buffer: Buffer.from(syntheticCsv(62000)) });
  await page.waitForFunction(() => document.querySelector('[data-testid=tensor-count]')?.textContent === '62000');
  // In place of controls that could only answer the baseline, the panels say why.
  assert.match(await testid('no-candidates').innerText(), /no remat candidates.*minimalloc CSV/s);
  assert.equal(await testid('fit-button').isVisible(), false);
  await testid('tab-sweep').click();
  assert.match(await testid('sweep-panel').innerText(), /no remat candidates/);
  assert.equal(await testid('sweep-button').isVisible(), false);
  await testid('tab-compare').click();
  await testid('compare-panel').waitFor();
  assert.equal(await testid('compare-keep-flips').isVisible(), false);
  await testid('tab-spaces').click();
  await testid('spaces-table').waitFor();
  assert.equal(await testid('space-row').count(), 200);
  assert.match(await testid('spaces-more').textContent(), /^\+ 61800 smaller slots not listed/);
});

test('a host page hands a dump to the embedded explorer by postMessage', async () => {
  await page.setViewportSize({ width: 900, height: 700 });
  await page.goto(`${server.url}fixtures/embed-example.html?explorer=/`);
  await page.waitForSelector('#post:not([disabled])');
  await page.click('#post');
  const frame = page.frameLocator('#memplan');
  await page.waitForFunction(() => /posted=posted\.json/.test(document.getElementById('memplan').contentWindow.location.search));
  await frame.locator('canvas.plot[data-draw-ms]').waitFor();
  await page.screenshot({ path: join(output, 'embed-postmessage.png') });

  // On a whole page: a text dump posted to the window loads; a malformed message is named.
  await page.goto(`${server.url}?example=mlp-training`);
  await testid('peak-bytes').waitFor();
  const text = JSON.stringify(noWriter);
  await page.evaluate((text) => window.postMessage({ memplan: 1, type: 'load', name: 'nw.json', text }, '*'), text);
  await page.waitForFunction(() => document.querySelector('[data-testid="tensor-count"]')?.textContent === '3');
  const expected = JSON.parse(cli('plan', join(output, 'nowriter.json'), '--json')).footprint_bytes;
  assert.equal(await bytesOf('peak-bytes'), expected);
  await page.evaluate(() => window.postMessage({ memplan: 1, type: 'load', name: 'nothing.json' }, '*'));
  await testid('error').filter({ hasText: 'has neither `bytes`' }).waitFor();
  // Not ours: ignored.
  await page.evaluate(() => window.postMessage({ type: 'load' }, '*'));
  assert.equal(await testid('tensor-count').textContent(), '3');
});

test('a question answered while a plan asked after it runs leaves the page busy with that plan', async () => {
  await page.setViewportSize({ width: 1400, height: 900 });
  await page.goto(`${server.url}?example=decoder-serving&panel=compare`);
  await testid('compare-strategy').selectOption('bump');
  await page.waitForFunction(() => document.querySelector('.app').getAttribute('aria-busy') === 'false');
  // The question (the plan shown against bump's) and then a plan (with best-fit), in one task:
  // the worker answers the question before it hears of the plan, and the page hears that
  // answer while the plan is still to come.
  const busyWhenAnswered = await page.evaluate(() => new Promise((resolve) => {
    const observer = new MutationObserver(() => {
      if (document.querySelector('[data-testid=diff-table]')) {
        observer.disconnect();
        resolve(document.querySelector('.app').getAttribute('aria-busy'));
      }
    });
    observer.observe(document.body, { childList: true, subtree: true });
    document.querySelector('[data-testid=compare-button]').click();
    const strategy = document.querySelector('[data-testid=strategy-select]');
    strategy.value = 'best-fit';
    strategy.dispatchEvent(new Event('change', { bubbles: true }));
  }));
  assert.equal(busyWhenAnswered, 'true', 'the page is busy with the plan asked after the question');
  // The plan comes, and with it the end of the work.
  const bestFit = JSON.parse(cli('plan', join(root, 'static/examples/decoder-serving.json'), '--json', '--strategy', 'best-fit')).footprint_bytes;
  await page.waitForFunction((b) => Number(document.querySelector('[data-testid="peak-bytes"]')?.dataset.bytes) === b
    && document.querySelector('.app').getAttribute('aria-busy') === 'false', bestFit);
});

test('a largest-that-fits answer asked before a param changed is not shown for the new value', async () => {
  await page.setViewportSize({ width: 1400, height: 900 });
  const serving = join(root, 'static/examples/decoder-serving.json');
  await page.goto(`${server.url}?example=decoder-serving&panel=devices`);
  await testid('devices-panel').waitFor();
  await testid('hardware-select').selectOption('l4-24gb');
  await testid('usable-bytes').waitFor();
  await page.waitForFunction(() => document.querySelector('.app').getAttribute('aria-busy') === 'false');
  // The question under S=4096 and then S=512, in one task: its answer comes after the change.
  await page.evaluate(() => {
    document.querySelector('[data-testid=fits-button-B]').click();
    const s = document.querySelector('[data-testid=param-value-S]');
    s.value = '512';
    s.dispatchEvent(new Event('change', { bubbles: true }));
  });
  const atS512 = JSON.parse(cli('plan', serving, '--json', '--set', 'S=512')).footprint_bytes;
  await page.waitForFunction((b) => Number(document.querySelector('[data-testid="peak-bytes"]')?.dataset.bytes) === b
    && document.querySelector('.app').getAttribute('aria-busy') === 'false', atS512);
  assert.equal(await page.locator('[data-testid=fits-result]').count(), 0, 'no answer for S=4096 shown at S=512');
  // Asked again, under S=512, it is shown: the largest the CLI finds there.
  const wide = JSON.parse(cli('fits', serving, '--json', '--device-class', 'l4-24gb', '--util', '0.9', '--param', 'B', '--set', 'S=512'));
  await testid('fits-button-B').click();
  await page.waitForFunction((n) => document.querySelector('[data-testid=fits-result]')?.dataset.largest === String(n), wide.largest);
  // Another strategy plans otherwise: the answer, about the one before, goes.
  await testid('strategy-select').selectOption('bump');
  await page.waitForFunction(() => !document.querySelector('[data-testid=fits-result]'));
});

test("a plan arriving while a param is being typed keeps the box and what is typed in it", async () => {
  await page.setViewportSize({ width: 1400, height: 900 });
  await page.goto(`${server.url}?example=decoder-serving&panel=devices`);
  await testid('devices-panel').waitFor();
  const peak = () => testid('peak-bytes').getAttribute('data-bytes');
  const before = await peak();
  // B is being typed (no Enter yet) when S's change re-plans.
  await page.$eval('[data-testid=param-value-B]', (el) => { el.dataset.typedIn = 'yes'; });
  await testid('param-value-B').fill('3');
  await page.$eval('[data-testid=param-value-S]', (el) => {
    el.value = '1024';
    el.dispatchEvent(new Event('change', { bubbles: true }));
  });
  await page.waitForFunction((b) => document.querySelector('[data-testid=peak-bytes]')?.dataset.bytes !== b, before);
  assert.equal(await testid('param-value-B').inputValue(), '3', 'the typing stays');
  assert.equal(await testid('param-value-B').getAttribute('data-typed-in'), 'yes', 'the same box');
  await testid('param-value-B').press('Enter');
  await page.waitForFunction(() => /B%3D3/.test(location.search) && /S%3D1024/.test(location.search));
});

test('the devices panel: the usable budget, the headroom, the largest batch that fits', async () => {
  await page.setViewportSize({ width: 1400, height: 900 });
  const serving = join(root, 'static/examples/decoder-serving.json');
  const fitsJson = (...args) => JSON.parse(cli('fits', serving, '--json', '--device-class', 'l4-24gb', ...args));
  await page.goto(`${server.url}?example=decoder-serving&panel=devices`);
  await testid('devices-panel').waitFor();
  assert.equal(await testid('fits-button-B').isDisabled(), true, 'no class, no bisection');
  assert.equal(await page.locator('[data-usable-band], [data-usable-line]').count(), 0, 'no class, no usable line');
  await testid('hardware-select').selectOption('l4-24gb');
  await testid('usable-bytes').waitFor();
  const cliFits = fitsJson('--util', '0.9', '--param', 'B', '--set', 'S=4096');
  assert.equal(await bytesOf('usable-bytes'), cliFits.usable_bytes);
  assert.equal(await bytesOf('driver-bytes'), cliFits.driver_bytes);
  assert.equal(await testid('headroom').getAttribute('data-what'), 'headroom');

  await testid('fits-button-B').click();
  await testid('fits-result').waitFor();
  assert.equal(await testid('fits-result').getAttribute('data-largest'), String(cliFits.largest));
  assert.match(await testid('fits-result').textContent(), /does not fit/);

  // Figures near the boundary are exact enough to see that B fits and B+1 does not.
  const [, fitting, usableText] = /footprint (.+?) <= (.+?) usable/.exec(await testid('fits-result').textContent());
  assert.notEqual(fitting, usableText);

  // The search is the param's whole range, not the slider's: with a short context the largest
  // batch passes the slider's top (64 at B=8), and "apply" sets it.
  await testid('param-value-S').fill('512');
  await testid('param-value-S').press('Enter');
  await page.waitForFunction(() => !document.querySelector('[data-testid=fits-result]'));
  const wide = fitsJson('--util', '0.9', '--param', 'B', '--set', 'S=512');
  assert.ok(wide.largest > 64, `${wide.largest}`);
  await testid('fits-button-B').click();
  await page.waitForFunction((n) => document.querySelector('[data-testid=fits-result]')?.dataset.largest === String(n), wide.largest);
  await testid('fits-apply').click();
  await page.waitForFunction((n) => document.querySelector('[data-testid=param-value-B]')?.value === String(n), wide.largest);
  await page.waitForFunction(() => document.querySelector('[data-testid=headroom]')?.dataset.what === 'headroom');
  assert.equal(await page.locator('[data-testid=fits-apply]').count(), 0, 'applied: not offered again');
  await testid('param-value-S').fill('4096');
  await testid('param-value-S').press('Enter');
  await testid('param-value-B').fill('8');
  await testid('param-value-B').press('Enter');
  await page.waitForFunction(() => /S%3D4096/.test(location.search) && /B%3D8/.test(location.search));

  // The param slider re-plans: at B=32 the plan overflows the device, as the bisection said.
  const plan = (b) => JSON.parse(cli('plan', serving, '--json', '--set', `B=${b}`)).footprint_bytes;
  await testid('param-value-B').fill(String(cliFits.largest + 1));
  await testid('param-value-B').press('Enter');
  await page.waitForFunction((b) => Number(document.querySelector('[data-testid="peak-bytes"]').dataset.bytes) === b, plan(cliFits.largest + 1));
  assert.equal(await testid('headroom').getAttribute('data-what'), 'overflow');
  // The usable line on both views. With the arena alone shown, the always-live bytes already
  // pass the usable bytes: the line is named below the view.
  await testid('tab-timeline').click();
  await page.waitForFunction(() => document.querySelector('[data-testid=timeline-canvas]')?.dataset.usableBand === 'below');
  // With everything shown, it crosses the timeline's usage band and the arena map (which has
  // no band).
  await testid('arena-only').uncheck();
  await page.waitForFunction(() => document.querySelector('[data-testid=timeline-canvas]')?.dataset.usableBand === 'in');
  await testid('tab-arena').click();
  await page.waitForFunction(() => {
    const c = document.querySelector('[data-testid=arena-canvas]');
    return c?.dataset.usableLine === 'in' && c.dataset.usableBand === undefined && c.dataset.band === undefined;
  });
  await page.waitForFunction(() => /class=l4-24gb/.test(location.search) && /set=B%3D32/.test(location.search));
  await page.screenshot({ path: join(output, 'devices-1400x900.png') });

  // The util slider moves the usable bytes.
  await testid('util-slider').fill('0.8');
  await page.waitForFunction((u) => Number(document.querySelector('[data-testid="usable-bytes"]').dataset.bytes) === u,
    fitsJson('--util', '0.8', '--param', 'B=1..2').usable_bytes);

  // A class of the user's own, from a TOML file.
  const toml = join(output, 'my-gpu.toml');
  await writeFile(toml, (await readFile(join(root, 'static/hardware/l4-24gb.toml'), 'utf8')).replace(/^name = .*$/m, 'name = "My GPU"'));
  await testid('hardware-file').setInputFiles(toml);
  await page.waitForFunction(() => document.querySelector('[data-testid="hardware-select"]').selectedOptions[0]?.textContent === 'my-gpu (your file)');
  await page.setViewportSize({ width: 1366, height: 768 });
  await page.screenshot({ path: join(output, 'devices-1366x768.png') });

  // A file that is not a class: the worker's reader says where, and the class chosen stays.
  const bad = join(output, 'bad-gpu.toml');
  await writeFile(bad, 'name = "Bad"\npage_bytes = "lots"\n');
  await testid('hardware-file').setInputFiles(bad);
  await testid('error').waitFor();
  assert.match(await testid('error').innerText(), /bad-gpu.*line 2/);
  assert.equal(await page.evaluate(() => document.querySelector('[data-testid="hardware-select"]').selectedOptions[0]?.textContent), 'my-gpu (your file)');
});

test('the sweep panel: the chart, the points as memplan sweep gives them, a point applied, cancel', async () => {
  await page.setViewportSize({ width: 1400, height: 900 });
  await page.goto(`${server.url}?example=convnet-training&panel=sweep`);
  await testid('sweep-panel').waitFor();
  await testid('sweep-points').fill('8');
  await testid('sweep-points').press('Tab');
  await testid('sweep-button').click();
  await testid('sweep-table').waitFor();
  const expected = JSON.parse(cli('sweep', convnet, '--points', '8', '--json'));
  const footprints = await page.locator('[data-testid="sweep-table"] tbody tr td:nth-child(3)').evaluateAll((tds) =>
    tds.map((td) => Number(td.dataset.bytes)));
  assert.deepEqual(footprints, expected.points.map((p) => p.footprint_bytes));
  assert.equal(await page.locator('[data-testid="sweep-chart"] svg circle').count(), 2 * 8 + 1);
  assert.match(await testid('sweep-summary').textContent(), /with the exhaustive optimum/);
  // The cost axis reads in SI prefixes, not in exponents.
  assert.doesNotMatch(await testid('sweep-chart').innerText(), /\de\d/);
  await page.screenshot({ path: join(output, 'sweep-1400x900.png') });

  // The first point (the least footprint) applied: its flips, its footprint.
  await testid('sweep-point-0').click();
  await page.waitForFunction((b) => Number(document.querySelector('[data-testid="peak-bytes"]').dataset.bytes) === b, expected.points[0].footprint_bytes);
  await page.waitForFunction((n) => new URLSearchParams(location.search).getAll('flip').length === n, expected.points[0].flips.length);
  // A click on the chart at the last budget (the right end of the plot) plans its flips.
  const at = await page.locator('[data-testid="sweep-chart"] svg').evaluate((svg) => {
    const r = svg.getBoundingClientRect();
    const scale = Math.min(r.width / 860, r.height / 300);
    return { x: r.left + (r.width - 860 * scale) / 2 + (860 - 92) * scale, y: r.top + r.height / 2 };
  });
  await page.mouse.click(at.x, at.y);
  const last = expected.points.at(-1);
  await page.waitForFunction((b) => Number(document.querySelector('[data-testid="peak-bytes"]').dataset.bytes) === b, last.footprint_bytes);
  await page.waitForFunction((n) => new URLSearchParams(location.search).getAll('flip').length === n, last.flips.length);

  // A long sweep in the worker: progress, then cancel keeps the budgets fitted so far.
  const src = `${server.url}fixtures/transformer-training.json`;
  await page.goto(`${server.url}?src=${encodeURIComponent(src)}&panel=sweep&strategy=first-fit`);
  await testid('sweep-panel').waitFor();
  await testid('peak-bytes').waitFor();
  await testid('sweep-points').fill('64');
  await testid('sweep-points').press('Tab');
  await testid('sweep-button').click();
  // Past the minimize fit and a few budgets (steps 1 and 2 come before the budgets).
  await page.waitForFunction(() => {
    const m = /sweeping targets: step (\d+)/.exec(document.querySelector('[data-testid="progress"]')?.textContent ?? '');
    return m && Number(m[1]) >= 6;
  });
  await testid('cancel').click();
  await testid('sweep-summary').filter({ hasText: 'cancelled' }).waitFor();
  const rows = await page.locator('[data-testid="sweep-table"] tbody tr').count();
  assert.ok(rows >= 1 && rows < 64, `${rows} rows`);
});

test('the compare panel: another strategy, another dump, as memplan diff says', async () => {
  await page.setViewportSize({ width: 1400, height: 900 });
  await page.goto(`${server.url}?example=convnet-training&panel=compare`);
  await testid('compare-panel').waitFor();
  assert.equal(await testid('compare-keep-flips').isVisible(), true);
  await testid('compare-strategy').selectOption('bump');
  await testid('compare-button').click();
  await testid('diff-table').waitFor();
  const plan = (strategy) => JSON.parse(cli('plan', convnet, '--json', '--strategy', strategy));
  const [best, bump] = [plan('best'), plan('bump')];
  assert.equal(await bytesOf('compare-before'), best.footprint_bytes);
  assert.equal(await bytesOf('compare-after'), bump.footprint_bytes);
  const at = (r) => new Map(r.placements.map((p) => [p.tensor, JSON.stringify([p.device, p.pool, p.offset, p.size, p.live])]));
  const [a, b] = [at(best), at(bump)];
  const changed = [...a.keys()].filter((t) => a.get(t) !== b.get(t)).length;
  assert.equal(await testid('diff-row').count(), changed);
  // Both sides labelled, with their strategies.
  assert.match(await testid('compare-after-label').innerText(), /^after: .*bump/);
  assert.match(await testid('compare-before-label').innerText(), /^before: .*best/);
  // The other plan is a canvas drawn through the window of the view below: zooming either
  // moves both, and hovering or clicking it works on the same tensors.
  await testid('tab-arena').click();
  const [main, other] = [testid('arena-canvas'), testid('compare-arena-canvas')];
  await other.waitFor();
  const windowOf = async (canvas) => (await canvas.getAttribute('data-window'))?.split(',').map(Number);
  await page.waitForFunction(() => document.querySelector('[data-testid="compare-arena-canvas"]')?.dataset.window);
  const whole = await windowOf(other);
  await page.locator('body').click({ position: { x: 5, y: 5 } });
  await page.keyboard.press('w');
  await page.waitForFunction(() => /zoom=/.test(location.search));
  await page.waitForFunction((w) => document.querySelector('[data-testid="compare-arena-canvas"]').dataset.window !== w, whole.join(','));
  assert.deepEqual(await windowOf(other), await windowOf(main));
  assert.ok((await windowOf(other))[1] < whole[1], 'the other plan zoomed in with the view below');
  const box = await other.boundingBox();
  await page.mouse.move(box.x + box.width * 0.4, box.y + box.height * 0.6);
  const before = await windowOf(main);
  await page.mouse.wheel(0, 400);
  await page.waitForFunction((w) => document.querySelector('[data-testid="arena-canvas"]').dataset.window !== w, before.join(','));
  assert.deepEqual(await windowOf(main), await windowOf(other));
  assert.ok((await windowOf(main))[1] - (await windowOf(main))[0] > before[1] - before[0], 'a wheel on the other plan zoomed the view below out');
  await page.keyboard.press('f');
  await page.waitForFunction((w) => document.querySelector('[data-testid="compare-arena-canvas"]').dataset.window === w, whole.join(','));
  // One scale for both: fitted, the two views span the same bytes, the larger plan's.
  assert.deepEqual(await windowOf(main), await windowOf(other));
  assert.ok((await windowOf(other))[3] >= Math.max(best.devices[0].arena_bytes, bump.devices[0].arena_bytes), `${await windowOf(other)}`);
  // A click on a buffer of the other plan selects that tensor, outlined on both.
  const area = (await other.getAttribute('data-area')).split(',').map(Number);
  let picked = null;
  for (let fx = 0.05; fx < 1 && !picked; fx += 0.1) {
    for (let fy = 0.05; fy < 1 && !picked; fy += 0.1) {
      await page.mouse.move(box.x + area[0] + area[2] * fx, box.y + area[1] + area[3] * fy);
      const card = testid('hover-card');
      if (await card.count()) picked = { fx, fy, name: (await card.locator('.muted').textContent()).split(' · ')[0] };
    }
  }
  assert.ok(picked, 'a hover card over the other plan');
  await page.mouse.click(box.x + area[0] + area[2] * picked.fx, box.y + area[1] + area[3] * picked.fy);
  await page.waitForFunction((n) => document.querySelector('[data-testid="selected"]')?.textContent.includes(n), picked.name);
  await page.screenshot({ path: join(output, 'compare-1400x900.png') });
  await page.keyboard.press('f');

  // Another dump: the same step at twice the batch, matched by tensor id.
  const doubled = JSON.parse(await readFile(convnet, 'utf8'));
  for (const t of doubled.tensors) if (t.shape && t.shape[0] === 32) t.shape[0] = 64;
  const after = join(output, 'convnet-batch64.json');
  await writeFile(after, JSON.stringify(doubled));
  // The other dump plans under the strategy chosen (and without flips: its tensors differ).
  await testid('compare-strategy').selectOption('best');
  await testid('compare-file').setInputFiles(after);
  const expected = JSON.parse(cli('diff', convnet, after, '--json'));
  await page.waitForFunction((b) => Number(document.querySelector('[data-testid="compare-after"]')?.dataset.bytes) === b, expected.after.footprint_bytes);
  const count = (c) => expected.tensors.filter((t) => t.change === c).length;
  assert.equal((await testid('compare-counts').textContent()).trim(),
    `${count('new')} new, ${count('gone')} gone, ${count('changed')} changed, ${count('same')} the same`);
  assert.ok(count('changed') > 0);
  await testid('diff-sort').selectOption('size change');
  const numbers = await page.$$eval('[data-testid="diff-row"] td:nth-child(3)', (cells) => cells.map((c) => Number(c.dataset.bytes)));
  assert.deepEqual(numbers, [...numbers].sort((x, y) => y - x));
  assert.ok(numbers[0] > 0);
  // A file from the disk cannot travel in a link: the panel says so, naming it.
  assert.match(await testid('compare-file-notice').textContent(), /convnet-batch64\.json.*link/);
  assert.doesNotMatch(page.url(), /against/);
});

test('the compare panel compares against the strategy shown until another is chosen, and a link carries both sides', async () => {
  await page.setViewportSize({ width: 1400, height: 900 });
  await page.goto(`${server.url}?example=convnet-training&strategy=tlsf&panel=compare`);
  await testid('compare-panel').waitFor();
  assert.equal(await testid('compare-strategy').inputValue(), 'tlsf');
  // Against the plan shown there is nothing to compare: the button waits for another choice.
  assert.equal(await testid('compare-button').isDisabled(), true);
  assert.match(await testid('compare-same').innerText(), /^That is the plan shown: choose another strategy or order to compare against it/);
  await testid('compare-strategy').selectOption('bump');
  assert.equal(await testid('compare-button').isDisabled(), false);
  assert.equal(await testid('compare-same').count(), 0);
  await testid('compare-button').click();
  await page.waitForFunction(() => /against=bump/.test(location.search));
  // The link opens with the comparison run: both sides, no click.
  const link = page.url();
  await page.goto('about:blank');
  await page.goto(link);
  const bump = JSON.parse(cli('plan', convnet, '--json', '--strategy', 'bump')).footprint_bytes;
  const tlsf = JSON.parse(cli('plan', convnet, '--json', '--strategy', 'tlsf')).footprint_bytes;
  await page.waitForFunction((b) => Number(document.querySelector('[data-testid=compare-after]')?.dataset.bytes) === b, bump);
  assert.equal(await bytesOf('compare-before'), tlsf);
  assert.equal(await testid('compare-strategy').inputValue(), 'bump');
  // Another dump at a URL travels too.
  await page.goto(`${server.url}?example=convnet-training&panel=compare&against=best&against-src=${encodeURIComponent(`${server.url}fixtures/transformer-training.json`)}`);
  await testid('compare-after-label').waitFor();
  assert.match(await testid('compare-after-label').innerText(), /transformer-training/);
});
