// Large inputs, end to end: for each size, a snapshot written by scripts/gen-snapshot.py
// (`--stacks all --stream`: a training loop's events with the interpreter's frames, as
// `_record_memory_history(stacks="all")` records them) or, for `csv:ROWS`, a minimalloc CSV of
// that many buffers written by scripts/gen-csv.py, planned by the CLI built for speed and loaded
// in the page (headless Chromium, release bundle), side by side in one run. Prints a table: the
// file, its buffers (a snapshot's allocations), the CLI's time and peak memory, the
// page's time to the drawn plan, its worker's memory (its wasm memory, which only grows: its
// peak), the page's own wasm memory (its peak, likewise) and the peak memory of its renderer process (the page and its worker, which runs in the
// same process), or the page's error; and, for a snapshot, two more loads cancelled, one halfway
// through the first one's time and one as soon as the file is read: how long the page took to be
// idle again, with the plan it showed before (checked, as the cancel tests check it). The test suite asserts what a load does; this script
// only measures.
//
// Usage: node scripts/snapshot-bench.mjs [MiB | csv:ROWS ...]   (default: 64 256 1024)
// The files are cached in target/snapshots/ (a 1 GiB snapshot takes minutes to write).
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { fastBin, hooks, launch, root, serve } from '../tests/e2e/harness.mjs';

const args = process.argv.slice(2);
const inputs = args.length ? args : ['64', '256', '1024'];
const dir = join(root, 'target/snapshots');
await mkdir(dir, { recursive: true });

/** The generator's bytes per event with `--stacks all`, about: sizes are approximate. */
const BYTES_PER_EVENT = 76;

/** A minimalloc CSV of `rows` buffers, written once. */
function csv(rows) {
  const file = join(dir, `scale-${rows}.csv`);
  if (!existsSync(file)) {
    execFileSync('python3', [join(root, 'scripts/gen-csv.py'), String(rows), file], { stdio: ['ignore', 'ignore', 'inherit'] });
  }
  return file;
}

/** A snapshot of about `size` MiB, written once. */
function snapshot(size) {
  const file = join(dir, `training-${size}mib.pickle`);
  if (!existsSync(file)) {
    const events = Math.round((size * 1048576) / BYTES_PER_EVENT);
    execFileSync('python3', [join(root, 'scripts/gen-snapshot.py'), '--events', String(events), '--stacks', 'all', '--stream', '-o', file], { stdio: ['ignore', 'ignore', 'inherit'] });
  }
  return file;
}

/**
 * The CLI's wall time (s) and peak resident memory (MiB) planning `file` (`plan`, its table: the
 * JSON of millions of placements would weigh more than the plan), as `time` prints them, and the
 * allocations `validate` counts (untimed).
 */
function cliFigures(file) {
  const timed = execFileSync('sh', ['-c', `/usr/bin/time -f '%e %M' '${fastBin}' plan '${file}' 2>&1 > /dev/null | tail -1`], { encoding: 'utf8' });
  const [seconds, kb] = timed.trim().split(' ').map(Number);
  const counts = execFileSync(fastBin, ['validate', file], { encoding: 'utf8' });
  const buffers = Number(/: (\d+) tensors/.exec(counts)[1]);
  return { seconds, mb: Math.round(kb / 1024), buffers };
}

/** The peak resident memory (MiB) of the renderer processes under `pid` (this script: Playwright starts Chromium as its child). */
function rendererPeakMb(pid) {
  const children = new Map();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      children.set(Number(entry), ppid);
    } catch {}
  }
  const under = (p) => {
    for (let q = children.get(p); q; q = children.get(q)) if (q === pid) return true;
    return false;
  };
  let peak = 0;
  for (const p of children.keys()) {
    if (!under(p)) continue;
    try {
      if (!readFileSync(`/proc/${p}/cmdline`, 'utf8').includes('--type=renderer')) continue;
      const hwm = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${p}/status`, 'utf8'));
      if (hwm) peak = Math.max(peak, Number(hwm[1]) / 1024);
    } catch {}
  }
  return Math.round(peak);
}

/**
 * Cancels a load of `file` in the page, as a user would: `after` seconds in, or (`after` null)
 * as soon as the progress says the whole file is read, when the reader pairs the events, builds
 * the graph and resolves it. Gives the seconds from the click to the page idle and what the
 * progress said at the click. `cancellable` (the test hooks') checks that the plan shown before
 * the load stayed and that the worker heard the cancel and lives on; a failed check is this
 * row's answer.
 */
async function cancelFigures(file, after) {
  const server = await serve();
  const { browser, page } = await launch();
  const { testid, cancellable } = hooks(() => page);
  try {
    await page.goto(server.url);
    await testid('summary').waitFor();
    const cancel = await cancellable();
    const started = Date.now();
    await testid('file-input').setInputFiles(file);
    if (after === null) {
      await page.waitForFunction(() => /: 100%/.test(document.querySelector('[data-testid=progress]')?.innerText ?? ''), null, { timeout: 600000, polling: 20 });
      after = (Date.now() - started) / 1000;
    } else {
      await page.waitForTimeout(after * 1000);
    }
    // The progress's own words (what the load is doing), without the solver's or the button's.
    const doing = (await page.evaluate(() => document.querySelector('[data-testid=progress] > span:not(.spinner):not(.solver)')?.innerText ?? ''))
      .replace(/\s+/g, ' ')
      .trim();
    if (!doing) return 'loaded before the cancel';
    const seconds = await cancel();
    return `${seconds.toFixed(1)} s, at ${after.toFixed(1)} s in: "${doing.slice(0, 60)}"`;
  } catch (e) {
    return `failed: ${e.message.split('\n')[0]}`;
  } finally {
    await browser.close();
    await server.close();
  }
}

const results = [];
for (const input of inputs) {
  const rows = input.startsWith('csv:') ? Number(input.slice(4)) : null;
  const file = rows ? csv(rows) : snapshot(Number(input));
  // What the summary names the format once the file is loaded.
  const format = rows ? 'minimalloc CSV' : 'PyTorch memory snapshot';
  const bytes = statSync(file).size;
  const native = cliFigures(file);
  // A fresh browser per file: its renderer's peak is this load's.
  const server = await serve();
  const { browser, page } = await launch();
  const { testid } = hooks(() => page);
  // The page's own wasm memory, as the worker's: its exports come with Trunk's start event.
  await page.addInitScript(() => addEventListener('TrunkApplicationStarted', (e) => { window.pageWasm = e.detail.wasm; }));
  await page.goto(server.url);
  await testid('summary').waitFor();
  const started = Date.now();
  await testid('file-input').setInputFiles(file);
  let outcome;
  try {
    await page.waitForFunction(
      (format) => document.querySelector('[data-testid=error]') || (document.querySelector('[data-testid=summary]')?.innerText.includes(format) && !document.querySelector('[data-testid=progress]')),
      format,
      { timeout: 600000, polling: 250 },
    );
    outcome = (await testid('error').count()) ? (await testid('error').innerText()).slice(0, 120) : 'loaded';
  } catch (e) {
    outcome = `no answer: ${e.message.split('\n')[0]}`;
  }
  const pageSeconds = (Date.now() - started) / 1000;
  const peak = rendererPeakMb(process.pid);
  const workers = page.workers();
  const workerMb = workers.length
    ? Math.round((await workers[workers.length - 1].evaluate(() => wasm_bindgen.memory_bytes())) / 1048576)
    : '?';
  const pageMb = Math.round((await page.evaluate(() => window.pageWasm?.memory.buffer.byteLength ?? NaN)) / 1048576);
  await browser.close();
  await server.close();
  const name = `${rows ? `${rows}-row CSV, ` : ''}${(bytes / 1048576).toFixed(0)} MiB`;
  // A snapshot's load cancelled halfway through its time (reading or planning, as it falls).
  const cancelled = !rows && outcome === 'loaded' ? await cancelFigures(file, pageSeconds / 2) : '';
  // And once the file is read: the reader's last stages, which hear a cancel between them.
  const cancelledRead = !rows && outcome === 'loaded' ? await cancelFigures(file, null) : '';
  results.push({ name, ...native, pageSeconds: pageSeconds.toFixed(1), workerMb, pageMb, peak, outcome, cancelled, cancelledRead });
}

console.log('| file | buffers | CLI `plan` | CLI peak memory | page, file to plan | worker memory | page memory | renderer peak memory | page | cancel halfway: click to idle | cancel once read: click to idle |');
console.log('|---|---|---|---|---|---|---|---|---|---|---|');
for (const r of results) {
  console.log(`| ${r.name} | ${r.buffers} | ${r.seconds} s | ${r.mb} MiB | ${r.pageSeconds} s | ${r.workerMb} MiB | ${r.pageMb} MiB | ${r.peak} MiB | ${r.outcome} | ${r.cancelled} | ${r.cancelledRead} |`);
}
