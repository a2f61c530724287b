import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { launch, root, serve } from '/work/main/tests/e2e/harness.mjs';
const server = await serve({ '/fixtures/t.json': await readFile(join(root, 'static/examples/transformer-training.json'), 'utf8') });
const { browser, page } = await launch();
await page.setViewportSize({ width: 1400, height: 900 });
await page.goto(`${server.url}?src=${encodeURIComponent(server.url + 'fixtures/t.json')}&panel=flips&strategy=first-fit`);
await page.getByTestId('flips-table').waitFor();
console.log(await page.evaluate(() => {
  const all = document.querySelectorAll('*').length;
  const by = {};
  for (const el of document.querySelectorAll('[data-testid]')) { const n = el.querySelectorAll('*').length; if (n > 200) by[el.dataset.testid] = n; }
  return { all, by };
}));
await page.screenshot({ path: '/tmp/flips.png' });
// Mutation count per flip
const first = await page.locator('[data-testid^="flip-"][type="checkbox"]').first().getAttribute('data-testid');
console.log(await page.evaluate(async (id) => {
  let n = 0; const kinds = {};
  const obs = new MutationObserver((ms) => { for (const m of ms) { n++; const t = (m.target.dataset && m.target.dataset.testid) || m.target.nodeName; kinds[t] = (kinds[t] || 0) + 1; } });
  obs.observe(document.body, { subtree: true, childList: true, attributes: true, characterData: true });
  const peak = () => document.querySelector('[data-testid="peak-bytes"]').dataset.bytes;
  const before = peak();
  document.querySelector(`[data-testid="${id}"]`).click();
  while (peak() === before) await new Promise((r) => setTimeout(r, 1));
  await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  obs.disconnect();
  return { n, kinds: Object.entries(kinds).sort((a, b) => b[1] - a[1]).slice(0, 15) };
}, first));
await browser.close(); await server.close();
