// Takes the README's screenshot of today's page: the release bundle (dist/) served on 127.0.0.1,
// the default example planned, at 1400x900 in headless Chromium. Usage: node scripts/screenshot.mjs OUT.png
import { launch, serve } from '../tests/e2e/harness.mjs';

const out = process.argv[2];
if (!out) {
  console.error('usage: node scripts/screenshot.mjs OUT.png');
  process.exit(2);
}
const server = await serve();
const { browser, page } = await launch();
try {
  await page.setViewportSize({ width: 1400, height: 900 });
  await page.goto(server.url);
  await page.getByTestId('summary').waitFor();
  await page.getByTestId('timeline-canvas').waitFor();
  // Two animation frames: the one that draws the plan is done.
  await page.evaluate(() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done))));
  await page.screenshot({ path: out });
  if (page.problems.length) throw new Error(`the page reported: ${page.problems.join('; ')}`);
  console.log(`wrote ${out}`);
} finally {
  await browser.close();
  await server.close();
}
