// SPDX-License-Identifier: Apache-2.0
// Conformance of gpumd's REST API with docs/openapi.yaml.
//
//   node conform.mjs SPEC [--phase main|unhealthy]
//   env: GPUMD_URL (http://127.0.0.1:PORT), GPUMD_TOKEN (the bearer token)
//
// 1. The spec itself is validated against the official OpenAPI 3.x JSON schemas
//    (@seriousme/openapi-schema-validator).
// 2. Phase "main" calls every endpoint of the spec on a live gpumd (a simulated node with two
//    80 GiB GPUs and nothing reserved), with success and error cases, and validates each
//    response (status documented for that operation, media type, body against its schema,
//    with ajv's JSON Schema 2020-12 validator, which OpenAPI 3.1 schemas are). Every operation
//    must be seen with at least one success and one error response (where it documents one:
//    the dashboard's page has none).
// 3. Phase "unhealthy" (every device lost) checks GET /api/v1/gpu/health's 503 document.
// Exit status 0 when everything conforms; the failures are printed otherwise.
import fs from "node:fs";
import { Validator } from "@seriousme/openapi-schema-validator";
import Ajv2020 from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import YAML from "yaml";

const specPath = process.argv[2];
const phase = process.argv[3] === "--phase" ? process.argv[4] : "main";
const base = process.env.GPUMD_URL;
const token = process.env.GPUMD_TOKEN;
if (!specPath || !base || !token) {
  console.error("usage: GPUMD_URL=... GPUMD_TOKEN=... node conform.mjs SPEC [--phase P]");
  process.exit(2);
}

const failures = [];
const fail = (msg) => failures.push(msg);

// ---- 1. the spec -------------------------------------------------------------------------
const validator = new Validator();
const res = await validator.validate(specPath);
if (!res.valid) {
  console.error("docs/openapi.yaml does not match the OpenAPI schema:");
  console.error(JSON.stringify(res.errors, null, 2));
  process.exit(1);
}
console.log(`ok: ${specPath} is a valid OpenAPI ${validator.version} document`);

const spec = YAML.parse(fs.readFileSync(specPath, "utf8"));
const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv);
ajv.addSchema(spec, "spec");
const esc = (s) => s.replaceAll("~", "~0").replaceAll("/", "~1");
const compiled = new Map();

// The operation's template path for a concrete path.
function templateOf(path) {
  for (const t of Object.keys(spec.paths)) {
    const re = new RegExp("^" + t.replace(/\{[^}]+\}/g, "[^/]+") + "$");
    if (re.test(path)) return t;
  }
  return null;
}

const seen = new Map(); // "METHOD template" -> Set of statuses

function check(method, path, status, headers, text) {
  const where = `${method} ${path} -> ${status}`;
  const t = templateOf(path.split("?")[0]);
  const m = method.toLowerCase() === "head" ? "get" : method.toLowerCase();
  const op = t && spec.paths[t][m];
  if (!op) {
    // Undocumented method on a documented path: 405; an unknown path: 404; both in the error
    // shape.
    if (t && status === 405) return checkBody(where, "#/components/responses/MethodNotAllowed", headers, text);
    if (!t && status === 404) return checkBody(where, "#/components/responses/NotFound", headers, text);
    return fail(`${where}: no such operation in the spec`);
  }
  const key = `${m.toUpperCase()} ${t}`;
  if (!seen.has(key)) seen.set(key, new Set());
  seen.get(key).add(status);
  const resp = op.responses[String(status)];
  if (!resp) return fail(`${where}: status ${status} is not documented for ${key}`);
  const ptr = resp.$ref
    ? resp.$ref
    : `#/paths/${esc(t)}/${m}/responses/${status}`;
  if (method === "HEAD") {
    if (text !== "") fail(`${where}: HEAD answered with a body`);
    return;
  }
  checkBody(where, ptr, headers, text);
}

function resolve(ptr) {
  return ptr.slice(2).split("/").map((p) => p.replaceAll("~1", "/").replaceAll("~0", "~"))
    .reduce((o, k) => o && o[k], spec);
}

function checkBody(where, respPtr, headers, text) {
  const resp = resolve(respPtr);
  const ctype = (headers.get("content-type") || "").split(";")[0].trim();
  if (!resp.content) return;
  if (!resp.content[ctype]) return fail(`${where}: content type '${ctype}' not documented`);
  for (const h of Object.keys(resp.headers || {}))
    if (!headers.get(h)) fail(`${where}: header ${h} missing`);
  const schemaPtr = `spec${respPtr}/content/${esc(ctype)}/schema`;
  if (!compiled.has(schemaPtr)) compiled.set(schemaPtr, ajv.compile({ $ref: schemaPtr }));
  const validate = compiled.get(schemaPtr);
  let body = text;
  if (ctype === "application/json") {
    try {
      body = JSON.parse(text);
    } catch (e) {
      return fail(`${where}: body is not JSON: ${text.slice(0, 200)}`);
    }
  }
  if (!validate(body))
    fail(`${where}: body does not match its schema: ${ajv.errorsText(validate.errors)}\n  ${text.slice(0, 400)}`);
}

async function call(method, path, { body, raw, auth, expect, header } = {}) {
  const headers = { ...header };
  if (auth === true) headers.Authorization = `Bearer ${token}`;
  else if (typeof auth === "string") headers.Authorization = `Bearer ${auth}`;
  let data;
  if (raw !== undefined) data = raw;
  else if (body !== undefined) data = JSON.stringify(body);
  if (data !== undefined) headers["Content-Type"] = "application/json";
  const r = await fetch(base + path, { method, headers, body: data });
  const text = await r.text();
  if (expect !== undefined && r.status !== expect)
    fail(`${method} ${path}: status ${r.status}, expected ${expect}: ${text.slice(0, 300)}`);
  check(method, path, r.status, r.headers, text);
  try {
    return { status: r.status, json: JSON.parse(text), headers: r.headers };
  } catch {
    return { status: r.status, text, headers: r.headers };
  }
}

async function openStream(path, auth, expect) {
  const ac = new AbortController();
  const headers = auth ? { Authorization: `Bearer ${auth === true ? token : auth}` } : {};
  const r = await fetch(base + path, { headers, signal: ac.signal });
  if (r.status !== expect) fail(`GET ${path}: status ${r.status}, expected ${expect}`);
  if (r.status === 200) {
    const ctype = (r.headers.get("content-type") || "").split(";")[0];
    if (ctype !== "text/event-stream") fail(`GET ${path}: content type ${ctype}`);
    const t = templateOf(path);
    if (!seen.has(`GET ${t}`)) seen.set(`GET ${t}`, new Set());
    seen.get(`GET ${t}`).add(200);
    ac.abort();
  } else {
    check("GET", path, r.status, r.headers, await r.text());
  }
}

// ---- 2. every endpoint -------------------------------------------------------------------
const WRONG = "0".repeat(64);
const BASIC = { Authorization: "Basic dXNlcjpwdw==" }; // not a bearer token: 401

async function mainPhase() {
  await call("GET", "/api/v1/gpu/status", { expect: 200 });
  await call("HEAD", "/api/v1/gpu/status", { expect: 200 });
  await call("GET", "/api/v1/gpu/status?verbose=1", { expect: 400 });
  await call("GET", "/api/v1/gpu/status", { auth: WRONG, expect: 403 });
  await call("POST", "/api/v1/gpu/status", { expect: 405 });

  await call("GET", "/api/v1/gpu/nodes?gpu_type=H100&min_memory_gb=16", { expect: 200 });
  await call("GET", "/api/v1/gpu/nodes?min_memory_gb=many", { expect: 400 });
  await call("GET", "/api/v1/gpu/nodes", { auth: WRONG, expect: 403 });

  await call("POST", "/api/v1/gpu/validate", { body: { memory_gb: 8, gpu_count: 2 }, expect: 200 });
  await call("POST", "/api/v1/gpu/validate", { body: { memory_gb: 500 }, expect: 200 });
  await call("POST", "/api/v1/gpu/validate", { body: { memory_gb: 8, shoe_size: 44 }, expect: 400 });
  await call("POST", "/api/v1/gpu/validate", { raw: "{nope", expect: 400 });
  await call("POST", "/api/v1/gpu/validate", { raw: JSON.stringify({ memory_gb: 1, label: "x".repeat(70000) }), expect: 413 });
  await call("POST", "/api/v1/gpu/validate", { body: { memory_gb: 1 }, auth: WRONG, expect: 403 });
  await call("GET", "/api/v1/gpu/validate", { expect: 405 });

  const g = await call("POST", "/api/v1/gpu/allocate", { auth: true, body: { memory_gb: 60, gpu_count: 2, label: "conform", ttl: 300 }, expect: 201 });
  const q = await call("POST", "/api/v1/gpu/allocate", { auth: true, body: { memory_gb: 30, timeout: 600, on_timeout: "wait" }, expect: 202 });
  await call("POST", "/api/v1/gpu/allocate", { auth: true, body: { memory_gb: 100 }, expect: 422 });
  await call("POST", "/api/v1/gpu/allocate", { auth: true, body: { memory_gb: 40, wait: false }, expect: 409 });
  await call("POST", "/api/v1/gpu/allocate", { auth: true, body: { memory_gb: "lots" }, expect: 400 });
  // Without a token, on loopback, the caller acts as the uid owning its socket (this test's,
  // which owns both ends): its allocation is its own (released below). A malformed
  // Authorization header is what still gets the 401.
  const mine = await call("POST", "/api/v1/gpu/allocate", { body: { memory_gb: 1 }, expect: 201 });
  await call("POST", "/api/v1/gpu/allocate", { header: BASIC, body: { memory_gb: 1 }, expect: 401 });
  await call("POST", "/api/v1/gpu/allocate", { auth: WRONG, body: { memory_gb: 1 }, expect: 403 });
  await call("POST", "/api/v1/gpu/allocate", { auth: true, raw: JSON.stringify({ memory_gb: 1, label: "y".repeat(70000) }), expect: 413 });
  const gid = g.json?.reservation?.id, qid = q.json?.reservation?.id;
  if (!gid || !qid) {
    fail("allocate did not return reservations; stopping");
    return;
  }

  await call("GET", "/api/v1/reservations", { expect: 200 });
  // Pages: the first (with ended) and the next by its cursor (without), the filters, 400s.
  const p1 = await call("GET", "/api/v1/reservations?limit=1", { expect: 200 });
  if (typeof p1.json?.next_cursor !== "string") fail("a page of 1 of several has no next_cursor");
  else await call("GET", `/api/v1/reservations?limit=1&cursor=${p1.json.next_cursor}`, { expect: 200 });
  await call("GET", "/api/v1/reservations?state=QUEUED,GRANTED&owner=0&label=x*", { expect: 200 });
  await call("GET", "/api/v1/reservations?limit=0", { expect: 400 });
  await call("GET", "/api/v1/reservations?cursor=nope", { expect: 400 });
  await call("GET", "/api/v1/reservations?state=RELEASED", { expect: 400 });
  await call("GET", "/api/v1/reservations?mine=1", { expect: 400 });
  await call("GET", "/api/v1/reservations", { auth: WRONG, expect: 403 });
  await call("GET", `/api/v1/reservations/${gid}`, { expect: 200 });
  await call("GET", `/api/v1/reservations/${qid}`, { expect: 200 });
  await call("GET", "/api/v1/reservations/r-424242", { expect: 404 });
  await call("GET", "/api/v1/reservations/banana", { expect: 400 });

  await call("POST", `/api/v1/reservations/${gid}/renew`, { auth: true, body: { ttl: 600 }, expect: 200 });
  await call("POST", `/api/v1/reservations/${gid}/renew`, { auth: true, expect: 200 });
  await call("POST", `/api/v1/reservations/${gid}/renew`, { auth: true, body: { ttl: -5 }, expect: 400 });
  await call("POST", `/api/v1/reservations/${gid}/renew`, { header: BASIC, expect: 401 });
  await call("POST", `/api/v1/reservations/${gid}/renew`, { auth: WRONG, expect: 403 });
  await call("POST", "/api/v1/reservations/r-424242/renew", { auth: true, expect: 404 });
  await call("GET", `/api/v1/reservations/${gid}/renew`, { expect: 405 });

  // Suspend and resume (docs/suspend.md): a preemptible job the shell started (SUSPEND_ID).
  const sid = process.env.SUSPEND_ID;
  if (!sid) fail("SUSPEND_ID is not set: the test starts a preemptible job for suspend/resume");
  const settled = async (state) => {
    for (let i = 0; i < 500; i++) {
      const r = await call("GET", `/api/v1/reservations/${sid}`, { expect: 200 });
      const doc = r.json?.reservation ?? r.json;
      if (doc?.state === state && !doc?.moving) return;
      await new Promise((ok) => setTimeout(ok, 20)); // a poll of gpumd, not a wait on time
    }
    fail(`${sid} did not become ${state}`);
  };
  await call("POST", `/api/v1/reservations/${sid}/suspend`, { auth: true, expect: 200 });
  await settled("SUSPENDED");
  await call("POST", `/api/v1/reservations/${sid}/suspend`, { auth: true, expect: 409 });
  await call("POST", `/api/v1/reservations/${sid}/resume`, { auth: true, expect: 200 });
  await settled("GRANTED");
  await call("POST", `/api/v1/reservations/${sid}/resume`, { auth: true, expect: 409 });
  await call("POST", `/api/v1/reservations/${gid}/suspend`, { auth: true, expect: 409 }); // not preemptible
  await call("POST", `/api/v1/reservations/${sid}/suspend`, { auth: true, body: { x: 1 }, expect: 400 });
  for (const op of ["suspend", "resume"]) {
    await call("POST", `/api/v1/reservations/${sid}/${op}`, { header: BASIC, expect: 401 });
    await call("POST", `/api/v1/reservations/${sid}/${op}`, { auth: WRONG, expect: 403 });
    await call("POST", `/api/v1/reservations/r-424242/${op}`, { auth: true, expect: 404 });
    await call("GET", `/api/v1/reservations/${sid}/${op}`, { expect: 405 });
  }

  await call("POST", "/api/v1/gpu/setup-pytorch", { body: { reservation: gid }, expect: 200 });
  await call("POST", "/api/v1/gpu/setup-pytorch", { body: { reservation: gid, master_port: 29600 }, expect: 200 });
  await call("POST", "/api/v1/gpu/setup-pytorch", { body: { reservation: qid }, expect: 409 });
  await call("POST", "/api/v1/gpu/setup-pytorch", { body: { reservation: "r-424242" }, expect: 404 });
  await call("POST", "/api/v1/gpu/setup-pytorch", { body: { reservation: gid, gpus: 2 }, expect: 400 });
  await call("POST", "/api/v1/gpu/setup-pytorch", { body: { reservation: gid }, auth: WRONG, expect: 403 });
  await call("POST", "/api/v1/gpu/setup-tensorflow", { body: { reservation: gid }, expect: 200 });
  await call("POST", "/api/v1/gpu/setup-tensorflow", { body: { reservation: qid }, expect: 409 });
  await call("POST", "/api/v1/gpu/setup-tensorflow", { body: { reservation: "r-424242" }, expect: 404 });
  await call("POST", "/api/v1/gpu/setup-tensorflow", { body: {}, expect: 400 });
  await call("POST", "/api/v1/gpu/setup-tensorflow", { body: { reservation: gid }, auth: WRONG, expect: 403 });

  await call("POST", "/api/v1/gpu/devices/1/disable", { auth: true, body: { reason: "conform" }, expect: 200 });
  await call("POST", "/api/v1/gpu/devices/1/disable", { header: BASIC, expect: 401 });
  await call("POST", "/api/v1/gpu/devices/1/disable", { auth: WRONG, expect: 403 });
  await call("POST", "/api/v1/gpu/devices/7/disable", { auth: true, expect: 404 });
  await call("POST", "/api/v1/gpu/devices/1/disable", { auth: true, body: { why: "x" }, expect: 400 });
  await call("GET", "/api/v1/gpu/devices/1/disable", { expect: 405 });
  await call("POST", "/api/v1/gpu/devices/1/enable", { auth: true, expect: 200 });
  await call("POST", "/api/v1/gpu/devices/1/enable", { header: BASIC, expect: 401 });
  await call("POST", "/api/v1/gpu/devices/1/enable", { auth: WRONG, expect: 403 });
  await call("POST", "/api/v1/gpu/devices/GPU-nope/enable", { auth: true, expect: 404 });
  await call("POST", "/api/v1/gpu/devices/1/enable", { auth: true, body: { reason: "x" }, expect: 400 });
  await call("GET", "/api/v1/gpu/devices/1/enable", { expect: 405 });

  await call("GET", "/api/v1/gpu/health", { expect: 200 });
  await call("GET", "/api/v1/gpu/health?deep=1", { expect: 400 });
  await call("GET", "/api/v1/gpu/health", { auth: WRONG, expect: 403 });
  await call("GET", "/api/v1/gpu/monitoring", { expect: 200 });
  await call("GET", "/api/v1/gpu/monitoring?window=2m", { expect: 200 });
  await call("GET", "/api/v1/gpu/monitoring?window=forever", { expect: 400 });
  await call("GET", "/api/v1/gpu/monitoring", { auth: WRONG, expect: 403 });
  await call("GET", "/api/v1/gpu/history", { expect: 200 });
  await call("GET", "/api/v1/gpu/history?window=30s", { expect: 200 });
  await call("HEAD", "/api/v1/gpu/history", { expect: 200 });
  await call("GET", "/api/v1/gpu/history?window=2h", { expect: 400 });
  await call("GET", "/api/v1/gpu/history?since=0", { expect: 400 });
  await call("GET", "/api/v1/gpu/history", { auth: WRONG, expect: 403 });
  await call("GET", "/api/v1/alerts", { expect: 200 });
  await call("GET", "/api/v1/alerts?limit=5", { expect: 200 });
  await call("GET", "/api/v1/alerts?limit=many", { expect: 400 });
  await call("GET", "/api/v1/alerts", { auth: WRONG, expect: 403 });
  await call("GET", "/api/v1/config", { expect: 200 });
  await call("GET", "/api/v1/config?secret=1", { expect: 400 });
  await call("GET", "/api/v1/config", { auth: WRONG, expect: 403 });
  // The dashboard: its page and files, their ETags (no token needed, even a wrong one is
  // ignored: the page holds no node data).
  const page = await call("GET", "/", { expect: 200 });
  await call("HEAD", "/", { expect: 200 });
  await call("GET", "/", { header: { "If-None-Match": page.headers.get("etag") }, expect: 304 });
  await call("POST", "/", { expect: 405 });
  const js = await call("GET", "/assets/app.js", { expect: 200 });
  await call("GET", "/assets/style.css", { expect: 200 });
  await call("GET", "/assets/icon.svg", { expect: 200 });
  await call("GET", "/assets/uPlot-LICENSE.txt", { expect: 200 });
  await call("GET", "/assets/app.js", { header: { "If-None-Match": js.headers.get("etag") }, expect: 304 });
  await call("GET", "/assets/nope.js", { expect: 404 });

  await call("GET", "/metrics", { expect: 200 });
  await call("GET", "/metrics", { auth: WRONG, expect: 403 });
  await openStream("/api/v1/events", null, 200);
  await openStream("/api/v1/events", WRONG, 403);
  await openStream("/api/v1/events?last_event_id=5", null, 200);

  await call("DELETE", `/api/v1/reservations/${qid}`, { header: BASIC, expect: 401 });
  await call("DELETE", `/api/v1/reservations/${mine.json?.reservation?.id}`, { expect: 200 });
  await call("DELETE", `/api/v1/reservations/${qid}`, { auth: WRONG, expect: 403 });
  await call("DELETE", `/api/v1/reservations/${qid}`, { auth: true, raw: "{\"force\": true}", expect: 400 });
  await call("DELETE", `/api/v1/reservations/${qid}`, { auth: true, expect: 200 });
  await call("DELETE", `/api/v1/reservations/${gid}`, { auth: true, expect: 200 });
  await call("DELETE", `/api/v1/reservations/${gid}`, { auth: true, expect: 404 });
  await call("GET", `/api/v1/reservations/${gid}`, { expect: 200 });
  await call("GET", "/api/v1/no/such/thing", { expect: 404 });

  // Every operation of the spec was seen with a success and an error.
  for (const [t, ops] of Object.entries(spec.paths))
    for (const m of Object.keys(ops).filter((k) => ["get", "post", "delete", "put", "patch"].includes(k))) {
      const key = `${m.toUpperCase()} ${t}`;
      const st = [...(seen.get(key) || [])];
      if (!st.some((s) => s < 300)) fail(`${key}: no success response checked`);
      const errors = Object.keys(ops[m].responses).some((s) => Number(s) >= 400);
      if (errors && !st.some((s) => s >= 400)) fail(`${key}: no error response checked`);
      const undocumented = Object.keys(ops[m].responses).filter((s) => !st.includes(Number(s)));
      console.log(`${key}: checked ${st.sort().join(", ")}${undocumented.length ? "; not provoked: " + undocumented.join(", ") : ""}`);
    }
}

async function unhealthyPhase() {
  await call("GET", "/api/v1/gpu/health", { expect: 503 });
  await call("GET", "/api/v1/gpu/status", { expect: 200 });
}

try {
  if (phase === "unhealthy") await unhealthyPhase();
  else await mainPhase();
} catch (e) {
  fail(`exception: ${e.stack || e}`);
}
if (failures.length) {
  console.error(`FAIL: ${failures.length} nonconforming responses:`);
  for (const f of failures) console.error("  " + f);
  process.exit(1);
}
console.log(`ok: every response of phase ${phase} conforms to ${specPath}`);
