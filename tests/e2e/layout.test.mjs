// Every panel reachable and readable on the screens reviews use: at 1366x768 and 1400x900 the
// flips, sweep, compare and advice tables show at least eight rows, the sweep chart is whole
// with its legend off the curve, and the wheel scrolls what is under the cursor. Screenshots of
// each panel at both sizes go to tests/e2e/output/layout-*.png.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { closePage, hooks, openPage, output, root } from './harness.mjs';

let server, browser, page;
before(async () => {
  // The largest bundled training step (288 flips, 2,000 tensors), by URL: the page bundles
  // the small examples only.
  ({ server, browser, page } = await openPage({
    '/fixtures/transformer-training.json': await readFile(join(root, 'static/examples/transformer-training.json'), 'utf8'),
  }));
});
after(() => closePage({ browser, server }));

const { testid } = hooks(() => page);
function healthy(what) {
  assert.deepEqual(page.problems, [], `${what}: ${page.problems.join(' | ')}`);
}

/** How many of a table's body rows are wholly visible: inside its scroll box and the window. */
function visibleRows(tableId) {
  return page.evaluate((id) => {
    const table = document.querySelector(`[data-testid=${id}]`);
    const wrap = table.closest('.table-wrap') ?? table.parentElement;
    const box = wrap.getBoundingClientRect();
    const head = table.querySelector('thead')?.getBoundingClientRect().bottom ?? box.top;
    const top = Math.max(box.top, head, 0);
    const bottom = Math.min(box.bottom, window.innerHeight);
    return [...table.querySelectorAll('tbody tr')].filter((r) => {
      const b = r.getBoundingClientRect();
      return b.height > 0 && b.top >= top - 1 && b.bottom <= bottom + 1;
    }).length;
  }, tableId);
}

/** Whether an element is drawn whole: inside the window and not cut by a scrolling ancestor. */
function whole(id) {
  return page.evaluate((id) => {
    const el = document.querySelector(`[data-testid=${id}]`);
    const b = el.getBoundingClientRect();
    if (b.height === 0 || b.top < 0 || b.bottom > window.innerHeight + 1) return false;
    for (let p = el.parentElement; p; p = p.parentElement) {
      const style = getComputedStyle(p);
      if (/(auto|scroll|hidden)/.test(style.overflowY)) {
        const c = p.getBoundingClientRect();
        if (b.top < c.top - 1 || b.bottom > c.bottom + 1) return false;
      }
    }
    return true;
  }, id);
}

const screens = [
  { width: 1366, height: 768 },
  { width: 1400, height: 900 },
];

for (const size of screens) {
  const at = `${size.width}x${size.height}`;
  test(`at ${at} every panel's table shows eight rows and the sweep chart is whole`, async () => {
    await page.setViewportSize(size);
    await page.goto(`${server.url}?src=${server.url}fixtures/transformer-training.json&panel=flips`);
    await testid('flips-table').waitFor({ timeout: 60000 });
    assert.ok((await visibleRows('flips-table')) >= 8, `flips: ${await visibleRows('flips-table')} rows`);
    await page.screenshot({ path: join(output, `layout-flips-${at}.png`) });

    await testid('tab-sweep').click();
    // Ten targets: enough rows to fill the table, a fifth of the default's wait.
    await testid('sweep-points').fill('10');
    await testid('sweep-points').press('Tab');
    await testid('sweep-button').click();
    await testid('sweep-table').waitFor({ timeout: 120000 });
    assert.ok((await visibleRows('sweep-table')) >= 8, `sweep: ${await visibleRows('sweep-table')} rows`);
    assert.ok(await whole('sweep-chart'), 'the sweep chart is whole');
    await page.screenshot({ path: join(output, `layout-sweep-${at}.png`) });

    await testid('tab-compare').click();
    await testid('compare-strategy').selectOption('bump');
    await testid('compare-button').click();
    await testid('diff-table').waitFor({ timeout: 60000 });
    assert.ok((await visibleRows('diff-table')) >= 8, `compare: ${await visibleRows('diff-table')} rows`);
    await page.screenshot({ path: join(output, `layout-compare-${at}.png`) });

    await testid('tab-advise').click();
    await testid('advice-table').waitFor({ timeout: 60000 });
    assert.ok((await visibleRows('advice-table')) >= 8, `advice: ${await visibleRows('advice-table')} rows`);
    await page.screenshot({ path: join(output, `layout-advise-${at}.png`) });

    for (const panel of ['devices', 'spaces']) {
      await testid(`tab-${panel}`).click();
      await testid(`${panel}-panel`).waitFor();
      await page.screenshot({ path: join(output, `layout-${panel}-${at}.png`) });
    }
    // Whatever the panel, the view below keeps room to read.
    const plot = await testid('timeline-canvas').boundingBox();
    assert.ok(plot.height >= 140 && plot.y + plot.height <= size.height, JSON.stringify(plot));
    healthy(at);
  });
}

test('the wheel scrolls what is under the cursor: a table scrolls, the page does not', async () => {
  await page.setViewportSize({ width: 1366, height: 768 });
  await page.goto(`${server.url}?src=${server.url}fixtures/transformer-training.json&panel=flips`);
  await testid('flips-table').waitFor({ timeout: 60000 });
  const wrap = page.locator('[data-testid=flips-table]').locator('xpath=ancestor::div[contains(@class,"table-wrap")]');
  const box = await wrap.boundingBox();
  await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
  await page.mouse.wheel(0, 300);
  await page.waitForFunction(() => document.querySelector('[data-testid=flips-table]').closest('.table-wrap').scrollTop > 0);
  assert.equal(await page.evaluate(() => document.scrollingElement.scrollTop), 0, 'the page stays put');
  // Over the view, the wheel moves the view (its rows), not the page or the table.
  const tableTop = await wrap.evaluate((w) => w.scrollTop);
  const plot = await testid('timeline-canvas').boundingBox();
  await page.mouse.move(plot.x + plot.width / 2, plot.y + plot.height / 2);
  await page.mouse.wheel(0, 300);
  await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
  assert.equal(await wrap.evaluate((w) => w.scrollTop), tableTop);
  assert.equal(await page.evaluate(() => document.scrollingElement.scrollTop), 0);
  healthy('wheel');
});
