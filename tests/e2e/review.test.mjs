// The explorer as a design review reads it: the defects of part 2 (resize after a re-render,
// one name per figure, history and links, embed mode, the hover card, the PNG) and what answers
// "what makes the peak, and why" (arena only, the live-at-peak table, readouts, details, loops,
// views, search). Screenshots go to tests/e2e/output/review-*.png.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { cli, closePage, hooks, openPage, output, root } from './harness.mjs';

const exampleFile = (name) => join(root, 'static/examples', `${name}.json`);
const minimallocFile = join(root, 'tests/data/minimalloc/C.1048576.csv');

let server, browser, page;
before(async () => ({ server, browser, page } = await openPage({
    '/fixtures/embed-host.html':
      '<!doctype html><html><head><link rel="icon" href="data:,"></head><body style="margin:0"><iframe id="f" src="/?example=transformer-decode&view=arena&embed=1" style="width:700px;height:400px;border:0"></iframe></body></html>',
  })));
after(() => closePage({ browser, server }));

const { testid, bytesOf, opened } = hooks(() => page);
const drawn = (id) => page.waitForFunction((id) => document.querySelector(`[data-testid=${id}]`)?.hasAttribute('data-draw-ms'), id);
const shot = (name) => page.screenshot({ path: join(output, `review-${name}.png`) });
/** Two animation frames: what a resize re-rendered has been drawn. */
const frames = () => page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
/** No panic banner, no console error so far. */
function healthy(what) {
  assert.deepEqual(page.problems, [], `${what}: ${page.problems.join(' | ')}`);
}

test('resizing the window after every kind of re-render keeps the page alive', async () => {
  await page.setViewportSize({ width: 1400, height: 900 });
  await page.goto(server.url);
  await drawn('timeline-canvas');
  const resize = async (what) => {
    await page.setViewportSize({ width: 1100, height: 700 });
    await page.setViewportSize({ width: 1400, height: 900 });
    await frames();
    assert.equal(await testid('error').count(), 0, `${what}: ${await testid('error').allInnerTexts()}`);
    healthy(what);
  };
  await testid('tab-arena').click();
  await resize('after a tab switch');
  await testid('tab-timeline').click();
  await resize('after the tab switch back');
  await testid('strategy-select').selectOption('tlsf');
  await resize('after a strategy change');
  await testid('example-transformer-decode').click();
  await resize('after an example');
  await testid('file-input').setInputFiles(minimallocFile);
  await page.waitForFunction(() => document.querySelector('[data-testid=tensor-count]')?.textContent === '203');
  await resize('after a file');
  await testid('arena-only').click();
  await resize('after arena only');
});

test('one name per figure: footprint, lower bound and their gap', async () => {
  await page.setViewportSize({ width: 1400, height: 900 });
  await page.goto(server.url);
  await testid('summary').waitFor();
  const report = JSON.parse(cli('plan', exampleFile('mlp-training'), '--json'));
  const text = await testid('summary').innerText();
  assert.match(text, /FOOTPRINT/i);
  assert.doesNotMatch(text, /\bpeak\b(?! position)/i, 'the summary does not call the footprint "peak"');
  assert.equal(Number(await testid('peak-bytes').getAttribute('data-bytes')), report.footprint_bytes);
  assert.equal(Number(await testid('fragmentation').getAttribute('data-bytes')), report.footprint_bytes - report.lower_bound_bytes);
});

test('Back walks the examples and tabs, and stays in the app', async () => {
  await page.goto(server.url);
  await testid('summary').waitFor();
  await testid('example-transformer-decode').click();
  await page.waitForFunction(() => /example=transformer-decode/.test(location.search));
  await testid('tab-arena').click();
  await page.waitForFunction(() => /view=arena/.test(location.search));
  await page.goBack();
  await page.waitForFunction(() => !/view=arena/.test(location.search));
  assert.equal(await testid('tab-timeline').getAttribute('aria-selected'), 'true');
  assert.match(page.url(), /example=transformer-decode/);
  await page.goBack();
  await page.waitForFunction(() => !/example=/.test(location.search));
  await page.waitForFunction(() => document.querySelector('[data-testid=tensor-count]')?.textContent === '38');
  assert.ok(page.url().startsWith(server.url), page.url());
  await page.goForward();
  await page.waitForFunction(() => document.querySelector('[data-testid=tensor-count]')?.textContent === '35');
  healthy('history');
});

test('a link to a local file says the file is not in it and offers to choose it again', async () => {
  await page.goto(server.url);
  await testid('file-input').setInputFiles(minimallocFile);
  await page.waitForFunction(() => document.querySelector('[data-testid=tensor-count]')?.textContent === '203');
  // The link is written a frame after the plan is drawn.
  await page.waitForFunction(() => /file=/.test(location.search));
  assert.match(page.url(), /file=C\.1048576\.csv/);
  await page.reload();
  await testid('missing-file').waitFor();
  assert.match(await testid('missing-file').innerText(), /C\.1048576\.csv.*cannot hold it/);
  assert.equal(await testid('summary').count(), 0, 'no other dump is shown in its place');
  await testid('file-input').setInputFiles(minimallocFile);
  await page.waitForFunction(() => document.querySelector('[data-testid=tensor-count]')?.textContent === '203');
  assert.equal(await testid('missing-file').count(), 0);
});

test('unknown values in a link are named', async () => {
  await page.goto(`${server.url}?view=gantt&strategy=magic&example=gpt9`);
  await testid('url-warning').waitFor();
  const text = await testid('url-warning').innerText();
  for (const bad of ['view="gantt"', 'strategy="magic"', 'example="gpt9"']) assert.ok(text.includes(bad), text);
  await testid('summary').waitFor();
});

test('a link with ids the dump does not have shows the plan of the rest and names each', async () => {
  // Issue 35: one stale id blanked the page with an error; sel= and budget= went unsaid.
  await page.goto(`${server.url}?example=convnet-training&flip=nosuch&flip=relu0&set=Q%3D3&sel=gone&target=lots`);
  await testid('summary').waitFor();
  await page.waitForFunction(() => /sel=gone/.test(document.querySelector('[data-testid=url-warning]')?.innerText ?? ''));
  const text = await testid('url-warning').innerText();
  for (const named of ['flip `nosuch`', 'param `Q`', 'sel=gone', 'target="lots"']) assert.ok(text.includes(named), text);
  assert.equal(await testid('error').count(), 0);
  // The rest applies: relu0 is recomputed, as the CLI plans it.
  const flipped = JSON.parse(cli('plan', exampleFile('convnet-training'), '--json', '--flips', 'relu0')).footprint_bytes;
  assert.equal(Number(await testid('footprint-bytes').getAttribute('data-bytes')), flipped);
  // The link keeps what applied and drops the rest.
  await page.waitForFunction(() => /flip=relu0/.test(location.search) && !/nosuch|Q%3D3|sel=gone/.test(location.search));
});

test('in a 700x400 iframe the embedded view fills the frame, with a link to open it whole', async () => {
  await page.setViewportSize({ width: 900, height: 600 });
  await page.goto(`${server.url}fixtures/embed-host.html`);
  const frame = page.frameLocator('#f');
  await frame.getByTestId('arena-canvas').waitFor();
  // Drawn at the frame's size: its first drawing may come before the layout settles.
  await page.frames()[1].waitForFunction(() => {
    const c = document.querySelector('[data-testid=arena-canvas]');
    return c?.hasAttribute('data-draw-ms') && c.getBoundingClientRect().width >= 690;
  });
  const box = await frame.getByTestId('arena-canvas').boundingBox();
  // The view fills the frame under the bar with the title, footprint and link (about 24 px).
  const bar = await frame.getByTestId('open-whole').boundingBox();
  assert.ok(box.width >= 690 && box.height >= 400 - 30 && box.y >= bar.y + bar.height - 1, `canvas ${box.width}x${box.height} at ${box.y}`);
  assert.ok(box.y + box.height <= 401, 'not cut off');
  assert.equal(await frame.getByTestId('summary').count(), 0);
  assert.equal(await frame.getByTestId('search').count(), 0);
  assert.equal(await frame.getByTestId('tab-timeline').count(), 0);
  const link = frame.getByTestId('open-whole');
  assert.match(await link.getAttribute('href'), /example=transformer-decode/);
  assert.doesNotMatch(await link.getAttribute('href'), /embed/);
  await page.screenshot({ path: join(output, 'review-embed-700x400.png') });
});

for (const [name, load] of [
  ['mlp', async () => page.goto(server.url)],
  ['decode', async () => page.goto(`${server.url}?example=transformer-decode`)],
  ['minimalloc', async () => {
    await page.goto(server.url);
    await testid('file-input').setInputFiles(minimallocFile);
    await page.waitForFunction(() => document.querySelector('[data-testid=tensor-count]')?.textContent === '203');
  }],
]) {
  test(`at 1366x768 the peak table and the chart's axes are on the first screen (${name})`, async () => {
    await page.setViewportSize({ width: 1366, height: 768 });
    await load();
    await drawn('timeline-canvas');
    const table = await testid('peak-table').boundingBox();
    assert.ok(table && table.y + 60 < 768, `peak table at ${JSON.stringify(table)}`);
    assert.ok((await testid('peak-row').count()) > 0);
    const canvas = await testid('timeline-canvas').boundingBox();
    assert.ok(canvas.y + canvas.height <= 768, `the chart ends at ${canvas.y + canvas.height}`);
    assert.equal(await page.evaluate(() => document.scrollingElement.scrollHeight <= innerHeight + 1), true, 'no scrolling');
    await shot(`1366x768-${name}`);
  });
}

test('the peak table is the report\'s live-at-peak, largest first, and a click selects', async () => {
  await page.setViewportSize({ width: 1400, height: 900 });
  await page.goto(`${server.url}?arena=all`);
  await testid('peak-table').waitFor();
  const report = JSON.parse(cli('plan', exampleFile('mlp-training'), '--json'));
  const rows = await page.$$eval('[data-testid=peak-row]', (rs) => rs.map((r) => ({ tensor: r.dataset.tensor, bytes: Number(r.dataset.bytes) })));
  assert.deepEqual(rows.map((r) => r.tensor).sort(), [...report.devices[0].live_at_peak].sort());
  for (let i = 1; i < rows.length; i++) assert.ok(rows[i - 1].bytes >= rows[i].bytes, 'sorted by size');
  assert.equal(rows.reduce((s, r) => s + r.bytes, 0), report.lower_bound_bytes);
  const row = testid('peak-row').filter({ hasText: 'read by' }).first();
  const tensor = await row.getAttribute('data-tensor');
  assert.match(await row.innerText(), /read by .*(\d+ positions? later|at the peak)/);
  await row.click();
  assert.equal(await testid('selected').innerText(), tensor);
  assert.equal(await testid('details-name').innerText(), tensor);
  await shot('peak-table');
  // Arena only hides the always-live rows and says how many.
  await testid('arena-only').check();
  await testid('peak-hidden').waitFor();
  assert.ok((await testid('peak-row').count()) < rows.length);
});

test('arena only: on by default when always-live bytes dwarf the arena; both figures stay', async () => {
  await page.goto(`${server.url}?example=transformer-decode&view=arena`);
  await drawn('arena-canvas');
  assert.equal(await testid('arena-only').isChecked(), true);
  const arenaItems = Number(await testid('arena-canvas').getAttribute('data-items'));
  await testid('arena-only').uncheck();
  await page.waitForFunction((n) => Number(document.querySelector('[data-testid=arena-canvas]').dataset.items) > n, arenaItems);
  for (const id of ['arena-bytes', 'static-bytes', 'peak-bytes', 'lower-bound']) assert.ok(Number(await testid(id).getAttribute('data-bytes')) > 0, id);
  // The CLI draws the same: the SVG export equals `memplan render --arena-only off`.
  const [download] = await Promise.all([page.waitForEvent('download'), testid('export-svg').click()]);
  const svg = await readFile(await download.path(), 'utf8');
  assert.equal(svg, cli('render', exampleFile('transformer-decode'), '--view', 'arena', '--arena-only', 'off'));
});

test('readouts: the curve tells position, step, op, live bytes and footprint; the hover card stays on screen', async () => {
  await page.setViewportSize({ width: 1400, height: 900 });
  await page.goto(server.url);
  await drawn('timeline-canvas');
  const box = await testid('timeline-canvas').boundingBox();
  const [bx, by, bw, bh] = (await testid('timeline-canvas').getAttribute('data-band')).split(',').map(Number);
  await page.mouse.move(box.x + bx + bw * 0.5, box.y + by + bh * 0.6);
  await testid('curve-readout').waitFor();
  const text = await testid('curve-readout').innerText();
  assert.match(text, /position \d+/);
  assert.match(text, /live .*B/);
  assert.match(text, /footprint/);
  assert.match(text, /\b\w+ \(\w+\)/, 'the step and its op');
  // The time axis can name the steps; the link keeps it.
  const before = await testid('timeline-canvas').getAttribute('data-draw-ms');
  await testid('axis-select').selectOption('steps');
  await page.waitForFunction(() => /axis=steps/.test(location.search));
  await page.waitForFunction((b) => document.querySelector('[data-testid=timeline-canvas]').getAttribute('data-draw-ms') !== b, before);
  await shot('axis-steps');
  await testid('axis-select').selectOption('positions');
  // Near the bottom-right corner the card opens up and to the left, inside the view.
  await testid('tab-arena').click();
  await drawn('arena-canvas');
  const arena = await testid('arena-canvas').boundingBox();
  const [ax, ay, aw, ah] = (await testid('arena-canvas').getAttribute('data-area')).split(',').map(Number);
  for (let dx = 0.99; dx > 0.5; dx -= 0.05) {
    await page.mouse.move(arena.x + ax + aw * dx, arena.y + ay + ah * 0.97);
    if (await testid('hover-card').count()) break;
  }
  const card = await testid('hover-card').boundingBox();
  assert.ok(card, 'a card shows');
  assert.ok(card.x + card.width <= 1400 && card.y + card.height <= 900 && card.x >= 0 && card.y >= 0, JSON.stringify(card));
  await shot('hover-corner');
});

test('search matches ops and step names, and says when nothing matches', async () => {
  await page.goto(`${server.url}?example=transformer-decode&arena=all`);
  await drawn('timeline-canvas');
  await testid('search').fill('matmul');
  await page.waitForFunction(() => Number(document.querySelector('[data-testid=timeline-canvas]').dataset.items) > 0);
  await testid('search').fill('no such tensor');
  await testid('no-match').waitFor();
  assert.match(await testid('no-match').innerText(), /no tensor matches/);
  await testid('search').fill('');
});

test('details: views listed under their base, loops named, nothing of the dump missing', async () => {
  await page.goto(`${server.url}?example=transformer-decode&sel=qkv&arena=all`);
  await testid('details-name').waitFor();
  assert.equal(await testid('details-name').innerText(), 'qkv');
  const views = await testid('details-views').innerText();
  for (const v of ['q', 'k_new', 'v_new']) assert.ok(views.includes(v), views);
  const text = await testid('details').innerText();
  assert.match(text, /loop layers ×24/);
  // Its id, kind and dtype; its lifetime in words.
  assert.match(text, /qkv · \w+ · (f|bf|i|u)\d+/, text);
  assert.match(text, /positions? \d+( to \d+)? \(/, text);
  assert.doesNotMatch(text, /\.\.=/, text);
  // The details panel does not cover the chart.
  const chart = await testid('timeline-canvas').boundingBox();
  const details = await testid('details').boundingBox();
  assert.ok(details.x >= chart.x + chart.width || details.y >= chart.y + chart.height, 'beside or below the chart');
  await shot('details');
});

test('W/S zoom in time only; the rows scroll on their own', async () => {
  await page.goto(server.url);
  await testid('file-input').setInputFiles(minimallocFile);
  await page.waitForFunction(() => document.querySelector('[data-testid=tensor-count]')?.textContent === '203');
  await drawn('timeline-canvas');
  await page.keyboard.press('w');
  await page.waitForFunction(() => /zoom=/.test(location.search));
  const z = new URL(page.url()).searchParams.get('zoom').split(',').map(Number);
  const [, , , rowsBefore] = z;
  assert.ok(z[1] - z[0] < 203, `time zoomed: ${z}`);
  // The window drawn is x0,x1,y0,y1: y0 is the first row shown.
  const first = (await testid('timeline-canvas').getAttribute('data-window')).split(',').map(Number)[2];
  const a = await testid('timeline-canvas').boundingBox();
  await page.mouse.move(a.x + a.width / 2, a.y + a.height * 0.8);
  await page.mouse.wheel(0, 160);
  await page.waitForFunction((f) => Number(document.querySelector('[data-testid=timeline-canvas]').dataset.window.split(',')[2]) !== f, first);
  const after = new URL(page.url()).searchParams.get('zoom').split(',').map(Number);
  assert.deepEqual(after.slice(0, 2), z.slice(0, 2), 'scrolling rows keeps the time window');
  assert.ok(rowsBefore !== undefined);
});

test('the PNG export is at the device pixel ratio, with a title band above the view and a footer', async () => {
  // A 2x screen, narrow enough that the title wraps rather than being cut.
  const hi = await browser.newPage({ viewport: { width: 924, height: 700 }, deviceScaleFactor: 2 });
  try {
    await hi.goto(`${server.url}?example=transformer-training&flip=probs_0`);
    await hi.waitForFunction(() => document.querySelector('[data-testid=timeline-canvas]')?.hasAttribute('data-draw-ms'));
    const [download] = await Promise.all([hi.waitForEvent('download'), hi.locator('[data-testid=export-png]').click()]);
    const png = await readFile(await download.path());
    const [width, height] = [png.readUInt32BE(16), png.readUInt32BE(20)];
    const canvas = await hi.evaluate(() => {
      const c = document.querySelector('[data-testid=timeline-canvas]');
      return { width: c.width, height: c.height, css: c.getBoundingClientRect().width };
    });
    assert.equal(width, canvas.width);
    // The canvas's box less its border, at two device pixels to the CSS pixel.
    assert.ok(canvas.width >= 2 * (Math.floor(canvas.css) - 2), `${canvas.width} px for ${canvas.css} CSS px at 2x`);
    // Title, figures, legend and footer: at least four lines of text at 2x around the view.
    assert.ok(height >= canvas.height + 2 * 4 * 16, `${height} against the view's ${canvas.height}`);
  } finally {
    await hi.close();
  }
});

test('at 1400x900 the page reads whole', async () => {
  await page.setViewportSize({ width: 1400, height: 900 });
  await page.goto(`${server.url}?example=transformer-decode`);
  await drawn('timeline-canvas');
  await shot('1400x900-decode');
  await page.goto(`${server.url}?view=arena`);
  await drawn('arena-canvas');
  await shot('1400x900-mlp-arena');
  await page.setViewportSize({ width: 1000, height: 700 });
  await frames();
  await shot('resized-1000x700');
  healthy('screens');
});

test('an ONNX model and a PyTorch snapshot load in the worker, with their warnings and what was reserved', async () => {
  await page.setViewportSize({ width: 1400, height: 900 });
  await page.goto(server.url);
  await testid('summary').waitFor();
  await testid('file-input').setInputFiles(join(root, 'tests/data/onnx/light_squeezenet.onnx'));
  await page.waitForFunction(() => /ONNX model/.test(document.querySelector('[data-testid=summary]')?.innerText ?? ''));
  assert.equal(Number(await testid('lower-bound').getAttribute('data-bytes')), 11857384);
  // Every tensor sized, its Dropout's mask too: complete, and valid.
  assert.equal(await testid('incomplete').count(), 0);
  assert.equal(await testid('checker').innerText(), 'valid');
  // The fix in place: the input-shape field holds the model's real inputs at their values.
  assert.equal(await testid('input-shape').inputValue(), 'data_0=1x3x224x224');
  assert.match(await testid('model-inputs').innerText(), /data_0 \[1, 3, 224, 224\]/);
  await drawn('timeline-canvas');
  await shot('onnx');
  // A fixed input shape imports the model again: a batch of 2 doubles the activations.
  await testid('input-shape').fill('data_0=2x3x224x224');
  await testid('reimport').click();
  await page.waitForFunction(() => Number(document.querySelector('[data-testid=lower-bound]')?.dataset.bytes) > 11857384, null, { timeout: 30000 });
  await testid('file-input').setInputFiles(join(root, 'tests/data/torch/magma27_memory_snapshot.pickle'));
  await testid('reserved').waitFor({ timeout: 60000 });
  assert.match(await testid('reserved').innerText(), /the allocator reserved 13\.21 GiB; the live peak was 11\.99 GiB/);
  assert.match(await testid('summary').innerText(), /PyTorch memory snapshot/);
  assert.equal(Number(await testid('lower-bound').getAttribute('data-bytes')), 12877758464);
  await shot('torch');
  // A model with control flow loads: its loop is one step, and what its body takes while it
  // runs is the one tensor left unsized, named. A tensor left unsized makes the plan
  // incomplete: said above the figures, never "valid" alone.
  await opened(join(root, 'tests/data/onnx/node/test_loop11.onnx'));
  assert.match(await testid('incomplete').innerText(), /^INCOMPLETE: 1 tensor could not be sized and is left out/);
  assert.equal(await testid('checker').innerText(), 'valid for the sized tensors');
  assert.match(await testid('import-warnings').innerText(), /`Loop#0 subgraphs` \(Loop: what its subgraphs take while it runs\)/);
  assert.equal(Number(await testid('lower-bound').getAttribute('data-bytes')), 37);
  // A detection model plans complete: what its values decide (its proposals, its
  // suppression's If) at the most it can be, said among the warnings; the CLI's figures.
  const detection = join(root, 'tests/data/onnx/torchvision/fasterrcnn_mobilenet_v3.onnx');
  await opened(detection);
  assert.equal(await testid('incomplete').count(), 0);
  assert.match(await testid('import-warnings').innerText(), /8 tensors whose sizes depend on the values the model reads are planned at the most they can be/);
  const detected = JSON.parse(cli('plan', detection, '--json'));
  assert.equal(await bytesOf('lower-bound'), detected.lower_bound_bytes);
  assert.equal(await testid('checker').innerText(), 'valid');
  healthy('importers');
});

test('a transformer as PyTorch exports it plans complete with its dims symbolic, and with its input shapes fixed in place', async () => {
  await page.setViewportSize({ width: 1400, height: 900 });
  await page.goto(server.url);
  await testid('summary').waitFor();
  const model = join(root, 'tests/data/onnx/exported/gpt2.onnx');
  await opened(model);
  // Its batch and sequence are symbolic: the shapes it computes from them are read as products
  // of them (its projections flatten batch times sequence), so it plans complete.
  assert.equal(await testid('incomplete').count(), 0);
  assert.match(await testid('import-warnings').innerText(), /tensors whose shapes were read at three sample values/);
  assert.equal(await testid('input-shape').inputValue(), 'input_ids=1x1; attention_mask=1x1');
  await testid('input-shape').fill('input_ids=2x16; attention_mask=2x16');
  await testid('reimport').click();
  const report = JSON.parse(cli('plan', model, '--input-shape', 'input_ids=2x16', '--input-shape', 'attention_mask=2x16', '--json'));
  await page.waitForFunction((b) => Number(document.querySelector('[data-testid=lower-bound]')?.dataset.bytes) === b, report.lower_bound_bytes, { timeout: 30000 });
  assert.equal(await testid('incomplete').count(), 0);
  assert.equal(report.complete, true);
  assert.equal(await bytesOf('lower-bound'), report.lower_bound_bytes);
  assert.equal(await bytesOf('footprint-bytes'), report.footprint_bytes);
  assert.equal(await testid('checker').innerText(), 'valid');
  await shot('onnx-exported');
  healthy('exported transformer');
});

test("a transformer with symbolic dims plans complete, its batch and sequence as params the page binds", async () => {
  await page.setViewportSize({ width: 1400, height: 900 });
  await page.goto(server.url);
  await testid('summary').waitFor();
  const model = join(root, 'tests/data/onnx/exported/llama.onnx');
  await opened(model);
  assert.equal(await testid('incomplete').count(), 0);
  assert.match(await testid('import-warnings').innerText(), /tensors whose shapes were read at three sample values of the symbolic dims/);
  const at1 = await bytesOf('lower-bound');
  await testid('tab-devices').click();
  for (const [name, value] of [['sequence', '16'], ['batch', '2']]) {
    await testid(`param-value-${name}`).fill(value);
    await testid(`param-value-${name}`).press('Enter');
  }
  const report = JSON.parse(cli('plan', model, '--set', 'batch=2', '--set', 'sequence=16', '--json'));
  assert.equal(report.complete, true);
  await page.waitForFunction((b) => Number(document.querySelector('[data-testid=lower-bound]')?.dataset.bytes) === b, report.lower_bound_bytes, { timeout: 30000 });
  assert.ok(report.lower_bound_bytes > at1);
  assert.equal(await testid('incomplete').count(), 0);
  await shot('onnx-symbolic-params');
  healthy('symbolic transformer');
});

test('a 20 MB ONNX model imports and plans in the worker', async () => {
  // Its time is measured by scripts/browser-bench.mjs.
  const file = join(output, 'synthetic-20mb.onnx');
  cli('bench', '--onnx-mb', '20', '--write-onnx', file);
  await page.goto(server.url);
  await testid('summary').waitFor();
  await testid('file-input').setInputFiles(file);
  await page.waitForFunction(() => /synthetic-20mb\.onnx/.test(document.querySelector('[data-testid=summary]')?.innerText ?? ''), null, { timeout: 60000 });
  assert.equal(await testid('checker').innerText(), 'valid');
  healthy('onnx 20 MB');
});

test('the footprint, whole, by what fills it: the always-live pools, the arena and its fragmentation, against the usable line', async () => {
  await page.setViewportSize({ width: 1400, height: 900 });
  await page.goto(`${server.url}?example=transformer-decode&class=l4-24gb`);
  await testid('footprint-breakdown').waitFor();
  const footprint = await bytesOf('footprint-bytes');
  assert.equal(await bytesOf('footprint-breakdown'), footprint);
  const parts = await page.$$eval('[data-testid=footprint-part]', (ps) => ps.map((p) => [p.dataset.part, Number(p.dataset.bytes)]));
  assert.equal(parts.reduce((s, [, b]) => s + b, 0), footprint, JSON.stringify(parts));
  const report = JSON.parse(cli('plan', exampleFile('transformer-decode'), '--json', '--device-class', 'l4-24gb'));
  const d = report.devices[0];
  const fragmentation = d.arena_bytes - (d.lower_bound_bytes - d.always_live_bytes);
  const shown = parts.find(([name]) => name === 'arena: fragmentation');
  assert.equal(shown ? shown[1] : 0, fragmentation);
  assert.ok(parts.some(([name]) => /^always-live/.test(name)), 'the always-live pools are in the bar');
  // Arena only (on by default here) says what the views leave out.
  assert.equal(await testid('arena-only').isChecked(), true);
  assert.match(await testid('arena-only-note').innerText(), /always-live pools \(.+\) are left out/);
  assert.equal(await bytesOf('footprint-usable'), report.budget.usable_bytes);
  await testid('arena-only').uncheck();
  await page.waitForFunction(() => !document.querySelector('[data-testid=arena-only-note]'));
  assert.equal(await bytesOf('footprint-breakdown'), footprint, 'the bar does not depend on arena only');
  await shot('footprint-breakdown');
  healthy('footprint breakdown');
});
