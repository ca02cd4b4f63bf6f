// SPDX-License-Identifier: Apache-2.0
// The dashboard in headless Chromium (tests/browser/test_dashboard.sh sets the scene: a
// simulated node of two H100 and an MI300X, gpumd on DASH_URL; a window wide enough for the
// three cards in a row). Checks, each waited for with a deadline:
//  1. the page loads, goes live and shows the three GPUs, each card titled with its vendor and
//     its number there (a node of two vendors), with no console error; nothing below the GPUs
//     moves when their data arrive;
//  2. `gpum sim hold` 20 GiB on GPU 0: the memory chart's newest point shows it;
//  3. a `gpum run` appears in the reservations table and leaves it when it ends; a preemptible
//     job (progs/suspend_job) suspended by `gpum suspend` shows SUSPENDED with its host memory,
//     and GRANTED again after `gpum resume`;
//  4. an Xid 79 on GPU 1: its state turns ERROR (red), its temperature, power and utilisation
//     unknown, the reservation it held stays listed as FAILED with its reason, and the alert is
//     listed;
//  5. a job's workload report (allocated, cached, peak, ...) drawn against its limit;
//     releasing through the page: refused with a wrong token (403), done with the right one,
//     and, the token dialog cancelled, done without one (on loopback the browser acts as the
//     uid owning its connection, this test's, which owns the reservation);
//  6. gpumd killed and started again on the same port: the page reconnects and shows what
//     happens after the restart.
// Screenshots of each state go to DASH_OUT (NN-state.png), also dark and phone-sized ones.
import { spawn, execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { chromium } from "../../web/node_modules/playwright-core/index.mjs";

const env = (k) => {
  if (!process.env[k]) throw new Error(`${k} is not set: run through tests/browser/test_dashboard.sh`);
  return process.env[k];
};
const URL = env("DASH_URL");
const OUT = env("DASH_OUT");
const NODE = env("DASH_NODE");
const GPUM = env("GPUM_BIN");
const SCRATCH = env("DASH_SCRATCH");
const TOKEN = fs.readFileSync(env("DASH_TOKEN_FILE"), "utf8").trim();
const GIB = 1024 ** 3;
const T = 20000; // the deadline of each wait, ms

const children = [];

// Reports a pool's figures and an adaptive batch size on the reservation argv[1] over gpumd's
// socket (tests/integration/gpumd_client.py), then stays (a report lives with its process).
// Each line on its stdin is one more report, {"source": ..., "figures": {...}}, answered "sent".
const REPORTER = `
import json, sys
from gpumd_client import Client
c = Client()
G = 1024 ** 3
c.ok("report", reservation=sys.argv[1], source="main", figures={
    "allocated_bytes": 2.5 * G, "cached_bytes": 1 * G, "allocated_peak_bytes": 3 * G,
    "fragmentation_ratio": 0.12, "alloc_retries": 1, "ooms": 0, "limit_bytes": 4 * G})
c.ok("report", reservation=sys.argv[1], source="train", figures={"batch_size": 48})
print("ready", flush=True)
for line in sys.stdin:
    r = json.loads(line)
    c.ok("report", reservation=sys.argv[1], source=r["source"], figures=r["figures"])
    print("sent", flush=True)
`;
let phase = "load";
const problems = []; // console errors and page errors not expected in their phase

function log(msg) {
  console.log(`ok: ${msg}`);
}

// Console errors a phase expects: the refused releases, and the failed requests while gpumd
// is down.
function expected(text, url) {
  if (!text.startsWith("Failed to load resource")) return false;
  if (phase === "release" && /\/api\/v1\/reservations\/r-/.test(url) && /40[13]/.test(text)) return true;
  if (phase === "restart") return true;
  return false;
}

function gpum(...args) {
  return execFileSync(GPUM, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
}

async function api(method, p, body, token) {
  const headers = { "Content-Type": "application/json" };
  if (token) headers.Authorization = "Bearer " + token;
  const r = await fetch(URL + p, { method, headers, body: body ? JSON.stringify(body) : undefined });
  return { status: r.status, body: await r.json() };
}

async function until(what, fn, ms = T) {
  const end = Date.now() + ms;
  for (;;) {
    if (await fn()) return;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function shot(page, name) {
  await page.screenshot({ path: path.join(OUT, name + ".png"), fullPage: true });
}

function assertNoProblems(where) {
  if (problems.length) throw new Error(`${where}: console errors: \n  ${problems.join("\n  ")}`);
}

const tid = (id) => `[data-testid="${id}"]`;

// A size as the page writes it ("71.3 GiB") read back to bytes, so that what the page shows is
// compared with gpumd's figure without repeating how the page rounds (web/app.js iec).
function bytesOf(text) {
  const m = /^(-?\d+(?:\.\d+)?) (B|KiB|MiB|GiB|TiB)$/.exec(String(text).trim());
  return m ? parseFloat(m[1]) * 1024 ** ["B", "KiB", "MiB", "GiB", "TiB"].indexOf(m[2]) : NaN;
}

// Whether a size the page wrote is bytes, to the page's three significant digits.
function shows(text, bytes) {
  return Math.abs(bytesOf(text) - bytes) <= Math.max(1, Math.abs(bytes) * 0.006);
}

// The text of the summary's part name ("health", "grant", "queue", "alerts").
const summary = (page, name) => page.locator(tid("summary-" + name));

// Whether process pid has exited: no such process, or a zombie (which holds no file any more).
function gone(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
    return state === "Z" || state === "X";
  } catch {
    return true;
  }
}

async function startGpumd() {
  const out = path.join(SCRATCH, `gpumd.out.${Date.now()}`);
  const fd = fs.openSync(out, "w");
  const err = fs.openSync(env("DASH_GPUMD_ERR"), "a");
  const p = spawn(env("DASH_GPUMD"), [], { stdio: ["ignore", fd, err] });
  fs.writeFileSync(env("DASH_GPUMD_PIDFILE"), String(p.pid));
  let exited = false;
  p.on("exit", () => (exited = true));
  await until("gpumd ready", () => {
    if (exited) throw new Error("gpumd exited before it was ready");
    return fs.readFileSync(out, "utf8").includes("gpumd ready");
  });
}

async function main() {
  const browser = await chromium.launch({
    executablePath: env("DASH_CHROMIUM"),
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
  });
  try {
    const page = await browser.newPage({ viewport: { width: 1680, height: 900 }, colorScheme: "light" });
    page.on("console", (m) => {
      if (m.type() !== "error") return;
      const url = (m.location() && m.location().url) || "";
      if (!expected(m.text(), url)) problems.push(`[${phase}] ${m.text()} (${url})`);
    });
    page.on("pageerror", (e) => problems.push(`[${phase}] uncaught: ${e.message}`));
    page.setDefaultTimeout(T);

    // 1. Loads, reads the last hour of samples, goes live. The first status read is held back
    // to see the page before its data: what follows the GPUs must not move when they arrive.
    let letStatusGo;
    const statusHeld = new Promise((r) => (letStatusGo = r));
    let statusSeen;
    const statusAsked = new Promise((r) => (statusSeen = r));
    await page.route("**/api/v1/gpu/status", async (route) => {
      statusSeen();
      await statusHeld;
      await route.continue();
    });
    const history = page.waitForResponse((r) => r.url().includes("/api/v1/gpu/history"));
    await page.goto(URL + "/");
    await statusAsked;
    const y = () => page.evaluate(() => document.getElementById("resv-title").getBoundingClientRect().top);
    const before = await y();
    letStatusGo();
    const h = await history;
    if (h.status() !== 200) throw new Error(`GET /api/v1/gpu/history: ${h.status()}`);
    const hist = await h.json();
    if (hist.devices.length !== 3) throw new Error(`history: ${JSON.stringify(hist).slice(0, 300)}`);
    await page.waitForSelector(`${tid("conn")}[data-state="live"]`);
    for (const i of [0, 1, 2]) await page.waitForSelector(`${tid("gpu-state-" + i)}:text("AVAILABLE")`);
    // A node of two vendors: each card says its GPU's vendor and number there.
    await page.waitForSelector(`${tid("gpu-name-0")}:text("GPU 0 · NVIDIA H100 80GB HBM3 (nvidia 0)")`);
    await page.waitForSelector(`${tid("gpu-name-2")}:text("GPU 2 · AMD Instinct MI300X (amd 0)")`);
    await page.waitForSelector(`${tid("gpu-mem-chart-0")} canvas`);
    await page.waitForFunction(() => Number(document.querySelector('[data-testid="gpu-mem-chart-0"]').dataset.points) > 0);
    await page.unroute("**/api/v1/gpu/status");
    const moved = (await y()) - before;
    if (Math.abs(moved) > 16) throw new Error(`the reservations moved by ${moved} px when the GPUs arrived`);
    // The summary at the top: every GPU well, nothing waiting, no alert; first on the page.
    await summary(page, "health").filter({ hasText: /^All 3 GPUs well$/ }).waitFor();
    await summary(page, "queue").filter({ hasText: /^nothing waits$/ }).waitFor();
    await summary(page, "alerts").filter({ hasText: /^no active alert$/ }).waitFor();
    // Legends show the newest values with no cursor on the chart, never uPlot's "--".
    await page.waitForFunction(() => [...document.querySelectorAll(".u-legend")].every((l) => !l.textContent.includes("--")));
    assertNoProblems("load");
    await shot(page, "01-loaded");
    log(`the page loads, reads the history, goes live, shows the three GPUs with their vendors and charts (what follows moved ${moved} px), no console error`);

    // 2. Held memory shows in the chart.
    phase = "hold";
    const holder = Number(gpum("sim", "hold", NODE, "--device", "0", "--bytes", "20GiB", "--for", "600s").trim());
    await page.waitForFunction((want) => {
      const e = document.querySelector('[data-testid="gpu-mem-chart-0"]');
      return Number(e.dataset.lastUsed) >= want;
    }, 20 * GIB);
    await page.waitForSelector(`${tid("gpu-used-0")}:text("20.0 GiB")`);
    // What gpumd can still grant: its capacity less what is committed (the 20 GiB held,
    // unmanaged), as its status says; the chart's dashed line is that capacity.
    const dev0 = async () => (await api("GET", "/api/v1/gpu/status")).body.devices[0];
    let d0 = await dev0();
    await until("gpumd to count the 20 GiB held", async () => (d0 = await dev0()).unmanaged >= 20 * GIB);
    if (d0.grantable !== d0.capacity - d0.committed) throw new Error(`grantable: ${JSON.stringify(d0)}`);
    let grantText = "";
    await until(`the card to say it can grant ${d0.grantable} of ${d0.capacity} bytes`, async () => {
      grantText = (await page.locator(tid("gpu-grantable-0")).textContent()) || "";
      const m = /^\s*(.+) of (.+?)\s*$/.exec(grantText);
      return m !== null && shows(m[1], d0.grantable) && shows(m[2], d0.capacity);
    });
    const capLegend = await page.evaluate(() => document.querySelector('[data-testid="gpu-mem-chart-0"] .u-legend').textContent);
    const capShown = /capacity(-?\d+(?:\.\d+)? (?:B|KiB|MiB|GiB|TiB))/.exec(capLegend);
    if (!capShown || !shows(capShown[1], d0.capacity)) throw new Error(`the memory legend: ${capLegend}`);
    // Its processes, as nvitop lists them: the holder, its user's name, command, memory, unmanaged.
    const prow = page.locator(tid(`proc-0-${holder}`));
    await prow.filter({ hasText: "sim hold" }).filter({ hasText: "20.0 GiB" }).filter({ hasText: "unmanaged" }).waitFor();
    await page.locator(tid(`proc-user-0-${holder}`)).filter({ hasText: new RegExp(`^${os.userInfo().username}$`) }).waitFor();
    // A uid with no name (or not resolved yet: gpumd gives "user": null) shows as its number.
    await page.route("**/api/v1/gpu/status", async (route) => {
      const res = await route.fetch();
      const body = await res.json();
      for (const p of body.devices[0].processes || []) if (p.pid === holder) Object.assign(p, { uid: 4000000000, user: null });
      await route.fulfill({ response: res, json: body });
    });
    await page.locator(tid(`proc-user-0-${holder}`)).filter({ hasText: /^4000000000$/ }).waitFor();
    await page.unroute("**/api/v1/gpu/status");
    await page.locator(tid(`proc-user-0-${holder}`)).filter({ hasText: new RegExp(`^${os.userInfo().username}$`) }).waitFor();
    await shot(page, "02-held-memory");
    log(`gpum sim hold 20 GiB: the chart's newest point and the figures show it; "${grantText.trim()}" ` +
      `(gpumd: ${d0.grantable} of ${d0.capacity} bytes); the holder listed with its user name (${os.userInfo().username}) as unmanaged`);

    // 3. A gpum run comes and goes.
    phase = "run";
    const flag = path.join(SCRATCH, "job-may-end");
    const job = spawn(GPUM, ["run", "--mem", "8GiB", "--label", "dash-job", "--", "sh", "-c",
      'while [ ! -e "$1" ]; do sleep 0.05; done', "sh", flag], { stdio: "ignore" });
    children.push(job);
    const jobDone = new Promise((r) => job.on("exit", (code) => r(code)));
    const row = page.locator(`${tid("reservations")} tbody tr`, { hasText: "dash-job" });
    await row.waitFor();
    await page.waitForSelector(`${tid("reservations")} tr:has-text("dash-job") :text("GRANTED")`);
    await shot(page, "03-run-listed");
    fs.writeFileSync(flag, "");
    if ((await jobDone) !== 0) throw new Error("gpum run did not exit 0");
    await row.waitFor({ state: "detached" });
    log("a gpum run appears in the reservations table and leaves it when it ends");

    // 3b. A preemptible job suspended and resumed (docs/suspend.md).
    phase = "suspend";
    const sdir = path.join(SCRATCH, "susp-job");
    fs.mkdirSync(sdir);
    execFileSync("mkfifo", [path.join(sdir, "ctl")]);
    const sjob = spawn(GPUM, ["run", "--mem", "4GiB", "--preemptible", "--label", "dash-susp", "-q", "--",
      path.join(env("DASH_PROGS"), "suspend_job"), String(64 << 20), sdir], { stdio: "ignore" });
    children.push(sjob);
    const sjobDone = new Promise((r) => sjob.on("exit", (code) => r(code)));
    await until("the preemptible job ready", () => fs.existsSync(path.join(sdir, "ready")));
    const ctl = fs.openSync(path.join(sdir, "ctl"), "w"); // the job reads its steps from here
    const srow = page.locator(`${tid("reservations")} tbody tr`, { hasText: "dash-susp" });
    await srow.waitFor();
    const susp = (await srow.getAttribute("data-id")) || "";
    gpum("suspend", susp);
    await page.waitForSelector(`${tid("resv-state-" + susp)}:text("SUSPENDED")`);
    await page.waitForSelector(`${tid("resv-suspended-" + susp)}:text("in host memory · until resumed")`);
    await shot(page, "03b-suspended");
    gpum("resume", susp);
    await page.waitForSelector(`${tid("resv-state-" + susp)}:text-is("GRANTED")`);
    fs.closeSync(ctl); // the job ends
    if ((await sjobDone) !== 0) throw new Error("the preemptible job did not exit 0");
    await srow.waitFor({ state: "detached" });
    log("a preemptible job: SUSPENDED with its host memory after gpum suspend, GRANTED after gpum resume");

    // 4. Xid 79 on GPU 1, which holds a reservation (70 GiB: GPU 0 has 20 GiB held outside).
    phase = "xid";
    gpum("reserve", "--mem", "70GiB", "--ttl", "5m", "--label", "doomed", "-q");
    const doomed = page.locator(`${tid("reservations")} tbody tr`, { hasText: "doomed" });
    await doomed.waitFor();
    gpum("sim", "inject", NODE, "--device", "1", "--xid", "79");
    await page.waitForSelector(`${tid("gpu-state-1")}:text("ERROR")`);
    const red = await page.evaluate(() => {
      const badge = document.querySelector('[data-testid="gpu-state-1"]');
      const probe = document.createElement("span");
      probe.style.color = getComputedStyle(document.documentElement).getPropertyValue("--err");
      document.body.append(probe);
      const want = getComputedStyle(probe).color;
      probe.remove();
      return { bg: getComputedStyle(badge).backgroundColor, want, card: badge.closest("article").className };
    });
    if (red.bg !== red.want || !red.card.includes("gpu-ERROR"))
      throw new Error(`GPU 1's state is not red: ${JSON.stringify(red)}`);
    await page.locator(`${tid("alerts")} li[data-level="CRITICAL"]`, { hasText: "Xid 79: GPU has fallen off the bus" }).first().waitFor();
    await page.waitForSelector(`${tid("gpu-reason-1")}:text-matches("lost|fallen off the bus", "i")`);
    // Its last temperature, power and utilisation are no measurement: shown unknown.
    for (const m of ["temp", "power", "util"])
      await page.waitForSelector(`${tid(`gpu-${m}-1`)}:text("–")`);
    // The reservation it held stays listed, FAILED, with why.
    await page.waitForSelector(`${tid("reservations")} tr:has-text("doomed") :text("FAILED")`);
    await page.waitForSelector(`${tid("reservations")} tr:has-text("doomed") .ended-reason:text-matches("fallen off the bus|failed", "i")`);
    await summary(page, "health").filter({ hasText: /^1 of 3 GPUs in trouble: GPU 1 ERROR$/ }).waitFor();
    await summary(page, "alerts").filter({ hasText: /active alert/ }).and(page.locator(".sum-bad")).waitFor();
    await shot(page, "04-xid79");
    log("Xid 79: GPU 1 turns ERROR in red with its reason, its values unknown, the alert is listed");

    // A Slurm step's reservation (made over the socket, as gpum_spank.so does) shows its job
    // and step ids under the label.
    phase = "slurm";
    const slurmPy = (code) => execFileSync("python3", ["-c", `from gpumd_client import Client\nc = Client()\n${code}`],
      { encoding: "utf8" }).trim();
    const sid = slurmPy('print(c.ok("reserve", bytes_per_gpu="1GiB", label="slurm job 12345 step 0", lease="ttl", ' +
      'ttl_ms=600000, slurm={"job_id": "12345", "step_id": "0"})["reservation"]["id"])');
    await page.locator(tid("resv-slurm-" + sid)).filter({ hasText: /^job 12345\.0$/ }).waitFor();
    slurmPy(`c.ok("release", reservation="${sid}")`);
    await page.locator(tid("resv-" + sid)).waitFor({ state: "detached" });
    log("a Slurm step's reservation shows job 12345.0 under its label");

    // 5. Release through the page.
    phase = "release";
    const made = await api("POST", "/api/v1/gpu/allocate", { memory_gb: 4, label: "to-release", ttl: 600 }, TOKEN);
    if (made.status !== 201) throw new Error(`allocate: ${made.status} ${JSON.stringify(made.body)}`);
    const id = made.body.reservation.id;
    const rrow = page.locator(tid("resv-" + id));
    await rrow.waitFor();
    // The job's own figures (a workload report, as libgpum's reporter sends them): drawn
    // against the reservation's limit.
    const reporter = spawn("python3", ["-c", REPORTER, id], { stdio: ["pipe", "pipe", "inherit"] });
    children.push(reporter);
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("the reporter did not report")), T);
      reporter.stdout.on("data", (b) => String(b).includes("ready") && (clearTimeout(timer), resolve()));
      reporter.on("exit", (code) => reject(new Error(`the reporter exited ${code}`)));
    });
    const figures = page.locator(tid("workload-" + id));
    await figures.filter({ hasText: "allocated 2.50 GiB · cached 1.00 GiB · peak 3.00 GiB" }).waitFor();
    await figures.filter({ hasText: "fragmentation 12% · OOMs 0 · OOM retries 1 · batch 48" }).waitFor();
    const bar = await page.evaluate((i) => {
      const b = document.querySelector(`[data-testid="workload-bar-${i}"]`);
      return ["alloc", "cached", "peak"].map((c) => b.querySelector("." + c).style[c === "peak" ? "left" : "width"]);
    }, id);
    if (bar.join() !== "62.5%,87.5%,75%") throw new Error(`the workload bar: ${bar}`);
    // A report from a batcher arrives as a "workload" event: shown with units while the page
    // reads no reservation list (held back until it shows).
    let letListGo;
    const listHeld = new Promise((r) => (letListGo = r));
    await page.route("**/api/v1/reservations?*", async (route) => {
      await listHeld;
      await route.continue();
    });
    reporter.stdin.write(JSON.stringify({ source: "batcher", figures: { queue_p99_us: 11400, e2e_p50_us: 850, items_per_s: 1234 } }) + "\n");
    await page.locator(tid("workload-more-" + id)).filter({ hasText: "queue_p99 11.4 ms · e2e_p50 850 µs · items 1234/s" }).waitFor();
    letListGo();
    await page.unroute("**/api/v1/reservations?*");
    await shot(page, "05-workload");
    log("a job's report: its figures against its limit; a batcher's report from a workload event, with units, no list read");
    await page.click(tid("release-" + id));
    await page.waitForSelector(`${tid("token-dialog")}[open]`);
    await page.fill(tid("token-input"), "not-the-token-at-all");
    await page.click(tid("token-ok"));
    await page.waitForSelector(`${tid("message")}.error:text("403")`);
    await shot(page, "06-release-refused");
    if (!(await rrow.isVisible())) throw new Error("the reservation left although the release was refused");
    await page.click(tid("release-" + id));
    await page.fill(tid("token-input"), TOKEN);
    await page.click(tid("token-ok"));
    await rrow.waitFor({ state: "detached" });
    await page.waitForSelector(`${tid("message")}:not(.error):text("released")`);
    const after = await api("GET", "/api/v1/reservations/" + id);
    if (after.body.reservation.state !== "RELEASED") throw new Error(`${id} is ${after.body.reservation.state}`);
    // Without a token (the dialog cancelled): gpumd takes the browser's loopback connection as
    // its owner's, this test's uid, which also owns what the token allocated (gpumd's uid).
    const other = await api("POST", "/api/v1/gpu/allocate", { memory_gb: 2, label: "tokenless", ttl: 600 }, TOKEN);
    if (other.status !== 201) throw new Error(`allocate: ${other.status} ${JSON.stringify(other.body)}`);
    const orow = page.locator(tid("resv-" + other.body.reservation.id));
    await orow.waitFor();
    await page.evaluate(() => sessionStorage.removeItem("gpum.token"));
    await page.click(tid("release-" + other.body.reservation.id));
    await page.waitForSelector(`${tid("token-dialog")}[open]`);
    await page.click(tid("token-cancel"));
    await orow.waitFor({ state: "detached" });
    log("release: 403 with a wrong token (shown, nothing changed), released with the right one, and without one as the browser's own uid");

    // 6. gpumd restarts.
    phase = "restart";
    const oldPid = Number(fs.readFileSync(env("DASH_GPUMD_PIDFILE"), "utf8"));
    process.kill(oldPid, "SIGKILL");
    await page.waitForSelector(`${tid("conn")}:not([data-state="live"])`);
    // The page sees the socket closed before the killed gpumd has let go of its lock files: a
    // new one started then refuses the state directory (seen on a loaded machine).
    await until("the killed gpumd gone", () => gone(oldPid));
    await shot(page, "07-gpumd-down");
    await startGpumd();
    await page.waitForSelector(`${tid("conn")}[data-state="live"]`, { timeout: 30000 });
    phase = "restarted";
    const again = await api("POST", "/api/v1/gpu/allocate", { memory_gb: 2, label: "after-restart", ttl: 600 }, TOKEN);
    if (again.status !== 201) throw new Error(`allocate after the restart: ${again.status}`);
    await page.locator(`${tid("reservations")} tbody tr`, { hasText: "after-restart" }).waitFor();
    await page.waitForSelector(`${tid("gpu-state-1")}:text("ERROR")`);
    await page.waitForFunction(() => Number(document.querySelector('[data-testid="gpu-mem-chart-0"]').dataset.lastUsed) > 0);
    await shot(page, "08-restarted");
    log("gpumd killed and restarted: the page reconnects, re-reads the state and follows new events");

    // Themes and sizes, for the docs.
    await page.click(tid("theme-button"));
    await page.waitForFunction(() => document.documentElement.dataset.theme === "dark");
    await shot(page, "09-dark");
    await page.setViewportSize({ width: 390, height: 844 });
    await page.waitForFunction(() => document.querySelector('[data-testid="gpu-mem-chart-0"] canvas').clientWidth < 390);
    await shot(page, "10-phone-dark");
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    if (overflow > 0) throw new Error(`the phone-sized page scrolls sideways by ${overflow} px`);
    // On a phone: the summary first; the reservations are cards (no table scrolled sideways),
    // each cell with its column's name.
    const phone = await page.evaluate(() => {
      const top = (t) => document.querySelector(`[data-testid="${t}"]`).getBoundingClientRect().top;
      const wrap = document.querySelector(".table-wrap");
      const row = document.querySelector('[data-testid="reservations"] tbody tr');
      const cell = row.querySelector("td");
      return { summaryFirst: top("summary") < top("gpus"), sideways: wrap.scrollWidth - wrap.clientWidth,
        row: getComputedStyle(row).display, head: getComputedStyle(document.querySelector("#reservations thead")).display,
        label: getComputedStyle(cell, "::before").content };
    });
    if (!phone.summaryFirst || phone.sideways > 0 || phone.row !== "block" || phone.head !== "none" || phone.label !== '"id"')
      throw new Error(`the phone layout: ${JSON.stringify(phone)}`);
    await page.locator("#resv-title").evaluate((e) => e.scrollIntoView());
    await page.screenshot({ path: path.join(OUT, "11-phone-reservations.png") });
    log("dark theme and a phone-sized window: no sideways scrolling, the summary first, the reservations as cards");

    assertNoProblems("the end");
    log("no unexpected console error");
  } finally {
    for (const c of children) if (c.exitCode === null) c.kill("SIGKILL");
    await browser.close();
  }
}

main().then(
  () => process.exit(0),
  (e) => {
    console.error(`FAIL (phase ${phase}): ${e.stack || e}`);
    if (problems.length) console.error("console errors:\n  " + problems.join("\n  "));
    process.exit(1);
  },
);
