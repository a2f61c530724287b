// The advisor: "what to change", every lever the dump allows planned and ranked. Each row is
// applied in the page and must plan to the footprint it claims, as `memplan advise --json` says;
// the first row beats the best single flip on the training examples. Screenshots go to
// tests/e2e/output/advise-*.png.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { cli, closePage, hooks, openPage, output, root } from './harness.mjs';

const exampleFile = (name) => join(root, 'static/examples', `${name}.json`);

let server, browser, page;
before(async () => ({ server, browser, page } = await openPage({
    '/fixtures/transformer-training.json': await readFile(exampleFile('transformer-training'), 'utf8'),
  })));
after(() => closePage({ browser, server }));

const { testid, bytesOf } = hooks(() => page);
const shot = (name) => page.screenshot({ path: join(output, `advise-${name}.png`) });
function healthy(what) {
  assert.deepEqual(page.problems, [], `${what}: ${page.problems.join(' | ')}`);
}
const rowsOf = () => page.$$eval('[data-testid=advice-row]', (rows) => rows.map((r) => [Number(r.dataset.footprint), Number(r.dataset.saving)]));

for (const example of ['convnet-training', 'mlp-training', 'transformer-training']) {
  test(`${example}: every advice row applies to the footprint it claims, and the first beats every single flip`, async () => {
    await page.setViewportSize({ width: 1400, height: 900 });
    // The transformer is not bundled in the page: it comes by URL.
    const dump = example === 'transformer-training' ? `src=${server.url}fixtures/transformer-training.json` : `example=${example}`;
    await page.goto(`${server.url}?${dump}&panel=advise`);
    await testid('advice-table').waitFor({ timeout: 60000 });
    const advice = JSON.parse(cli('advise', exampleFile(example), '--json'));
    const rows = await rowsOf();
    assert.deepEqual(rows, advice.rows.map((r) => [r.footprint_bytes, r.saving_bytes]));
    assert.ok(rows.length >= 1);
    const bestFlip = Math.max(0, ...advice.rows.filter((r) => r.lever.kind === 'flip').map((r) => r.saving_bytes));
    assert.ok(advice.rows[0].saving_bytes > bestFlip, `first ${JSON.stringify(advice.rows[0].lever)} against a flip's ${bestFlip}`);
    const before = await bytesOf('footprint-bytes');
    assert.equal(before, advice.footprint_bytes);
    if (example === 'convnet-training') await shot('table-1400x900');

    // Apply each row (the transformer's many flips: the first few) and check its plan.
    for (let k = 0; k < Math.min(rows.length, 6); k++) {
      await testid('advice-apply').nth(k).click();
      await page.waitForFunction(
        (want) => Number(document.querySelector('[data-testid=footprint-bytes]')?.dataset.bytes) === want,
        rows[k][0],
        { timeout: 60000 },
      );
      await testid('advice-diff').waitFor();
      const applied = await testid('advice-applied').innerText();
      assert.match(applied, /as claimed/, applied);
      const diff = await testid('advice-diff').innerText();
      assert.ok(diff.includes('against the plan before'), diff);
    }
    // The advice is for the plan before: it says so, and asks again on a click.
    assert.match(await testid('advise-button').innerText(), /advise again/);
    healthy(example);
  });
}

test('a precision-classes lever applies through the page: the checkbox and the link follow it', async () => {
  await page.setViewportSize({ width: 1366, height: 768 });
  await page.goto(`${server.url}?example=decoder-serving&panel=advise`);
  await testid('advice-table').waitFor({ timeout: 60000 });
  await shot('decoder-serving-1366x768');
  const advice = JSON.parse(cli('advise', exampleFile('decoder-serving'), '--json'));
  const k = advice.rows.findIndex((r) => r.lever.kind === 'precision_classes');
  assert.ok(k >= 0, JSON.stringify(advice.rows.map((r) => r.lever)));
  assert.equal(await testid('precision-classes').isChecked(), true);
  await testid('advice-apply').nth(k).click();
  await page.waitForFunction(
    (want) => Number(document.querySelector('[data-testid=footprint-bytes]')?.dataset.bytes) === want,
    advice.rows[k].footprint_bytes,
  );
  assert.equal(await testid('precision-classes').isChecked(), false);
  await page.waitForFunction(() => /precision-classes=off/.test(location.search));
  // The link reopens the same plan.
  await page.goto(page.url());
  await testid('summary').waitFor();
  await page.waitForFunction(
    (want) => Number(document.querySelector('[data-testid=footprint-bytes]')?.dataset.bytes) === want,
    advice.rows[k].footprint_bytes,
  );
  // A param lever is a smaller batch or sequence: the cost says so.
  const params = advice.rows.filter((r) => r.lever.kind === 'param');
  assert.ok(params.length > 0);
  healthy('decoder-serving');
});
