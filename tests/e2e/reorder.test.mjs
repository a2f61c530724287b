// Reordering the schedule in the page: the order selector, the order's figures as
// `memplan plan --order` gives them, the moved steps marked on the time axis, the given order's
// usage as a ghost, the link, the compare panel across orders and a sweep's two fronts.
// Screenshots go to tests/e2e/output/reorder-*.png.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { cli, closePage, hooks, openPage, output, root } from './harness.mjs';

const mlp = join(root, 'static/examples/mlp-training.json');

let server, browser, page;
before(async () => ({ server, browser, page } = await openPage()));
after(() => closePage({ browser, server }));

const { testid, bytesOf } = hooks(() => page);
const shot = (name) => page.screenshot({ path: join(output, `reorder-${name}.png`) });
const footprintIs = (want) =>
  page.waitForFunction(
    (b) => Number(document.querySelector('[data-testid=footprint-bytes]')?.dataset.bytes) === b,
    want,
    { timeout: 60000 },
  );

test('the order selector plans each order as the CLI does, marks the moved steps and keeps the order in the link', async () => {
  await page.setViewportSize({ width: 1400, height: 900 });
  await page.goto(`${server.url}?example=mlp-training`);
  await testid('footprint-bytes').waitFor();
  const given = JSON.parse(cli('plan', mlp, '--json'));
  assert.equal(await bytesOf('footprint-bytes'), given.footprint_bytes);
  assert.equal(await testid('order-summary').count(), 0, 'no order line under the given order');

  for (const order of ['lpmf', 'bfs', 'dfs', 'best']) {
    const expected = JSON.parse(cli('plan', mlp, '--json', '--order', order));
    await testid('order-select').selectOption(order);
    await footprintIs(expected.footprint_bytes);
    await page.waitForFunction((o) => new URLSearchParams(location.search).get('order') === o, order);
    const summary = testid('order-summary');
    await summary.waitFor();
    assert.equal(await bytesOf('order-summary'), given.footprint_bytes);
    assert.equal(Number(await summary.getAttribute('data-moved')), expected.order.moved_steps);
    assert.match(await summary.innerText(), new RegExp(`${order} · ${expected.order.moved_steps} of 23 steps moved`));
    assert.match(await summary.locator('dd').getAttribute('title'), new RegExp(`order ${order}: ${expected.order.moved_steps} of 23 steps moved`));
    assert.equal(await testid('checker').innerText(), 'valid');
  }
  // `best` is below the given order here: the summary says by how much, the timeline marks
  // the positions whose step moved, and the usage band draws the given order dashed.
  const best = JSON.parse(cli('plan', mlp, '--json', '--order', 'best'));
  assert.ok(best.footprint_bytes < given.footprint_bytes);
  assert.match(await testid('order-summary').locator('dd').getAttribute('title'), /less than the given order's/);
  const canvas = testid('timeline-canvas');
  await canvas.waitFor();
  await page.waitForFunction(() => Number(document.querySelector('[data-testid=timeline-canvas]')?.dataset.moved) > 0);
  const moved = Number(await canvas.getAttribute('data-moved'));
  assert.ok(moved > 0 && moved <= best.order.moved_steps, `${moved} positions marked`);
  await shot('best-1400x900');

  // The link reopens the same plan.
  const link = page.url();
  await page.goto('about:blank');
  await page.goto(link);
  await footprintIs(best.footprint_bytes);
  assert.equal(await testid('order-select').inputValue(), 'best');

  // Back to the given order: no marks, no order line.
  await testid('order-select').selectOption('given');
  await footprintIs(given.footprint_bytes);
  await page.waitForFunction(() => document.querySelector('[data-testid=timeline-canvas]')?.dataset.moved === '0');
  // The link is written a frame after the plan is drawn.
  await page.waitForFunction(() => !new URL(location.href).searchParams.has('order'));
  assert.equal(new URL(page.url()).searchParams.get('order'), null);
  assert.deepEqual(page.problems, []);
});

test('the compare panel compares orders, and a sweep under best shows the given order\'s front', async () => {
  await page.setViewportSize({ width: 1366, height: 768 });
  await page.goto(`${server.url}?example=mlp-training&order=best&panel=compare`);
  await testid('compare-panel').waitFor();
  await testid('footprint-bytes').waitFor();
  await testid('compare-order').selectOption('given');
  await testid('compare-button').click();
  await testid('diff-table').waitFor();
  const [best, given] = [
    JSON.parse(cli('plan', mlp, '--json', '--order', 'best')),
    JSON.parse(cli('plan', mlp, '--json')),
  ];
  assert.equal(await bytesOf('compare-before'), best.footprint_bytes);
  assert.equal(await bytesOf('compare-after'), given.footprint_bytes);
  assert.match(await testid('compare-before-label').innerText(), /order best/);
  assert.doesNotMatch(await testid('compare-after-label').innerText(), /order/);
  await page.waitForFunction(() => new URLSearchParams(location.search).get('against-order') === null);
  await shot('compare-1366x768');

  await page.goto(`${server.url}?example=mlp-training&order=best&panel=sweep`);
  await testid('sweep-panel').waitFor();
  await testid('footprint-bytes').waitFor();
  await testid('sweep-points').fill('6');
  await testid('sweep-points').press('Tab');
  await testid('sweep-button').click();
  await testid('sweep-table').waitFor({ timeout: 60000 });
  const sweep = JSON.parse(cli('sweep', mlp, '--points', '6', '--order', 'best', '--json'));
  assert.ok(sweep.given_order?.length > 0, 'the CLI sweeps the given order too');
  const footprints = await page.locator('[data-testid="sweep-table"] tbody tr td:nth-child(3)').evaluateAll((tds) =>
    tds.map((td) => Number(td.dataset.bytes)));
  assert.deepEqual(footprints, sweep.points.map((p) => p.footprint_bytes));
  assert.match(await testid('sweep-given-order').innerText(), /the given order from/);
  assert.match(await testid('sweep-chart').innerText(), /footprint under the given order/);
  assert.deepEqual(page.problems, []);
});
