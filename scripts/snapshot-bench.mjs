// Large PyTorch snapshots, end to end: for each size, a snapshot written by
// scripts/gen-snapshot.py (`--stacks all --stream`: a training loop's events with the
// interpreter's frames, as `_record_memory_history(stacks="all")` records them), planned by the
// CLI built for speed and loaded in the page (headless Chromium, release bundle), side by side
// in one run. Prints a table: the file, its allocations, the CLI's time and peak memory, the
// page's time to the drawn plan, its worker's memory (its wasm memory, which only grows: its
// peak) and the peak memory of its renderer process (the page and its worker, which runs in the
// same process), or the page's error. The test suite asserts what a
// load does; this script only measures.
//
// Usage: node scripts/snapshot-bench.mjs [MiB ...]   (default: 64 256 1024)
// Snapshots are cached in target/snapshots/ (a 1 GiB one takes minutes to write).
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { fastBin, hooks, launch, root, serve } from '../tests/e2e/harness.mjs';

const sizes = process.argv.slice(2).map(Number);
const mib = sizes.length ? sizes : [64, 256, 1024];
const dir = join(root, 'target/snapshots');
await mkdir(dir, { recursive: true });

/** The generator's bytes per event with `--stacks all`, about: sizes are approximate. */
const BYTES_PER_EVENT = 76;

/** A snapshot of about `size` MiB, written once. */
function snapshot(size) {
  const file = join(dir, `training-${size}mib.pickle`);
  if (!existsSync(file)) {
    const events = Math.round((size * 1048576) / BYTES_PER_EVENT);
    execFileSync('python3', [join(root, 'scripts/gen-snapshot.py'), '--events', String(events), '--stacks', 'all', '--stream', '-o', file], { stdio: 'inherit' });
  }
  return file;
}

/**
 * The CLI's wall time (s) and peak resident memory (MB) planning `file` (`plan`, its table: the
 * JSON of millions of placements would weigh more than the plan), as `time` prints them, and the
 * allocations `validate` counts (untimed).
 */
function cliFigures(file) {
  const timed = execFileSync('sh', ['-c', `/usr/bin/time -f '%e %M' '${fastBin}' plan '${file}' 2>&1 > /dev/null | tail -1`], { encoding: 'utf8' });
  const [seconds, kb] = timed.trim().split(' ').map(Number);
  const counts = execFileSync(fastBin, ['validate', file], { encoding: 'utf8' });
  const allocations = Number(/: (\d+) tensors/.exec(counts)[1]);
  return { seconds, mb: Math.round(kb / 1024), allocations };
}

/** The peak resident memory (MB) of the renderer processes under `pid` (this script: Playwright starts Chromium as its child). */
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

const rows = [];
for (const size of mib) {
  const file = snapshot(size);
  const bytes = statSync(file).size;
  const native = cliFigures(file);
  // A fresh browser per file: its renderer's peak is this load's.
  const server = await serve();
  const { browser, page } = await launch();
  const { testid } = hooks(() => page);
  await page.goto(server.url);
  await testid('summary').waitFor();
  const started = Date.now();
  await testid('file-input').setInputFiles(file);
  let outcome;
  try {
    await page.waitForFunction(
      () => document.querySelector('[data-testid=error]') || (document.querySelector('[data-testid=summary]')?.innerText.includes('PyTorch memory snapshot') && !document.querySelector('[data-testid=progress]')),
      null,
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
  await browser.close();
  await server.close();
  rows.push({ mib: (bytes / 1048576).toFixed(0), ...native, pageSeconds: pageSeconds.toFixed(1), workerMb, peak, outcome });
}

console.log('| snapshot | allocations | CLI `plan` | CLI peak memory | page, file to plan | worker memory | renderer peak memory | page |');
console.log('|---|---|---|---|---|---|---|---|');
for (const r of rows) {
  console.log(`| ${r.mib} MiB | ${r.allocations} | ${r.seconds} s | ${r.mb} MB | ${r.pageSeconds} s | ${r.workerMb} MB | ${r.peak} MB | ${r.outcome} |`);
}
