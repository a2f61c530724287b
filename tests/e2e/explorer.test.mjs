// The explorer shell end to end, on the release bundle: default example, upload, bad upload.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { launch, output, root, serve } from './harness.mjs';

const example = async (name) => JSON.parse(await readFile(join(root, 'static/examples', `${name}.json`), 'utf8'));

let server, browser, page;
before(async () => {
  await mkdir(output, { recursive: true });
  server = await serve();
  ({ browser, page } = await launch());
});
after(async () => {
  await browser?.close();
  await server?.close();
});

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

test('the worker starts as the page opens, and a bundled example keeps it', async () => {
  // Started before any file, it has compiled and warmed up its code by the time one comes.
  await page.goto(server.url);
  await page.getByTestId('summary').waitFor();
  const started = Date.now();
  while (page.workers().length === 0 && Date.now() - started < 10000) await page.waitForTimeout(20);
  assert.equal(page.workers().length, 1, 'one worker before any file');
  const [worker] = page.workers();
  let closed = false;
  worker.on('close', () => { closed = true; });
  // A bundled example plans on the page; the worker, never asked anything, stays.
  const decode = await example('transformer-decode');
  await page.getByTestId('example-transformer-decode').click();
  await page.waitForFunction((n) => document.querySelector('[data-testid=tensor-count]')?.textContent === String(n), decode.tensors.length);
  await page.getByTestId('example-mlp-training').click();
  await page.waitForTimeout(200);
  assert.equal(closed, false, 'the warm worker was kept');
  assert.deepEqual(page.workers(), [worker]);
  // An embedded view spares the reader's machine the worker until a file asks for it.
  const embedded = await browser.newPage();
  await embedded.goto(`${server.url}?example=transformer-decode&view=arena&embed=1`);
  await embedded.getByTestId('arena-canvas').waitFor();
  await embedded.waitForTimeout(500);
  assert.equal(embedded.workers().length, 0);
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

test('a worker that fails to load says so, and the next file starts another', async () => {
  // A loader that throws: the worker started with the page fails, and so does the next.
  const broken = await serve({ '/memplan-worker_loader.js': 'throw new Error("no worker here");' });
  const other = await browser.newPage();
  try {
    await other.goto(broken.url);
    await other.getByTestId('summary').waitFor();
    const banner = other.getByTestId('error');
    await banner.waitFor();
    assert.match(await banner.innerText(), /the background worker failed/);
    // The page keeps its example; a file is sent to a fresh worker, which fails in turn and
    // says so, rather than waiting for one that will never be ready.
    await banner.getByRole('button', { name: 'Dismiss' }).click();
    await banner.waitFor({ state: 'detached' });
    await other.getByTestId('file-input').setInputFiles({ name: 'small.csv', mimeType: 'text/csv', buffer: Buffer.from('id,lower,upper,size\na,0,2,64\n') });
    await other.waitForFunction(() => /the background worker failed/.test(document.querySelector('[data-testid=error]')?.textContent ?? '')
      && !document.querySelector('[data-testid="progress"]'));
  } finally {
    await other.close();
    await broken.close();
  }
});

test('no console errors', () => {
  assert.deepEqual(page.problems, []);
});
