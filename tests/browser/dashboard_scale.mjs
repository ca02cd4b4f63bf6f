// SPDX-License-Identifier: Apache-2.0
// The dashboard over 10,000 live reservations in headless Chromium
// (tests/browser/test_dashboard_scale.sh makes them: DASH_N, half waiting for GPU 0, half
// granted on the other GPUs). Checks, each waited for with a deadline:
//  1. the page loads and goes live with no console error; its reads of the reservation list are
//     cut to pages of 1,000 on the way (the page asks for 10,000 a page, which would be one),
//     so that it follows the cursors: every page answered 200 and the last has no cursor;
//  2. the table shows the first 100 rows and says how many there are; stepping through it with
//     the pager shows every live reservation once, as the REST API lists them; the queue shows
//     its head and how many more wait;
//  3. a release through the API leaves the count one smaller (the event reaches the page);
//  4. the 8 GPUs show as compact rows across the window; a click opens a GPU's card, another
//     closes it.
// Screenshots go to DASH_OUT.
import fs from "node:fs";
import path from "node:path";
import { chromium } from "../../web/node_modules/playwright-core/index.mjs";

const env = (k) => {
  if (!process.env[k]) throw new Error(`${k} is not set: run through tests/browser/test_dashboard_scale.sh`);
  return process.env[k];
};
const URL = env("DASH_URL");
const OUT = env("DASH_OUT");
const N = Number(env("DASH_N"));
const TOKEN = fs.readFileSync(env("DASH_TOKEN_FILE"), "utf8").trim();
const T = 60000; // the deadline of each wait, ms
const PAGE = 1000; // the pages the page's list reads are cut to
const ROWS = 100; // the table's rows at once (web/app.js PAGE_ROWS)
const tid = (id) => `[data-testid="${id}"]`;
const fmt = (n) => n.toLocaleString("en");

function log(msg) {
  console.log(`ok: ${msg}`);
}

async function api(method, p) {
  const r = await fetch(URL + p, { method, headers: { Authorization: "Bearer " + TOKEN } });
  return { status: r.status, body: await r.json() };
}

// Every live reservation's id, as the REST API lists them.
async function liveIds() {
  const ids = [];
  for (let cur = ""; cur !== null; ) {
    const r = await api("GET", "/api/v1/reservations?limit=10000" + (cur ? "&cursor=" + encodeURIComponent(cur) : ""));
    if (r.status !== 200) throw new Error(`GET /api/v1/reservations: ${r.status}`);
    ids.push(...r.body.reservations.map((x) => x.id));
    cur = r.body.next_cursor;
  }
  return ids;
}

async function main() {
  const browser = await chromium.launch({
    executablePath: env("DASH_CHROMIUM"),
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
  });
  const problems = [];
  try {
    const page = await browser.newPage({ viewport: { width: 1680, height: 900 }, colorScheme: "light" });
    page.on("console", (m) => {
      if (m.type() === "error") problems.push(`${m.text()} (${(m.location() && m.location().url) || ""})`);
    });
    page.on("pageerror", (e) => problems.push(`uncaught: ${e.message}`));
    page.setDefaultTimeout(T);
    const noProblems = (where) => {
      if (problems.length) throw new Error(`${where}: console errors:\n  ${problems.join("\n  ")}`);
    };

    // 1. The list's reads in pages of PAGE: the page follows the cursors.
    const reads = []; // [cursor given, status, next_cursor] of each read of the list
    await page.route("**/api/v1/reservations?*", async (route) => {
      const u = new globalThis.URL(route.request().url());
      if (u.searchParams.get("limit") !== "10000") return route.continue();
      u.searchParams.set("limit", String(PAGE));
      const res = await route.fetch({ url: u.toString() });
      const body = await res.json();
      reads.push([u.searchParams.get("cursor"), res.status(), body.next_cursor]);
      await route.fulfill({ response: res, json: body });
    });
    await page.goto(URL + "/");
    await page.waitForSelector(`${tid("conn")}[data-state="live"]`);
    const range = page.locator(tid("resv-range"));
    await page.waitForSelector(`${tid("resv-range")}:text("1–${ROWS} of ${fmt(N)} reservations")`);
    noProblems("load");
    const walk = reads.slice(0, Math.ceil(N / PAGE));
    if (walk.length !== Math.ceil(N / PAGE) || walk[0][0] !== null || walk.some((r) => r[1] !== 200) ||
        walk.at(-1)[2] !== null || walk.some((r, i) => i > 0 && r[0] !== walk[i - 1][2]))
      throw new Error(`the page's reads of the list: ${JSON.stringify(walk)}`);
    await page.screenshot({ path: path.join(OUT, "01-loaded.png") });
    log(`the page loads ${fmt(N)} reservations in ${walk.length} pages of ${PAGE} (by their cursors), no console error`);

    // 2. The pager shows every one of them once; the queue its head and the rest counted.
    const rowsNow = () => page.locator(`${tid("reservations")} tbody tr`).count();
    if ((await rowsNow()) !== ROWS) throw new Error(`${await rowsNow()} rows in the table, not ${ROWS}`);
    if (!(await page.locator(tid("resv-prev")).isDisabled())) throw new Error("previous is enabled on the first page");
    const shown = await page.evaluate(() => {
      const ids = [];
      const next = document.getElementById("resv-next");
      for (;;) {
        for (const tr of document.querySelectorAll("#resv-body tr")) ids.push(tr.dataset.id);
        if (next.disabled) return ids;
        next.click();
      }
    });
    const live = await liveIds();
    if (live.length !== N) throw new Error(`the API lists ${live.length} reservations, not ${N}`);
    const seen = new Set(shown);
    if (shown.length !== N || seen.size !== N || live.some((id) => !seen.has(id)))
      throw new Error(`the pager showed ${shown.length} rows (${seen.size} distinct) of the ${N} live`);
    const last = N - Math.floor((N - 1) / ROWS) * ROWS;
    await page.waitForSelector(`${tid("resv-range")}:text("${fmt(N - last + 1)}–${fmt(N)} of ${fmt(N)} reservations")`);
    await page.screenshot({ path: path.join(OUT, "02-last-page.png") });
    const queued = (await api("GET", "/api/v1/reservations?state=QUEUED&limit=1")).body.total;
    if ((await page.locator(`${tid("queue")} li`).count()) !== ROWS + 1)
      throw new Error(`the queue lists ${await page.locator(`${tid("queue")} li`).count()} entries`);
    await page.waitForSelector(`${tid("queue-more")}:text("and ${fmt(queued - ROWS)} more waiting")`);
    await page.locator(tid("resv-prev")).click();
    await page.waitForSelector(`${tid("resv-range")}:text("${fmt(N - last - ROWS + 1)}–${fmt(N - last)} of")`);
    noProblems("pager");
    log(`the pager shows all ${fmt(N)} once, ${ROWS} at a time; the queue its head and ${fmt(queued - ROWS)} more`);

    // 3. A release elsewhere: the count follows.
    const r = await api("DELETE", "/api/v1/reservations/" + live[1]);
    if (r.status !== 200) throw new Error(`DELETE ${live[1]}: ${r.status} ${JSON.stringify(r.body)}`);
    await page.waitForSelector(`${tid("resv-range")}:text("of ${fmt(N - 1)} reservations")`);
    noProblems("release");
    log(`a release elsewhere: the table counts ${fmt(N - 1)}; range now "${await range.textContent()}"`);

    // 4. A node of 8 GPUs: a compact row each (memory bar, utilisation, temperature, state)
    // across the wide window, no card's details until its row is clicked; then GPU 3's card,
    // its charts drawn at the row's width.
    const rows = await page.evaluate(() => [...Array(8).keys()].map((i) => {
      const q = (t) => document.querySelector(`[data-testid="${t}"]`);
      const row = q(`gpu-row-${i}`).getBoundingClientRect();
      return { w: row.width, h: row.height, details: q(`gpu-details-${i}`).getClientRects().length,
        state: q(`gpu-row-state-${i}`).textContent, util: q(`gpu-row-util-${i}`).textContent,
        mem: q(`gpu-row-mem-${i}`).textContent,
        temp: q(`gpu-row-temp-${i}`).textContent, bar: q(`gpu-row-bar-${i}`).getBoundingClientRect().width };
    }));
    const vw = page.viewportSize().width;
    for (const [i, x] of rows.entries())
      if (x.w < vw * 0.9 || x.h > 60 || x.details !== 0 || !/^(AVAILABLE|BUSY)$/.test(x.state) ||
          !/ %$/.test(x.util) || !/ °C$/.test(x.temp) || x.bar < 100)
        throw new Error(`GPU ${i}'s compact row: ${JSON.stringify(x)}`);
    // Each row says what gpumd can still grant on its GPU, as its status has it (read back to
    // bytes: the page rounds to three digits).
    const status = (await api("GET", "/api/v1/gpu/status")).body.devices;
    for (const [i, x] of rows.entries()) {
      const m = /^can grant (-?\d+(?:\.\d+)?) (B|KiB|MiB|GiB|TiB)$/.exec(x.mem);
      const shown = m ? parseFloat(m[1]) * 1024 ** ["B", "KiB", "MiB", "GiB", "TiB"].indexOf(m[2]) : NaN;
      const want = status[i].grantable;
      if (!(Math.abs(shown - want) <= Math.max(1, want * 0.006)))
        throw new Error(`GPU ${i}'s row says "${x.mem}", gpumd can grant ${want} bytes`);
    }
    await page.evaluate(() => window.scrollTo(0, 0));
    await page.screenshot({ path: path.join(OUT, "03-eight-gpus.png") });
    await page.locator(tid("gpu-row-3")).click();
    await page.waitForSelector(`${tid("gpu-row-3")}[aria-expanded="true"]`);
    await page.waitForFunction(() => {
      const c = document.querySelector('[data-testid="gpu-mem-chart-3"] canvas');
      return c && c.getBoundingClientRect().width > window.innerWidth * 0.8;
    });
    if ((await page.locator(tid("gpu-details-2")).isVisible()) || !(await page.locator(tid("gpu-procs-3")).isVisible()))
      throw new Error("clicking GPU 3's row opened another card, or not its own");
    await page.screenshot({ path: path.join(OUT, "04-gpu-3-opened.png") });
    await page.locator(tid("gpu-row-3")).click();
    await page.waitForSelector(`${tid("gpu-row-3")}[aria-expanded="false"]`);
    if (await page.locator(tid("gpu-details-3")).isVisible()) throw new Error("GPU 3's card stayed open");
    noProblems("compact");
    log("8 GPUs: a compact row each across the window; a click opens that GPU's card, another closes it");
    await page.unrouteAll({ behavior: "ignoreErrors" }); // the page reads on while it closes
  } finally {
    await browser.close();
  }
}

main().catch((e) => {
  console.error(e.stack || String(e));
  process.exit(1);
});
