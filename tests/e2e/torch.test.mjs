// PyTorch files as PyTorch users read them: a memory snapshot named by the user's frames, its
// peak grouped by allocation site, the allocator's reserved bytes beside the plan; a profiler
// trace (gzipped) per device. Screenshots go to tests/e2e/output/torch-*.png.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { statSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { gunzipSync } from 'node:zlib';
import { join } from 'node:path';
import { closePage, hooks, openPage, output, root } from './harness.mjs';

const snapshot = join(root, 'tests/data/torch/magma27_memory_snapshot.pickle');
const trace = join(root, 'tests/data/torch-trace/df_index_resolver.json.gz');

let server, browser, page;
before(async () => ({ server, browser, page } = await openPage()));
after(() => closePage({ browser, server }));

const { testid, bytesOf, cancellable } = hooks(() => page);
const shot = (name) => page.screenshot({ path: join(output, `torch-${name}.png`) });
const items = () => testid('timeline-canvas').getAttribute('data-items').then(Number);
function healthy(what) {
  assert.deepEqual(page.problems, [], `${what}: ${page.problems.join(' | ')}`);
}

test("a snapshot's tensors are named by the user's frames, its peak groups by site, and the allocator's reserved bytes are drawn", async () => {
  await page.setViewportSize({ width: 1400, height: 900 });
  await page.goto(server.url);
  await testid('summary').waitFor();
  await testid('file-input').setInputFiles(snapshot);
  await testid('reserved').waitFor({ timeout: 60000 });
  const livePeak = await bytesOf('lower-bound');
  assert.equal(livePeak, 12877758464);

  // Names: the user's frames, never PyTorch's or a package's.
  const names = await page.$$eval('[data-testid=peak-row] td.name', (cells) => cells.map((c) => c.textContent));
  assert.ok(names.length > 10, `${names.length} peak rows`);
  for (const name of names) assert.doesNotMatch(name, /functional\.py|module\.py|einops|\?\?/, name);
  assert.ok(names.some((n) => /model\.py:\d+/.test(n)), names.slice(0, 5).join(' | '));
  // Their lifetimes end where the allocator freed them.
  const why = await page.$$eval('[data-testid=peak-row] td:last-child', (cells) => cells.map((c) => c.textContent));
  assert.ok(why.every((w) => /^freed at event \d+|^still allocated at the end of the trace/.test(w)), why.slice(0, 3).join(' | '));

  // Grouped by allocation site, the peak table sums to the live peak.
  await testid('peak-by-site').check();
  await testid('peak-sites').waitFor();
  assert.equal(await testid('peak-more').count(), 0, 'the sites hold every tensor live at the peak: none is "not listed"');
  const sites = await page.$$eval('[data-testid=site-row]', (rows) => rows.map((r) => [r.dataset.site, Number(r.dataset.bytes)]));
  assert.ok(sites.length > 1);
  assert.equal(sites.reduce((sum, [, b]) => sum + b, 0), livePeak);
  assert.ok(sites.every(([site]) => !/functional\.py|\?\?/.test(site)), sites.map((s) => s[0]).join(' | '));
  // A site opens to its tensors; a tensor's details show its stack, the framework's folded.
  const [firstSite, firstBytes] = sites[0];
  await page.locator(`[data-testid=site-row][data-site="${firstSite}"]`).click();
  const members = page.locator('[data-testid=peak-sites] [data-testid=peak-row]');
  await members.first().waitFor();
  const memberBytes = await members.evaluateAll((rows) => rows.reduce((s, r) => s + Number(r.dataset.bytes), 0));
  assert.equal(memberBytes, firstBytes);
  await members.first().click();
  await testid('details-stack').waitFor();
  assert.match(await testid('details-stack').innerText(), /model\.py:\d+/);
  assert.match(await testid('stack-internal').innerText(), /framework frame/);
  const details = await testid('details').innerText();
  assert.match(details, /allocated at event \d+ at 0x[0-9a-f]+/);
  // No dtype in a snapshot: none is shown (no "-"); the lifetime reads in words.
  assert.match(details, /^alloc\d+ · intermediate$/m, details);
  assert.match(details, /positions \d+ to \d+ \(cuda:0 t=\d+ to cuda:0 t=\d+\)/, details);
  await shot('snapshot-sites');

  // The search matches any frame: a file deep in the stack, and a file:line; its field says so.
  assert.match(await testid('search').getAttribute('placeholder'), /tensors, stacks/);
  const all = await items();
  await testid('search').fill('nn_utils.py');
  await page.waitForFunction((all) => Number(document.querySelector('[data-testid=timeline-canvas]')?.dataset.items) < all, all);
  const some = await items();
  assert.ok(some > 0 && some < all, `${some} of ${all}`);
  await testid('search').fill('benchmarking_script.py:65');
  await page.waitForFunction(() => Number(document.querySelector('[data-testid=timeline-canvas]')?.dataset.items) > 0);
  await testid('search').fill('');

  // The usage band draws what the allocator reserved beside the plan.
  await page.waitForFunction(() => document.querySelector('[data-testid=timeline-canvas]')?.hasAttribute('data-reserved'));
  assert.equal(Number(await testid('timeline-canvas').getAttribute('data-reserved')), 14180941824);
  await shot('snapshot');

  // The allocator's fragmentation at the peak beside the plan's: reserved there minus live.
  assert.equal(await bytesOf('allocator-fragmentation'), 14180941824 - livePeak);
  assert.match(await testid('allocator-fragmentation').innerText(), /memplan's plan: 11\.99 GiB/);

  // The live bytes by site over time, stacked.
  await testid('tab-sites').click();
  await testid('sites-chart').waitFor();
  assert.equal(Number(await testid('sites-chart').getAttribute('data-sites')), 10);
  assert.match(await testid('sites-chart').innerText(), /model\.py:39/);
  await shot('snapshot-sites-chart');
  await testid('tab-sites').click();

  // The spaces table names a snapshot's slots as everything else does, by their line of code.
  await testid('tab-spaces').click();
  const slot = await testid('space-row').first().locator('td').first().innerText();
  assert.match(slot, /\.py:\d+\) · alloc\d+$/, slot);
  await testid('tab-spaces').click();

  // The arena map draws where the allocator really put each allocation, or memplan's plan.
  await testid('tab-arena').click();
  await page.waitForFunction(() => document.querySelector('[data-testid=arena-canvas]')?.hasAttribute('data-draw-ms'));
  const planned = Number(await testid('arena-canvas').getAttribute('data-items'));
  await testid('layout-select').selectOption('allocator');
  await page.waitForFunction((planned) => {
    const c = document.querySelector('[data-testid=arena-canvas]');
    return c && c.dataset.area && Number(c.dataset.items) === planned && c.dataset.layout === 'allocator';
  }, planned);
  await shot('snapshot-allocator-layout');
  await testid('layout-select').selectOption('plan');
  healthy('snapshot');
});

test('a gzipped profiler trace loads per device with the figures of the independent script', async () => {
  await page.setViewportSize({ width: 1400, height: 900 });
  await page.goto(server.url);
  await testid('summary').waitFor();
  await testid('file-input').setInputFiles(trace);
  await page.waitForFunction(() => /PyTorch profiler trace/.test(document.querySelector('[data-testid=summary]')?.innerText ?? ''), null, { timeout: 60000 });
  // tests/corpus.toml: cpu 8 B, cuda:1 2,532,893,696 B.
  assert.equal(await bytesOf('lower-bound'), 8 + 2532893696);
  const devices = await page.$$eval('[data-testid=device-select] option', (o) => o.map((x) => x.textContent));
  assert.ok(devices.some((d) => /cpu/.test(d)) && devices.some((d) => /cuda:1/.test(d)), devices.join(' | '));
  // The CPU's record reserves nothing for its 8 live bytes: no fragmentation is made up for it.
  const fragmentation = (device) => testid('allocator-fragmentation').filter({ hasText: new RegExp(`^${device}:`) });
  assert.match(await fragmentation('cpu').innerText(), /^cpu: the trace counts no memory reserved on this device, so the allocator's fragmentation is unknown/);
  assert.equal(await fragmentation('cpu').getAttribute('data-bytes'), null);
  assert.ok(Number(await fragmentation('cuda:1').getAttribute('data-bytes')) > 0);
  // It opens on the device with the largest footprint, not on the CPU's 8 bytes listed first.
  assert.equal(await testid('device-select').inputValue(), String(devices.findIndex((d) => /cuda:1/.test(d))));
  // The link is written a frame after the plan is drawn.
  await page.waitForFunction(() => /device=/.test(location.search));
  assert.match(new URL(page.url()).search, /device=cuda%3A1/);
  await page.waitForFunction(() => Number(document.querySelector('[data-testid=timeline-canvas]')?.dataset.reserved) > 0);
  assert.ok(Number(await testid('timeline-canvas').getAttribute('data-reserved')) > 2532893696);
  const names = await page.$$eval('[data-testid=peak-row] td.name', (cells) => cells.map((c) => c.textContent));
  assert.ok(names.some((n) => /^aten::/.test(n)), names.slice(0, 5).join(' | '));
  await shot('trace');
  // On the CPU the band draws no reserved curve: the trace's `Total Reserved` there is not a count.
  await testid('device-select').selectOption(String(devices.findIndex((d) => /cpu/.test(d))));
  await page.waitForFunction(() => !document.querySelector('[data-testid=timeline-canvas]')?.hasAttribute('data-reserved'));
  assert.ok(await testid('timeline-canvas').getAttribute('data-band'), 'the CPU still has its usage band');
  assert.match(await testid('import-warnings').innerText(), /cpu: the trace's `Total Reserved` falls below its `Total Allocated`/);
  healthy('trace');
});

test('past 200 allocation sites at the peak, the grouped table lists the largest and counts the rest', async () => {
  // 260 tensors, each from its own line of model.py, read together by a step whose output comes
  // from one more line: 261 sites, all live at the peak.
  const size = (k) => 1000 + k;
  const site = (k) => [{ function: `layer${k}`, file: '/home/me/model.py', line: k + 1 }];
  const tensors = Array.from({ length: 260 }, (_, k) => ({ id: `t${k}`, bytes: size(k), stack: site(k) }));
  const ids = tensors.map((t) => t.id);
  tensors.push({ id: 'out', bytes: 5000, stack: site(260) });
  const dump = { memplan: 1, tensors, steps: [{ id: 'make', writes: ids }, { id: 'use', reads: ids, writes: ['out'] }] };
  await page.goto(server.url);
  await testid('summary').waitFor();
  await testid('file-input').setInputFiles({ name: 'sites.json', mimeType: 'application/json', buffer: Buffer.from(JSON.stringify(dump)) });
  await page.waitForFunction(() => /sites\.json/.test(document.querySelector('[data-testid=summary]')?.innerText ?? ''), null, { timeout: 60000 });
  const livePeak = await bytesOf('lower-bound');
  assert.equal(livePeak, tensors.reduce((sum, t) => sum + t.bytes, 0));
  await testid('peak-by-site').check();
  await testid('peak-sites').waitFor();
  const listed = await page.$$eval('[data-testid=site-row]', (rows) => rows.map((r) => Number(r.dataset.bytes)));
  assert.equal(listed.length, 200);
  // The largest 200 are listed; the 61 smallest (1000..1060 bytes) are counted, with their bytes.
  assert.equal(Math.min(...listed), size(61));
  const rest = Array.from({ length: 61 }, (_, k) => size(k)).reduce((a, b) => a + b, 0);
  assert.equal(listed.reduce((a, b) => a + b, 0) + rest, livePeak);
  assert.match(await testid('peak-more').innerText(), /^\+ 61 smaller sites \(61\.36 KiB\) not listed$/);
  healthy('sites');
});

test('a snapshot past the 64 MiB the page reads whole streams in the worker: progress rises, cancel ends it while it reads and while it plans, and it loads', async () => {
  // About 70 MiB: a training loop's events with the interpreter's frames, written as
  // `_dump_snapshot()` writes them (scripts/gen-snapshot.py prints its allocations).
  const file = join(output, 'streamed.pickle');
  const printed = execFileSync('python3', [join(root, 'scripts/gen-snapshot.py'), '--events', '970000', '--stacks', 'all', '--stream', '--no-oom', '-o', file], { encoding: 'utf8' });
  const allocations = Number(/allocations=(\d+)/.exec(printed)[1]);
  assert.ok(statSync(file).size > 64 * 1048576, `${statSync(file).size} bytes`);
  await page.goto(server.url);
  await testid('summary').waitFor();
  const reading = () => testid('progress').getAttribute('data-read-done').then((v) => Number(v ?? 0));
  const cancel = await cancellable();
  await testid('file-input').setInputFiles(file);
  await page.waitForFunction(() => Number(document.querySelector('[data-testid=progress]')?.dataset.readDone ?? 0) > 0, null, { timeout: 60000 });
  const first = await reading();
  await page.waitForFunction((at) => Number(document.querySelector('[data-testid=progress]')?.dataset.readDone ?? 0) > at, first, { timeout: 60000 });
  assert.equal(Number(await testid('progress').getAttribute('data-read-of')), 2 * statSync(file).size, 'read twice: the memo, then the values');
  assert.match(await testid('progress').innerText(), /reading streamed\.pickle: \d+%/);
  await cancel();
  // Cancelled while it plans (no search's best so far shown): dropped, as while reading.
  const cancelPlanning = await cancellable();
  await testid('file-input').setInputFiles(file);
  await page.waitForFunction(() => /planning with/.test(document.querySelector('[data-testid=progress]')?.innerText ?? ''), null, { timeout: 120000 });
  await cancelPlanning();
  await testid('file-input').setInputFiles(file);
  await page.waitForFunction(
    () => document.querySelector('[data-testid=error]') || (document.querySelector('[data-testid=summary]')?.innerText.includes('PyTorch memory snapshot') && !document.querySelector('[data-testid=progress]')),
    null,
    { timeout: 240000, polling: 500 },
  );
  assert.equal(await testid('error').count(), 0, 'the snapshot loads');
  assert.equal(await testid('tensor-count').innerText(), String(allocations));
  healthy('streamed snapshot');
});

test('a profiler trace past the 64 MiB the page reads whole streams in the worker and loads as the gzipped one does', async () => {
  // The sample trace with its kernels repeated past 64 MiB: the same memory events, more to skip.
  const json = JSON.parse(gunzipSync(await readFile(trace)).toString('utf8'));
  const others = json.traceEvents.filter((e) => e.name !== '[memory]' && e.ph !== 'X');
  let size = Buffer.byteLength(JSON.stringify(json));
  for (let k = 0; size < 66 * 1048576; k = (k + 1) % others.length) {
    json.traceEvents.push(others[k]);
    size += Buffer.byteLength(JSON.stringify(others[k])) + 1;
  }
  const file = join(output, 'streamed-trace.json');
  await writeFile(file, JSON.stringify(json));
  assert.ok(statSync(file).size > 64 * 1048576, `${statSync(file).size} bytes`);

  await page.goto(server.url);
  await testid('summary').waitFor();
  const traced = () => page.waitForFunction(
    () => document.querySelector('[data-testid=error]') || (/PyTorch profiler trace/.test(document.querySelector('[data-testid=summary]')?.innerText ?? '') && !document.querySelector('[data-testid=progress]')),
    null,
    { timeout: 120000, polling: 250 },
  );
  await testid('file-input').setInputFiles(trace);
  await traced();
  const [count, bound] = [await testid('tensor-count').innerText(), await bytesOf('lower-bound')];
  await testid('file-input').setInputFiles(file);
  await page.waitForFunction(() => Number(document.querySelector('[data-testid=progress]')?.dataset.readDone ?? 0) > 0, null, { timeout: 60000 });
  assert.equal(Number(await testid('progress').getAttribute('data-read-of')), statSync(file).size, 'read once');
  await traced();
  assert.equal(await testid('error').count(), 0, 'the trace loads');
  assert.equal(await testid('tensor-count').innerText(), count);
  assert.equal(await bytesOf('lower-bound'), bound);
  healthy('streamed trace');
});

test('a file the page reads whole is refused past 64 MiB, naming the limit and what streams', async () => {
  await page.goto(server.url);
  await testid('summary').waitFor();
  const file = join(output, 'huge.json');
  await writeFile(file, Buffer.alloc(65 * 1048576, 0x20));
  await testid('file-input').setInputFiles(file);
  await testid('error').waitFor();
  assert.match(
    await testid('error').innerText(),
    /huge\.json: 65\.00 MiB is more than the 64\.00 MiB this page reads of a file it reads whole \(PyTorch snapshots and profiler traces are read as streams, up to 1\.00 GiB\)/,
  );
});
