// SPDX-License-Identifier: Apache-2.0
// The dashboard against a gpumd whose every read needs the token (a non-loopback address;
// tests/browser/test_dashboard_token.sh): the page loads without the token and asks for it;
// cancelled, it says so and shows no node; a wrong token is refused and asked again; with the
// right one it goes live, shows the GPUs and releases a reservation without asking again.
import fs from "node:fs";
import path from "node:path";
import { chromium } from "../../web/node_modules/playwright-core/index.mjs";

const env = (k) => {
  if (!process.env[k]) throw new Error(`${k} is not set: run through tests/browser/test_dashboard_token.sh`);
  return process.env[k];
};
const URL = env("DASH_URL");
const OUT = env("DASH_OUT");
const TOKEN = fs.readFileSync(env("DASH_TOKEN_FILE"), "utf8").trim();
const T = 20000;
const tid = (id) => `[data-testid="${id}"]`;
const problems = [];
let phase = "no token";

async function main() {
  const browser = await chromium.launch({
    executablePath: env("DASH_CHROMIUM"),
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
  });
  try {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    page.setDefaultTimeout(T);
    page.on("console", (m) => {
      if (m.type() !== "error") return;
      const url = (m.location() && m.location().url) || "";
      // Refusals before the right token.
      const refused = phase !== "token" && /40[13]/.test(m.text());
      if (!m.text().startsWith("Failed to load resource") || !refused)
        problems.push(`[${phase}] ${m.text()} (${url})`);
    });
    page.on("pageerror", (e) => problems.push(`[${phase}] uncaught: ${e.message}`));

    const res = await page.goto(URL + "/");
    if (res.status() !== 200) throw new Error(`GET / without a token: ${res.status()}`);
    await page.waitForSelector(`${tid("token-dialog")}[open]`);
    await page.screenshot({ path: path.join(OUT, "01-token-asked.png") });
    await page.click(tid("token-cancel"));
    await page.waitForSelector(`${tid("message")}.error:text("API token")`);
    await page.waitForSelector(`${tid("conn")}[data-state="down"]`);
    if (await page.locator(`${tid("gpus")} article`).count()) throw new Error("GPUs shown without the token");
    console.log("ok: the page loads without the token, asks for it, and shows nothing of the node without it");

    phase = "wrong token";
    await page.click(tid("token-button"));
    await page.fill(tid("token-input"), "certainly-not-the-token");
    await page.click(tid("token-ok"));
    await page.waitForSelector(`${tid("token-dialog")}[open]`);
    await page.waitForSelector(`${tid("token-dialog")} :text("That token is wrong")`);
    console.log("ok: a wrong token is refused and asked again");

    phase = "token";
    await page.fill(tid("token-input"), TOKEN);
    await page.click(tid("token-ok"));
    await page.waitForSelector(`${tid("conn")}[data-state="live"]`);
    for (const i of [0, 1]) await page.waitForSelector(`${tid("gpu-state-" + i)}:text("AVAILABLE")`);
    const r = await fetch(URL + "/api/v1/gpu/allocate", {
      method: "POST", headers: { Authorization: "Bearer " + TOKEN }, body: JSON.stringify({ memory_gb: 2, label: "tok", ttl: 600 }),
    });
    const id = (await r.json()).reservation.id;
    await page.locator(tid("resv-" + id)).waitFor();
    await page.screenshot({ path: path.join(OUT, "02-token-live.png") });
    await page.click(tid("release-" + id));
    await page.locator(tid("resv-" + id)).waitFor({ state: "detached" });
    if (await page.locator(`${tid("token-dialog")}[open]`).count()) throw new Error("asked for the token again");
    console.log("ok: with the right token the page goes live, and releases without asking again");
    if (problems.length) throw new Error("console errors:\n  " + problems.join("\n  "));
  } finally {
    await browser.close();
  }
}

main().then(
  () => process.exit(0),
  (e) => {
    console.error(`FAIL (${phase}): ${e.stack || e}`);
    if (problems.length) console.error("console errors:\n  " + problems.join("\n  "));
    process.exit(1);
  },
);
