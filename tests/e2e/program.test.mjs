// The program view end to end on the release bundle: a bundled program loads with its program
// view above the routine's views; its figures and its exported report are the CLI's to the
// byte; a routine opens in the views below with its own scenario, and a strategy chosen there
// re-plans the program; a column of the chart says what its event did.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { cli, closePage, hooks, openPage, output, root } from './harness.mjs';

let server, browser, page;
before(async () => ({ server, browser, page } = await openPage()));
after(() => closePage({ browser, server }));

const { testid, bytesOf } = hooks(() => page);
const example = (name) => join(root, 'static/examples', `${name}.json`);

async function downloaded(button) {
  const [download] = await Promise.all([page.waitForEvent('download'), testid(button).click()]);
  return (await readFile(await download.path())).toString('utf8');
}

/** Waits until the summary shows routine `name` of the program. */
const showing = (name) =>
  page.waitForFunction((n) => document.querySelector('[data-testid="summary"] h2')?.textContent === n, name);

test('a bundled program shows the CLI’s used memory, opens its routines and re-plans per routine', async () => {
  const report = JSON.parse(cli('plan', '--json', example('serving-program')));
  await page.setViewportSize({ width: 1400, height: 900 });
  await page.goto(`${server.url}?example=serving-program`);
  await testid('program').waitFor();
  await showing('load');
  const device = report.plan.devices[0];
  assert.equal(await bytesOf('program-used-peak'), device.used_peak_bytes);
  assert.equal(await bytesOf('program-model-peak'), device.model_peak_bytes);
  // Each column of the chart is the used memory after its event.
  const columns = await page.locator('[data-testid^="program-event-"]').evaluateAll((els) =>
    els.map((e) => Number(e.getAttribute('data-used-bytes'))));
  assert.deepEqual(columns, report.plan.used_bytes.map((u) => u[0]));
  assert.match(await testid('program-usable').innerText(), /^l4-24gb at util 0\.9: usable /);
  // The page's report is the CLI's, byte for byte.
  assert.equal(await downloaded('export-program'), cli('plan', '--json', example('serving-program')));
  await page.screenshot({ path: join(output, 'program-serving-1400x900.png') });

  // A click on a run's column opens its routine in the views below.
  const decodeRun = report.plan.runs.find((r) => r.routine === 'decode_step');
  await testid(`program-event-${decodeRun.event}`).click();
  await showing('decode_step');
  const decode = report.routines.find((r) => r.routine === 'decode_step');
  assert.equal(await bytesOf('footprint-bytes'), decode.model.footprint_bytes);
  assert.equal(await testid('routine-decode_step').getAttribute('aria-pressed'), 'true');
  const runs = await page.locator('[data-testid^="program-run-"]').count();
  assert.equal(runs, report.plan.runs.filter((r) => r.routine === 'decode_step').length);
  assert.match(await testid(`program-run-${decodeRun.event}`).innerText(), /that an ancestor or an earlier routine of its context holds/);

  // The link names the routine shown, and opens it.
  await page.waitForFunction(() => new URLSearchParams(location.search).get('routine') === 'decode_step');
  const link = page.url();
  await page.goto(link);
  await showing('decode_step');
  await testid('program').waitFor();
  assert.equal(await testid('routine-decode_step').getAttribute('aria-pressed'), 'true');
  // Back from another routine returns to it.
  await testid('routine-prefill_512').click();
  await showing('prefill_512');
  await page.waitForFunction(() => new URLSearchParams(location.search).get('routine') === 'prefill_512');
  await page.goBack();
  await showing('decode_step');

  // A strategy chosen here applies to decode_step alone, and the program is planned with it.
  await page.selectOption('[data-testid="strategy-select"]', 'bump');
  const bumped = JSON.parse(cli('plan', '--json', example('serving-program'), '--strategy', 'bump'));
  await page.waitForFunction(
    (b) => document.querySelector('[data-testid="footprint-bytes"]')?.getAttribute('data-bytes') === String(b),
    bumped.routines.find((r) => r.routine === 'decode_step').model.footprint_bytes,
  );
  const mixed = JSON.parse(await downloaded('export-program'));
  for (const r of mixed.routines) {
    const from = r.routine === 'decode_step' ? bumped : report;
    assert.deepEqual(r, from.routines.find((x) => x.routine === r.routine), r.routine);
  }
  // Back to load: its own scenario (best), not decode's.
  await testid('routine-load').click();
  await showing('load');
  assert.equal(await page.locator('[data-testid="strategy-select"]').inputValue(), 'best');
  assert.equal(page.problems.length, 0, page.problems.join('; '));
});

test('the schedule search says which contexts were not released and what a retried release freed', async () => {
  const report = JSON.parse(cli('plan', '--json', example('schedule-search-program')));
  await page.setViewportSize({ width: 1366, height: 768 });
  await page.goto(`${server.url}?example=schedule-search-program`);
  await testid('program').waitFor();
  await showing('init');
  assert.equal(await bytesOf('program-used-peak'), report.plan.devices[0].used_peak_bytes);
  const failed = report.plan.events.findIndex((e) => e.result === 'failed');
  assert.match(await testid(`program-event-${failed}`).locator('title').textContent(), /fails after 1 pool freed: a retry frees the rest/);
  await testid('routine-step_chunk16').click();
  await showing('step_chunk16');
  const run = report.plan.runs.find((r) => r.routine === 'step_chunk16');
  assert.match(await testid(`program-run-${run.event}`).innerText(), /contexts not yet released \(`candidate2`\)/);
  await page.screenshot({ path: join(output, 'program-search-1366x768.png') });
  // A link's routine the program does not have: said, and the first one run is shown.
  await page.goto(`${server.url}?example=schedule-search-program&routine=nope`);
  await showing('init');
  assert.match(await testid('url-warning').innerText(), /routine=nope names no routine of this program; showing `init`/);
  // One computation after a program: the program view goes, and the link names no routine.
  await testid('example-mlp-training').click();
  await page.waitForFunction(() => !new URLSearchParams(location.search).has('routine'));
  await page.waitForFunction(() => !document.querySelector('[data-testid="program"]'));
  assert.equal(page.problems.length, 0, page.problems.join('; '));
});
