// Cancelling a load keeps the plan shown, its controls, and a worker that holds its dump:
// whether the page shares a stop flag with the worker (cross-origin isolated, as Trunk.toml
// serves it) or not (a host that cannot send those headers), and whether the load was reading
// or planning.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { bigDump, closePage, fastCli, hooks, openPage, output, root } from './harness.mjs';

const idle = (page) => page.waitForFunction(() => !document.querySelector('[data-testid=progress]'), null, { timeout: 120000 });

for (const isolated of [true, false]) {
  test(`a load cancelled while it reads leaves the plan shown, its flips, and a worker that plans it (${isolated ? '' : 'not '}isolated)`, async () => {
    const opened = await openPage({}, { isolated });
    const { page, server } = opened;
    const { testid, bytesOf, cancellable } = hooks(() => page);
    try {
      const { text } = bigDump(40e6);
      const file = join(output, 'cancelled.json');
      await writeFile(file, text);
      await page.goto(`${server.url}?example=convnet-training&panel=flips`);
      await testid('flips-table').waitFor();
      assert.equal(await page.evaluate(() => crossOriginIsolated), isolated);
      const baseline = await bytesOf('peak-bytes');
      await testid('flip-relu0').check();
      await page.waitForFunction((b) => Number(document.querySelector('[data-testid=peak-bytes]').dataset.bytes) !== b, baseline);
      const flipped = await bytesOf('peak-bytes');
      const cancel = await cancellable();
      await testid('file-input').setInputFiles(file);
      await page.waitForFunction(() => /cancelled\.json/.test(document.querySelector('[data-testid=progress]')?.innerText ?? ''));
      await cancel();
      // The flips of the plan shown came back with it, and the link still names them.
      assert.equal(await testid('flip-relu0').isChecked(), true);
      assert.equal(await bytesOf('peak-bytes'), flipped);
      await page.waitForFunction(() => /flip=relu0/.test(location.search));
      // The worker holds the convnet: a toggle plans it, with the flip, and another gives the
      // plan shown before the load back.
      await testid('strategy-select').selectOption('bump');
      await page.waitForFunction(() => /strategy=bump/.test(location.search));
      await idle(page);
      assert.equal(await testid('error').count(), 0);
      assert.ok(await bytesOf('peak-bytes') >= flipped, 'bump packs no tighter');
      await testid('strategy-select').selectOption('best');
      await page.waitForFunction((b) => Number(document.querySelector('[data-testid=peak-bytes]').dataset.bytes) === b, flipped);
      assert.equal(await testid('error').count(), 0);
      assert.deepEqual(page.problems, []);
    } finally {
      await closePage(opened);
    }
  });
}

test('a load cancelled while its search runs shows its best plan so far', async () => {
  const opened = await openPage();
  const { page, server } = opened;
  const { testid, bytesOf } = hooks(() => page);
  try {
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
    await testid('strategy-select').selectOption('first-fit');
    await page.waitForFunction((b) => document.querySelector('[data-testid=peak-bytes]').dataset.bytes === String(b), firstFit.footprint_bytes);
    assert.equal(await testid('error').count(), 0);
    assert.deepEqual(page.problems, []);
  } finally {
    await closePage(opened);
  }
});
