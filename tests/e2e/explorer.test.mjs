// The explorer shell end to end, on the release bundle: default example, upload, bad upload.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { closePage, openPage, output, root, serve } from './harness.mjs';

const example = async (name) => JSON.parse(await readFile(join(root, 'static/examples', `${name}.json`), 'utf8'));

let server, browser, page;
before(async () => ({ server, browser, page } = await openPage()));
after(() => closePage({ browser, server }));

const text = (testid) => page.getByTestId(testid).innerText();

test('opens with the default example and shows its counts', async () => {
  const mlp = await example('mlp-training');
  await page.goto(server.url);
  await page.getByTestId('summary').waitFor();
  assert.equal(await text('tensor-count'), String(mlp.tensors.length));
  assert.equal(await text('step-count'), String(mlp.steps.length));
  const peak = Number(await page.getByTestId('peak-bytes').getAttribute('data-bytes'));
  const lb = Number(await page.getByTestId('lower-bound').getAttribute('data-bytes'));
  assert.ok(peak >= lb && lb > 0, `peak ${peak} vs lower bound ${lb}`);
  await page.screenshot({ path: join(output, 'explorer.png') });
});

test('the bundled examples switch the dump', async () => {
  const decode = await example('transformer-decode');
  await page.getByTestId('example-transformer-decode').click();
  await page.waitForFunction(
    (n) => document.querySelector('[data-testid=tensor-count]')?.textContent === String(n),
    decode.tensors.length,
  );
  assert.equal(await text('step-count'), String(decode.steps.length));
  await page.getByTestId('example-mlp-training').click();
});

test('every plan is made in the worker, bundled examples included, and switching examples keeps it', async () => {
  // The default example is planned in the worker: the page's thread only draws.
  await page.goto(server.url);
  await page.getByTestId('summary').waitFor();
  assert.equal(page.workers().length, 1, 'the worker planned the default example');
  const [worker] = page.workers();
  let closed = false;
  worker.on('close', () => { closed = true; });
  const decode = await example('transformer-decode');
  const mlp = await example('mlp-training');
  await page.getByTestId('example-transformer-decode').click();
  await page.waitForFunction((n) => document.querySelector('[data-testid=tensor-count]')?.textContent === String(n), decode.tensors.length);
  await page.getByTestId('example-mlp-training').click();
  await page.waitForFunction((n) => document.querySelector('[data-testid=tensor-count]')?.textContent === String(n), mlp.tensors.length);
  // Both answers came from the same worker, kept warm between them.
  assert.equal(closed, false, 'the worker was kept');
  assert.deepEqual(page.workers(), [worker]);
  // An embedded view plans its example in a worker too.
  const embedded = await browser.newPage();
  await embedded.goto(`${server.url}?example=transformer-decode&view=arena&embed=1`);
  await embedded.getByTestId('arena-canvas').waitFor();
  assert.equal(embedded.workers().length, 1);
  await embedded.close();
});

test('uploading a valid dump changes the counts', async () => {
  const dump = {
    memplan: 1,
    name: 'uploaded',
    tensors: [
      { id: 'a', bytes: 1024, kind: 'input' },
      { id: 'b', bytes: 2048 },
      { id: 'c', bytes: 512, kind: 'output' },
    ],
    steps: [
      { id: 's0', reads: ['a'], writes: ['b'] },
      { id: 's1', reads: ['b'], writes: ['c'] },
    ],
  };
  await page.getByTestId('file-input').setInputFiles({
    name: 'uploaded.json',
    mimeType: 'application/json',
    buffer: Buffer.from(JSON.stringify(dump)),
  });
  await page.waitForFunction(() => document.querySelector('[data-testid=tensor-count]')?.textContent === '3');
  assert.equal(await text('step-count'), '2');
  assert.equal(await page.getByTestId('error').count(), 0);
});

test('uploading a malformed dump shows the validation message and keeps the page alive', async () => {
  await page.getByTestId('file-input').setInputFiles({
    name: 'broken.json',
    mimeType: 'application/json',
    buffer: Buffer.from('{"memplan": 1, "tensors": [{"id": "x", "bytes": 4}], "steps": [{"id": "s", "reads": ["y"], "writes": ["x"]}]}'),
  });
  const banner = page.getByTestId('error');
  await banner.waitFor();
  assert.match(await banner.innerText(), /broken\.json: step `s` refers to tensor `y`, which does not exist/);
  // The previous dump is still shown, and the page still answers.
  assert.equal(await text('tensor-count'), '3');
  await page.getByTestId('file-input').setInputFiles({ name: 'syntax.json', mimeType: 'application/json', buffer: Buffer.from('{"memplan": 1,,}') });
  await page.waitForFunction(() => document.querySelector('[data-testid=error]')?.textContent.includes('syntax.json: JSON line 1'));
  await page.screenshot({ path: join(output, 'error.png') });
});

test('where no worker can start, the page plans on its own thread and says so', async () => {
  // A loader that throws: the page loads the worker's module on its own thread and steps it there.
  const broken = await serve({ '/memplan-worker_loader.js': 'throw new Error("no worker here");' });
  const other = await browser.newPage();
  const problems = [];
  other.on('pageerror', (e) => problems.push(e.message));
  other.on('console', (m) => m.type() === 'error' && problems.push(m.text()));
  try {
    await other.goto(broken.url);
    await other.getByTestId('summary').waitFor();
    const notice = other.getByTestId('url-warning');
    await notice.waitFor();
    assert.match(await notice.innerText(), /the background worker could not start.*planning on this page instead/s);
    assert.equal(await other.getByTestId('error').count(), 0);
    // The engine came with the worker's module: the page's own module has none of it.
    assert.equal(await other.evaluate(() => document.querySelectorAll('script[src="./memplan-worker.js"]').length), 1);
    const mlp = await example('mlp-training');
    assert.equal(await other.getByTestId('tensor-count').innerText(), String(mlp.tensors.length));
    // A file loads and plans there too.
    await other.getByTestId('file-input').setInputFiles({ name: 'small.csv', mimeType: 'text/csv', buffer: Buffer.from('id,lower,upper,size\na,0,2,64\nb,1,3,64\n') });
    await other.waitForFunction(() => document.querySelector('[data-testid=tensor-count]')?.textContent === '2');
    assert.equal(await other.getByTestId('error').count(), 0);
    // Against the worker's plan: the same footprint, the page only stepped it.
    const footprint = await other.getByTestId('footprint-bytes').getAttribute('data-bytes');
    await page.getByTestId('file-input').setInputFiles({ name: 'small.csv', mimeType: 'text/csv', buffer: Buffer.from('id,lower,upper,size\na,0,2,64\nb,1,3,64\n') });
    await page.waitForFunction(() => document.querySelector('[data-testid=tensor-count]')?.textContent === '2');
    assert.equal(await page.getByTestId('footprint-bytes').getAttribute('data-bytes'), footprint);
    assert.deepEqual(problems, []);
  } finally {
    await other.close();
    await broken.close();
  }
});

test('where neither a worker nor its module can start, the page says so instead of planning', async () => {
  const broken = await serve({
    '/memplan-worker_loader.js': 'throw new Error("no worker here");',
    '/memplan-worker.js': 'throw new Error("no module either");',
  });
  const other = await browser.newPage();
  try {
    await other.goto(broken.url);
    const error = other.getByTestId('error');
    await error.waitFor();
    // What the module's script threw is said, not a consequence of it.
    assert.match(await error.innerText(), /the background worker could not start: nor could its module load on this page: \.\/memplan-worker\.js failed: .*no module either/);
    assert.equal(await other.getByTestId('summary').count(), 0);
  } finally {
    await other.close();
    await broken.close();
  }
});

test('no console errors', () => {
  assert.deepEqual(page.problems, []);
});
