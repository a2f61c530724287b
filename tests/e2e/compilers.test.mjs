// Compilers' dumps in the page. XLA: the pair of files chosen together, zipped, or named by `?src=`,
// XLA's plan beside memplan's (figures agreeing with the CLI's to the byte), drawn on the arena
// map, a loop's plan whose dtypes share bytes said valid, and a buffer assignment alone refused
// with what it needs. TFLite: a model read, and
// Vela's offline plan beside memplan's. Screenshots go to tests/e2e/output/xla-*.png and
// tflite-*.png.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { cli, closePage, hooks, openPage, output, root } from './harness.mjs';

const dir = join(root, 'tests/data/xla/attn');
const stem = 'module_0024.jit_loss.cpu_after_optimizations';
const assignment = join(dir, `${stem}-buffer-assignment.txt`);
const liveRange = join(dir, `${stem}-live-range.txt`);

let server, browser, page;
before(async () => ({ server, browser, page } = await openPage({
    [`/fixtures/xla/${stem}-buffer-assignment.txt`]: await readFile(assignment),
    [`/fixtures/xla/${stem}-live-range.txt`]: await readFile(liveRange),
  })));
after(() => closePage({ browser, server }));

const { testid, bytesOf } = hooks(() => page);
const shot = (name) => page.screenshot({ path: join(output, `xla-${name}.png`) });
function healthy(what) {
  assert.deepEqual(page.problems, [], `${what}: ${page.problems.join(' | ')}`);
}

test("the pair chosen together shows XLA's plan beside memplan's, as the CLI does, and draws it", async () => {
  await page.setViewportSize({ width: 1400, height: 900 });
  await page.goto(server.url);
  await testid('summary').waitFor();
  await testid('file-input').setInputFiles([liveRange, assignment]);
  await testid('given-plan').waitFor({ timeout: 60000 });
  const report = JSON.parse(cli('plan', assignment, '--json'));
  const given = testid('given-plan');
  assert.equal(await bytesOf('given-plan'), report.given_plan.footprint_bytes);
  assert.equal(Number(await given.getAttribute('data-arena-bytes')), report.given_plan.arena_bytes);
  assert.equal(await given.getAttribute('data-valid'), 'true');
  assert.equal(await bytesOf('footprint-bytes'), report.footprint_bytes);
  assert.equal(await bytesOf('lower-bound'), report.lower_bound_bytes);
  assert.match(await given.innerText(), /^XLA's plan: 151\.00 MiB \(arena 126\.00 MiB\), checker valid/);
  await shot('summary');

  // The arena map draws XLA's offsets, every buffer of the plan placed.
  await testid('tab-arena').click();
  await page.waitForFunction(() => document.querySelector('[data-testid=arena-canvas]')?.hasAttribute('data-draw-ms'));
  const planned = Number(await testid('arena-canvas').getAttribute('data-items'));
  assert.ok(planned > 100, `${planned} buffers drawn`);
  await testid('layout-select').selectOption('given');
  assert.match(await testid('layout-select').innerText(), /XLA's plan/);
  await page.waitForFunction((planned) => {
    const c = document.querySelector('[data-testid=arena-canvas]');
    return c && Number(c.dataset.items) === planned && c.dataset.layout === 'given';
  }, planned);
  await shot('given-layout');
  await testid('layout-select').selectOption('plan');
  await page.waitForFunction(() => document.querySelector('[data-testid=arena-canvas]')?.dataset.layout === 'plan');

  // The compare panel puts XLA's plan against memplan's, and shows it on the arena map.
  await testid('tab-compare').click();
  await testid('compare-given').waitFor();
  assert.equal(await bytesOf('compare-given-bytes'), report.given_plan.footprint_bytes);
  assert.equal(await bytesOf('compare-given-memplan'), report.footprint_bytes);
  assert.match(await testid('compare-given-bytes').innerText(), /arena 126\.00 MiB, 0 B over the lower bound; checker valid/);
  await shot('compare');
  await testid('compare-given-show').click();
  await page.waitForFunction(() => document.querySelector('[data-testid=arena-canvas]')?.dataset.layout === 'given');
  healthy('the pair');
});

test('?src= naming the buffer assignment fetches its live range beside it', async () => {
  await page.setViewportSize({ width: 1366, height: 768 });
  await page.goto(`${server.url}?src=${server.url}fixtures/xla/${stem}-buffer-assignment.txt`);
  await testid('given-plan').waitFor({ timeout: 60000 });
  assert.equal(await testid('given-plan').getAttribute('data-valid'), 'true');
  healthy('?src=');
});

test('a zip of an XLA dump loads as the pair', async () => {
  await page.setViewportSize({ width: 1400, height: 900 });
  await page.goto(server.url);
  await testid('summary').waitFor();
  // Zipped with Python's zipfile, deflated: what a user sends of a dump folder.
  const zip = join(output, 'xla-dump.zip');
  execFileSync('python3', ['-c', `import sys, zipfile
with zipfile.ZipFile(sys.argv[1], 'w', zipfile.ZIP_DEFLATED) as z:
    for f in sys.argv[2:]: z.write(f, 'dump/' + f.rsplit('/', 1)[1])`, zip, assignment, liveRange]);
  await testid('file-input').setInputFiles(zip);
  await testid('given-plan').waitFor({ timeout: 60000 });
  const report = JSON.parse(cli('plan', assignment, '--json'));
  assert.equal(await bytesOf('given-plan'), report.given_plan.footprint_bytes);
  assert.equal(await bytesOf('footprint-bytes'), report.footprint_bytes);
  healthy('zip');
});

test("XLA's plan of a loop shares bytes across dtypes: valid, said apart, as the CLI says it", async () => {
  await page.setViewportSize({ width: 1400, height: 900 });
  await page.goto(server.url);
  await testid('summary').waitFor();
  const loop = join(root, 'tests/data/xla/fori/module_0008.jit_f.cpu_after_optimizations');
  await testid('file-input').setInputFiles([`${loop}-buffer-assignment.txt`, `${loop}-live-range.txt`]);
  await testid('given-plan').waitFor({ timeout: 60000 });
  const report = JSON.parse(cli('plan', `${loop}-buffer-assignment.txt`, '--json'));
  assert.equal(report.given_plan.across_classes, 1);
  const given = testid('given-plan');
  assert.equal(await given.getAttribute('data-valid'), 'true');
  assert.equal(await bytesOf('given-plan'), report.given_plan.footprint_bytes);
  assert.match(await given.innerText(), /checker valid \(precision classes aside: 1 buffer pair of different dtypes in the same bytes\)/);
  await shot('loop');
  healthy('loop');
});

test('a buffer assignment alone is refused, naming the file it needs', async () => {
  await page.setViewportSize({ width: 1400, height: 900 });
  await page.goto(server.url);
  await testid('summary').waitFor();
  await testid('file-input').setInputFiles(assignment);
  await testid('error').filter({ hasText: 'live range (`*-live-range.txt`' }).waitFor({ timeout: 60000 });
});

test("a TFLite model plans as the CLI plans it, and Vela's offline plan shows beside memplan's", async () => {
  await page.setViewportSize({ width: 1400, height: 900 });
  await page.goto(server.url);
  await testid('summary').waitFor();
  // The four models of tflite-micro load, each planned as the CLI plans it.
  for (const name of ['keyword_scrambled', 'person_detect', 'trained_lstm']) {
    const model = join(root, `tests/data/tflite/${name}.tflite`);
    await testid('file-input').setInputFiles(model);
    await page.waitForFunction((name) => document.querySelector('[data-testid=summary]')?.innerText.includes(`${name}.tflite`), name);
    const report = JSON.parse(cli('plan', model, '--json'));
    assert.equal(await bytesOf('footprint-bytes'), report.footprint_bytes, name);
    assert.equal(await bytesOf('lower-bound'), report.lower_bound_bytes, name);
    assert.equal(await testid('given-plan').count(), 0, name);
  }

  const vela = join(root, 'tests/data/tflite/person_detect_vela.tflite');
  await testid('file-input').setInputFiles(vela);
  await testid('given-plan').waitFor({ timeout: 60000 });
  const velaReport = JSON.parse(cli('plan', vela, '--json'));
  assert.equal(await bytesOf('given-plan'), velaReport.given_plan.footprint_bytes);
  assert.equal(await testid('given-plan').getAttribute('data-valid'), 'true');
  assert.match(await testid('given-plan').innerText(), /^Vela's plan: /);
  await testid('tab-arena').click();
  await testid('layout-select').selectOption('given');
  assert.match(await testid('layout-select').innerText(), /Vela's plan/);
  await page.waitForFunction(() => document.querySelector('[data-testid=arena-canvas]')?.dataset.layout === 'given');
  await page.screenshot({ path: join(output, 'tflite-vela.png') });
  healthy('tflite');
});
