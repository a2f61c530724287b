// Embeds as a documentation site uses them: the bundle served from a sub-path of its host,
// framed by a page of another origin, at 400x300; its title and footprint on a bar of their own
// that covers no label; a dump the host posts handed to the whole explorer "open in memplan"
// opens, or named plainly where it cannot travel. Screenshots: tests/e2e/output/embed-*.png.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { cli, launch, output, root, serve } from './harness.mjs';

const posted = JSON.stringify({
  memplan: 1,
  name: 'posted by the host',
  tensors: [{ id: 'a', bytes: 4096 }, { id: 'b', bytes: 8192 }, { id: 'c', bytes: 1024 }],
  steps: [{ id: 's0', writes: ['a'] }, { id: 's1', reads: ['a'], writes: ['b'] }, { id: 's2', reads: ['b'], writes: ['c'] }],
});

/** A host page framing `src` at 400x300, which posts `posted` once the explorer is ready. */
const hostPage = (src) => `<!doctype html><html><head><link rel="icon" href="data:,"></head><body style="margin:0">
<iframe id="f" src="${src}" style="width:400px;height:300px;border:0"></iframe>
<script>
  addEventListener('message', (e) => {
    if (e.data && e.data.memplan === 1 && e.data.type === 'ready' && location.hash === '#post') {
      document.getElementById('f').contentWindow.postMessage({ memplan: 1, type: 'load', name: 'host.json', text: ${JSON.stringify(posted)} }, '*');
    }
  });
</script></body></html>`;

let memplan, other, browser, page;
before(async () => {
  await mkdir(output, { recursive: true });
  memplan = await serve(
    { '/some/path/fixtures/same-origin-host.html': hostPage('/some/path/?embed=1&view=arena') },
    { base: '/some/path/' },
  );
  // Another origin: the host of a documentation page.
  other = createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end(hostPage(`${memplan.url}?example=convnet-training&view=arena&embed=1`));
  });
  await new Promise((ok) => other.listen(0, '127.0.0.1', ok));
  ({ browser, page } = await launch());
});
after(async () => {
  await browser?.close();
  await memplan?.close();
  await new Promise((ok) => (other ? other.close(ok) : ok()));
});

const otherUrl = () => `http://127.0.0.1:${other.address().port}/`;

/** Whether two boxes overlap. */
const overlap = (a, b) => a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;

test('served from a sub-path and framed by another origin at 400x300, an embed shows its title and footprint and covers no label', async () => {
  await page.setViewportSize({ width: 600, height: 400 });
  await page.goto(otherUrl());
  const frame = page.frameLocator('#f');
  await frame.getByTestId('embed-title').waitFor();
  assert.match(await frame.getByTestId('embed-title').innerText(), /Convnet training step/);
  const example = join(root, 'static/examples/convnet-training.json');
  const footprint = JSON.parse(cli('plan', example, '--json')).footprint_bytes;
  await page.frames()[1].waitForFunction((f) => document.querySelector('[data-testid=embed-footprint]')?.dataset.bytes === String(f), footprint);
  await page.frames()[1].waitForFunction(() => document.querySelector('[data-testid=arena-canvas]')?.hasAttribute('data-draw-ms'));
  // The link sits on the bar, above the view: no label of the view under it.
  const link = await frame.getByTestId('open-whole').boundingBox();
  const canvas = await frame.getByTestId('arena-canvas').boundingBox();
  assert.ok(link.y + link.height <= canvas.y + 1, `link ${JSON.stringify(link)} over the view ${JSON.stringify(canvas)}`);
  assert.ok(canvas.y + canvas.height <= 301, 'the view fits the frame');
  for (const id of ['embed-title', 'embed-footprint']) {
    assert.equal(overlap(link, await frame.getByTestId(id).boundingBox()), false, `the link covers ${id}`);
  }
  // An error banner is not covered either.
  await page.frames()[1].evaluate(() => window.postMessage({ memplan: 1, type: 'load', name: 'nothing.json' }, '*'));
  await frame.getByTestId('error').waitFor();
  await page.screenshot({ path: join(output, 'embed-subpath-400x300.png') });
  const banner = await frame.getByTestId('error').boundingBox();
  const linkNow = await frame.getByTestId('open-whole').boundingBox();
  assert.equal(overlap(linkNow, banner), false, `the link ${JSON.stringify(linkNow)} covers the error banner ${JSON.stringify(banner)}`);
  assert.deepEqual(page.problems, []);
});

test('"open in memplan" hands a posted dump to the whole explorer, which loads it', async () => {
  await page.setViewportSize({ width: 600, height: 400 });
  await page.goto(`${memplan.url}fixtures/same-origin-host.html#post`);
  const frame = page.frameLocator('#f');
  await page.frames()[1].waitForFunction(() => document.querySelector('[data-testid=embed-title]')?.textContent.includes('posted by the host'));
  const href = await frame.getByTestId('open-whole').getAttribute('href');
  assert.match(href, /posted=host\.json/);
  assert.doesNotMatch(href, /file=/);
  const [whole] = await Promise.all([page.context().waitForEvent('page'), frame.getByTestId('open-whole').click()]);
  await whole.waitForFunction(() => document.querySelector('[data-testid=tensor-count]')?.textContent === '3', null, { timeout: 30000 });
  assert.match(await whole.getByTestId('summary').innerText(), /posted by the host/);
  assert.equal(await whole.getByTestId('missing-file').count(), 0);
  await whole.close();
});

test('where the posted dump cannot be handed over, the link says plainly that it was posted', async () => {
  const alone = await browser.newPage();
  await alone.goto(`${memplan.url}?posted=host.json`);
  await alone.getByTestId('missing-file').waitFor();
  assert.match(await alone.getByTestId('missing-file').innerText(), /“host\.json” was posted to an embedded explorer by the page around it/);
  assert.doesNotMatch(await alone.getByTestId('missing-file').innerText(), /from your disk/);
  await alone.close();
});
