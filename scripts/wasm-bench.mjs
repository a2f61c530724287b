// The planner compiled to WebAssembly against the native build, side by side in one run.
//
// Usage: node scripts/wasm-bench.mjs NATIVE_CLI CLI_WASM -- BENCH_ARGS...
//
// Runs `memplan BENCH_ARGS --json` with the native CLI and with the same CLI compiled for
// wasm32-wasip1, in this process's WebAssembly engine (V8, as in Chromium) through node's WASI,
// in turn, ROUNDS times (default 3): a stretch of a busy machine then slows both, not one. Both
// clocks are the CLI's own (`std::time::Instant`; in wasm, WASI's), around the plan alone.
// Prints one markdown row per plan: each build's median over every run of every round, their
// ratio, and the wasm build's first run (the engine compiles a function to baseline code when
// it first runs and optimizes it once it is hot, so a first run is slower; in the explorer, the
// worker's warm-up pays for that before the first search). Exits 1 if the two builds planned
// differently: a plan must be the same bytes native and in wasm.
import { execFileSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WASI } from 'node:wasi';

const [nativeCli, wasmPath, dashes, ...args] = process.argv.slice(2);
if (!nativeCli || !wasmPath || dashes !== '--' || !args.includes('--json')) {
  console.error('usage: node scripts/wasm-bench.mjs NATIVE_CLI CLI_WASM -- bench ... --json');
  process.exit(2);
}

const rounds = Number(process.env.ROUNDS ?? 3);
const module = await WebAssembly.compile(readFileSync(wasmPath));
const scratch = mkdtempSync(join(tmpdir(), 'memplan-wasm-bench-'));

/** One run of the wasm build, in a fresh instance of the one compiled module. */
async function wasmRun() {
  const out = join(scratch, 'stdout.json');
  const fd = openSync(out, 'w');
  const wasi = new WASI({
    version: 'preview1',
    args: ['memplan', ...args],
    env: {},
    preopens: { '/': '/' },
    returnOnExit: true,
    stdout: fd,
  });
  const code = wasi.start(await WebAssembly.instantiate(module, wasi.getImportObject()));
  closeSync(fd);
  if (code !== 0) {
    console.error(`the wasm build exited with ${code}`);
    process.exit(1);
  }
  return JSON.parse(readFileSync(out, 'utf8'));
}

const same = (a, b) => ['instance', 'strategy', 'footprint_bytes', 'proven_lower_bound_bytes', 'optimal', 'valid']
  .every((key) => a[key] === b[key]);

/** `rows` with each row's runs appended to those of `into` (the first round's rows). */
const merge = (into, rows) => {
  if (!into) return rows;
  rows.forEach((r, i) => {
    if (!into[i] || !same(into[i], r)) {
      console.error(`round to round, ${r.instance} with ${r.strategy} planned differently`);
      process.exit(1);
    }
    into[i].millis.push(...r.millis);
  });
  return into;
};

let native;
let wasm;
let firstWasmRun;
for (let round = 0; round < rounds; round++) {
  native = merge(native, JSON.parse(execFileSync(nativeCli, args, { encoding: 'utf8', maxBuffer: 1 << 28 })));
  const rows = await wasmRun();
  firstWasmRun ??= rows.map((r) => r.millis[0]);
  wasm = merge(wasm, rows);
  // A finished instance's memory is let go only when collected: without this (node run with
  // --expose-gc), node 20 crashed in the second round of the whole bench.
  globalThis.gc?.();
}
rmSync(scratch, { recursive: true });

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const ms = (x) => x.toFixed(1);
const ratio = (a, b) => (a / Math.max(b, 1e-3)).toFixed(2);
console.log('| instance | strategy | footprint | native (ms) | wasm in node (ms) | wasm / native | wasm, first run (ms) | first / native |');
console.log('|---|---|---:|---:|---:|---:|---:|---:|');
let differ = 0;
native.forEach((n, i) => {
  const w = wasm[i];
  if (!w || !same(n, w)) {
    differ += 1;
    console.error(`${n.instance} with ${n.strategy}: native ${JSON.stringify(n)}, wasm ${JSON.stringify(w)}`);
    return;
  }
  const [nm, wm] = [median(n.millis), median(w.millis)];
  console.log(`| ${n.instance} | ${n.strategy} | ${n.footprint_bytes} | ${ms(nm)} | ${ms(wm)} | ${ratio(wm, nm)} | ${ms(firstWasmRun[i])} | ${ratio(firstWasmRun[i], nm)} |`);
});
if (differ > 0 || wasm.length !== native.length) {
  console.error(`the wasm build planned ${differ} instance(s) differently from the native build`);
  process.exit(1);
}
