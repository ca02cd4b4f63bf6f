// SPDX-License-Identifier: Apache-2.0
// gpumd's dashboard (docs/dashboard.md). Plain JavaScript, no build step. On every (re)opening
// of the event stream it reads the node's state (status, health, reservations, alerts and the
// last hour of samples); then it follows /api/v1/events: samples extend the charts, the other
// events update the tables. The stream is read with fetch, not EventSource, so that it can carry
// the API token in a header when gpumd needs one; it reconnects by itself with Last-Event-ID.
"use strict";

(() => {
  const HOUR_S = 3600;
  const GAP_ROUNDS = 5; // monitor rounds without a sample that make a gap in the charts
  const GIB = 1024 ** 3;
  const TERMINAL = new Set(["RELEASED", "EXPIRED", "CANCELLED", "FAILED"]);
  // Endings that went wrong stay listed with their reason for ten minutes (as gpumd keeps them:
  // "ended" in the reservation list); a release or a cancel leaves the table at once.
  const KEPT_ENDED = new Set(["FAILED", "EXPIRED"]);
  const ENDED_KEEP_MS = 10 * 60 * 1000;
  // Terminal states rank 2; a suspended job goes back and forth with granted (docs/suspend.md).
  const RANK = { QUEUED: 0, GRANTED: 1, SUSPENDED: 1 };
  // Rows of the reservations table (and entries of the queue) drawn at once: a node of
  // thousands of reservations is read whole but shown a page at a time (the pager under it).
  const PAGE_ROWS = 100;

  // ---- state ---------------------------------------------------------------------------------

  const st = {
    node: null,
    devices: new Map(), // index -> {status, health, since_ns, series, charts, el}
    resv: new Map(), // id -> reservation
    alerts: new Map(), // id -> alert
    touched: new Map(), // "r:ID" / "a:ID" / "h:GPU" -> event sequence number
    seq: 0, // events received
    resvPage: 0, // the page of the reservations table shown (PAGE_ROWS each)
    historyMissing: false,
    intervalS: 1, // gpumd's monitor interval (the history says it)
  };

  const $ = (id) => document.getElementById(id);
  const rank = (s) => (s in RANK ? RANK[s] : 2);

  // ---- formatting ------------------------------------------------------------------------------

  function iec(bytes) {
    if (bytes === null || bytes === undefined || !Number.isFinite(bytes)) return "–";
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let v = Math.abs(bytes);
    let i = 0;
    while (v >= 1024 && i < units.length - 1) {
      v /= 1024;
      i++;
    }
    const s = i === 0 ? String(v) : v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2);
    return (bytes < 0 ? "-" : "") + s + " " + units[i];
  }

  function duration(ms) {
    if (!Number.isFinite(ms) || ms < 0) return "–";
    const s = Math.floor(ms / 1000);
    if (s < 60) return s + "s";
    const m = Math.floor(s / 60);
    if (m < 60) return m + "m " + (s % 60) + "s";
    const h = Math.floor(m / 60);
    if (h < 48) return h + "h " + (m % 60) + "m";
    return Math.floor(h / 24) + "d " + (h % 24) + "h";
  }

  const ageOf = (ns) => (ns ? duration(Date.now() - ns / 1e6) : "–");
  const clockOf = (ns) => (ns ? new Date(ns / 1e6).toLocaleTimeString() : "");

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null) continue;
      if (k === "class") e.className = v;
      else if (k === "text") e.textContent = v;
      else if (k === "testid") e.dataset.testid = v;
      else if (k === "style") Object.assign(e.style, v); // CSSOM: the CSP allows no style attribute
      else e.setAttribute(k, v);
    }
    for (const c of children) if (c !== null && c !== undefined) e.append(c);
    return e;
  }

  function say(text, isError) {
    const m = $("message");
    m.textContent = text;
    m.classList.toggle("error", Boolean(isError));
  }

  // ---- the token ---------------------------------------------------------------------------------

  const TOKEN_KEY = "gpum.token";
  const token = () => sessionStorage.getItem(TOKEN_KEY) || "";

  // Resolved when a token is entered (the stream waits on it after a cancelled dialog).
  let tokenWaiters = [];
  const nextToken = () => new Promise((resolve) => tokenWaiters.push(resolve));

  // Asks for the token in the dialog; resolves to the token entered ("" when cancelled). One
  // dialog at a time: a second ask while it is open gets the same answer.
  let pendingAsk = null;
  function askToken(why) {
    if (pendingAsk) return pendingAsk;
    const dlg = $("token-dialog");
    $("token-why").textContent = why;
    $("token-input").value = "";
    pendingAsk = new Promise((resolve) => {
      const done = (value) => {
        $("token-ok").onclick = null;
        $("token-cancel").onclick = null;
        $("token-input").onkeydown = null;
        dlg.onclose = null;
        if (dlg.open) dlg.close();
        pendingAsk = null;
        if (value) {
          sessionStorage.setItem(TOKEN_KEY, value);
          for (const w of tokenWaiters) w();
          tokenWaiters = [];
        }
        resolve(value);
      };
      $("token-ok").onclick = () => done($("token-input").value.trim());
      $("token-cancel").onclick = () => done("");
      $("token-input").onkeydown = (e) => {
        if (e.key === "Enter") done($("token-input").value.trim());
      };
      dlg.onclose = () => done("");
      dlg.showModal();
      $("token-input").focus();
    });
    return pendingAsk;
  }

  function headers() {
    const t = token();
    return t ? { Authorization: "Bearer " + t } : {};
  }

  // GET path as JSON. A 401 (gpumd on a non-loopback address: reads need the token) asks for
  // the token once and retries. Resolves to {status, body}.
  // The reservation list comes in pages (docs/rest.md): every page, in one body with the
  // first page's ended. A failed page answers as that page did.
  async function getReservations() {
    const first = await getJSON("/api/v1/reservations?limit=10000");
    if (first.status !== 200 || !first.body) return first;
    const all = [...(first.body.reservations || [])];
    for (let cur = first.body.next_cursor; cur; ) {
      const page = await getJSON("/api/v1/reservations?limit=10000&cursor=" + encodeURIComponent(cur));
      if (page.status !== 200 || !page.body) return page;
      all.push(...(page.body.reservations || []));
      cur = page.body.next_cursor;
    }
    return { status: 200, body: { ...first.body, reservations: all, next_cursor: null } };
  }

  async function getJSON(path) {
    for (let attempt = 0; ; attempt++) {
      const r = await fetch(path, { headers: headers(), cache: "no-store" });
      if ((r.status === 401 || r.status === 403) && attempt === 0) {
        sessionStorage.removeItem(TOKEN_KEY);
        const t = await askToken("gpumd listens on a network address: reading needs its API token " +
          "(gpum http-token shows it). It is kept in this tab only.");
        if (t) continue;
      }
      let body = null;
      try {
        body = await r.json();
      } catch {
        body = null;
      }
      return { status: r.status, body };
    }
  }

  // ---- GPUs and their charts ---------------------------------------------------------------------

  function cssVar(name) {
    return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  }

  function newSeries() {
    // Columns as uPlot wants them: x (seconds), then one array per line.
    return { t: [], used: [], reserved: [], unmanaged: [], committed: [], total: [], cap: [], util: [], temp: [], power: [] };
  }

  function deviceOf(index) {
    let d = st.devices.get(index);
    if (!d) {
      d = { index, status: null, health: null, since_ns: 0, series: newSeries(), charts: [], el: null, expanded: false };
      st.devices.set(index, d);
    }
    return d;
  }

  function addPoint(d, tMs, used, reserved, unmanaged, total, util, temp, powerMw, cap) {
    const s = d.series;
    const t = tMs / 1000;
    const last = s.t.length ? s.t[s.t.length - 1] : -Infinity;
    if (t <= last) return false; // replayed or older: have it
    // Samples missing for a while (gpumd down, the device silent): a gap, not a straight line.
    if (t - last > GAP_ROUNDS * st.intervalS) {
      s.t.push(last + st.intervalS / 2);
      for (const k of Object.keys(s)) if (k !== "t") s[k].push(null);
    }
    s.t.push(t);
    s.used.push(used);
    s.reserved.push(reserved);
    s.unmanaged.push(unmanaged);
    s.committed.push(reserved === null && unmanaged === null ? null : (reserved || 0) + (unmanaged || 0));
    s.total.push(total);
    s.cap.push(cap ?? null);
    s.util.push(util);
    s.temp.push(temp);
    s.power.push(powerMw === null || powerMw === undefined ? null : powerMw / 1000);
    let drop = 0;
    while (drop < s.t.length && s.t[drop] < t - HOUR_S) drop++;
    if (drop) for (const k of Object.keys(s)) s[k].splice(0, drop);
    return true;
  }

  const LEGEND_PX = 30; // the box holds the plot and its one-line legend: no jump

  function chartSize(box) {
    return { width: Math.max(200, box.clientWidth), height: Math.max(80, box.clientHeight - LEGEND_PX) };
  }

  // The plot takes the box's height less its legend's (one line: style.css lets it scroll
  // sideways on a narrow screen rather than wrap).
  function fitChart(c) {
    c.setSize(chartSize(c.root.parentElement));
  }

  // The newest non-null value of arr (what a legend shows when the cursor is not on the chart:
  // uPlot would show "--").
  function lastOf(arr) {
    for (let i = arr.length - 1; i >= 0; i--) if (arr[i] !== null && arr[i] !== undefined) return arr[i];
    return null;
  }

  // A legend value: the point under the cursor, else the newest one. col() reads the column
  // (d.series is replaced when the history is read again).
  const legendValue = (col, fmt) => (u, v, si, i) => fmt(i === null || i === undefined ? lastOf(col()) : col()[i]);

  // Axes whose labels keep apart: uPlot drops ticks closer than `space` px (time labels are
  // about 60 px wide).
  // The labels are the clock's time on one line (uPlot's default adds a date line, cut at the
  // left edge of a narrow chart), with seconds when the ticks are under a minute apart.
  const xAxis = () => ({ stroke: cssVar("--muted"), grid: { stroke: cssVar("--line") }, ticks: { stroke: cssVar("--line") },
    space: 90, values: (u, ticks) => {
      const secs = ticks.length > 1 && ticks[1] - ticks[0] < 60;
      const f = { hour: "2-digit", minute: "2-digit", ...(secs ? { second: "2-digit" } : {}) };
      return ticks.map((t) => new Date(t * 1000).toLocaleTimeString([], f));
    } });

  const byteIncrs = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512].flatMap((m) => [m * 2 ** 20, m * GIB])
    .sort((a, b) => a - b);

  function memChart(d, box) {
    const fmt = (v) => (v === null || v === undefined ? "–" : iec(v));
    const opts = {
      ...chartSize(box),
      cursor: { drag: { x: false, y: false } },
      scales: { x: { time: true }, y: { range: (u, min, max) => [0, Math.max(max, 1 * GIB)] } },
      axes: [
        xAxis(),
        {
          stroke: cssVar("--muted"), grid: { stroke: cssVar("--line") }, ticks: { stroke: cssVar("--line") },
          size: 72, space: 28, incrs: byteIncrs, values: (u, vals) => vals.map((v) => iec(v)),
        },
      ],
      series: [
        timeSeries(d),
        // Stacked: "reserved" is drawn at unmanaged + reserved, over the unmanaged band.
        { label: "reserved", stroke: cssVar("--reserved"), fill: cssVar("--reserved") + "55", width: 1,
          value: legendValue(() => d.series.reserved, fmt) },
        { label: "unmanaged", stroke: cssVar("--unmanaged"), fill: cssVar("--unmanaged") + "88", width: 1,
          value: legendValue(() => d.series.unmanaged, fmt) },
        { label: "used", stroke: cssVar("--used"), width: 2, value: legendValue(() => d.series.used, fmt) },
        // What gpumd may commit (the total less its headroom), not the bare total.
        { label: "capacity", stroke: cssVar("--muted"), width: 1, dash: [4, 4], value: legendValue(() => d.series.cap, fmt) },
      ],
      legend: { live: true },
    };
    const s = d.series;
    return new uPlot(opts, [s.t, s.committed, s.unmanaged, s.used, s.cap], box);
  }

  // The x series in the legend: the time of the point under the cursor, else the newest.
  const timeSeries = (d) => ({ value: legendValue(() => d.series.t,
    (t) => (t === null || t === undefined ? "–" : new Date(t * 1000).toLocaleTimeString())) });

  const num0 = (v) => (v === null || v === undefined ? "–" : String(Math.round(v)));

  function loadChart(d, box) {
    const opts = {
      ...chartSize(box),
      cursor: { drag: { x: false, y: false } },
      scales: { x: { time: true }, pct: { range: [0, 100] }, w: { range: (u, min, max) => [0, Math.max(max, 100)] } },
      axes: [
        xAxis(),
        { scale: "pct", stroke: cssVar("--muted"), grid: { stroke: cssVar("--line") }, ticks: { stroke: cssVar("--line") },
          size: 40, space: 24 },
        { scale: "w", side: 1, stroke: cssVar("--muted"), grid: { show: false }, ticks: { stroke: cssVar("--line") },
          size: 48, space: 24, values: (u, vals) => vals.map((v) => v + " W") },
      ],
      series: [
        timeSeries(d),
        { label: "util %", scale: "pct", stroke: cssVar("--util"), width: 2, value: legendValue(() => d.series.util, num0) },
        { label: "temp °C", scale: "pct", stroke: cssVar("--temp"), width: 1, value: legendValue(() => d.series.temp, num0) },
        { label: "power W", scale: "w", stroke: cssVar("--power"), width: 1, value: legendValue(() => d.series.power, num0) },
      ],
    };
    const s = d.series;
    return new uPlot(opts, [s.t, s.util, s.temp, s.power], box);
  }

  // A node of COMPACT_FROM GPUs or more shows a row per GPU (memory bar, utilisation,
  // temperature, state); a click on a row opens its card.
  const COMPACT_FROM = 8;

  function buildCard(d) {
    const i = d.index;
    const fig = (name, key) => el("div", {}, el("dt", { text: name }), el("dd", { testid: `gpu-${key}-${i}`, text: "–" }));
    const memBox = el("div", { class: "chart", testid: `gpu-mem-chart-${i}` });
    const loadBox = el("div", { class: "chart small", testid: `gpu-load-chart-${i}` });
    const row = el("button", { type: "button", class: "gpu-row", testid: `gpu-row-${i}`, "aria-expanded": "false",
      title: "Show or hide this GPU's card" },
    el("span", { class: "row-name", testid: `gpu-row-name-${i}`, text: `GPU ${i}` }),
    el("span", { class: "membar", testid: `gpu-row-bar-${i}` },
      el("span", { class: "m-committed" }), el("span", { class: "m-used" })),
    el("span", { class: "row-mem num", testid: `gpu-row-mem-${i}`, text: "–" }),
    el("span", { class: "row-util num", testid: `gpu-row-util-${i}`, text: "–" }),
    el("span", { class: "row-temp num", testid: `gpu-row-temp-${i}`, text: "–" }),
    el("span", { class: "state", testid: `gpu-row-state-${i}`, text: "…" }));
    const card = el("article", { class: "gpu", testid: `gpu-${i}` },
      row,
      el("div", { class: "gpu-details", testid: `gpu-details-${i}` },
        el("div", { class: "gpu-head" },
          el("span", { class: "gpu-name", testid: `gpu-name-${i}`, text: `GPU ${i}` }),
          el("span", { class: "state", testid: `gpu-state-${i}`, text: "…" })),
        el("p", { class: "reason", testid: `gpu-reason-${i}` }),
        el("dl", { class: "figures" },
          el("div", { class: "wide" }, el("dt", { text: "can grant" }),
            el("dd", { testid: `gpu-grantable-${i}`, text: "–" })), fig("used", "used"), fig("reserved", "reserved"),
          fig("unmanaged", "unmanaged"), fig("total", "total"), fig("utilisation", "util"),
          fig("temperature", "temp"), fig("power", "power"), fig("jobs", "jobs")),
        el("p", { class: "chart-title", text: "memory: reserved and unmanaged stacked, used, capacity (last hour)" }),
        memBox,
        el("p", { class: "chart-title", text: "utilisation, temperature, power" }),
        loadBox,
        el("p", { class: "chart-title", text: "processes" }),
        el("div", { class: "procs-wrap", testid: `gpu-procs-${i}` })));
    row.addEventListener("click", () => {
      d.expanded = !d.expanded;
      card.classList.toggle("expanded", d.expanded);
      row.setAttribute("aria-expanded", String(d.expanded));
    });
    d.el = card;
    d.memBox = memBox;
    d.loadBox = loadBox;
    // Inserted in index order.
    const box = $("gpus");
    const after = [...box.children].find((c) => Number(c.dataset.index) > i);
    card.dataset.index = String(i);
    box.insertBefore(card, after || null);
    box.classList.toggle("compact", st.devices.size >= COMPACT_FROM);
    makeCharts(d);
    new ResizeObserver(() => {
      for (const c of d.charts) fitChart(c);
    }).observe(memBox);
  }

  // The processes on the GPU as nvitop lists them: pid, user, command, memory and whose it is.
  const PROC_ROWS = 8;
  function renderProcs(d) {
    const i = d.index;
    const box = d.el.querySelector(".procs-wrap");
    const procs = (d.status && d.status.processes) || null;
    if (!procs || !procs.length) {
      const text = procs ? "No process." : "–";
      if (box.textContent !== text) box.replaceChildren(el("p", { class: "empty", text }));
      return;
    }
    const head = el("tr", {}, ...["pid", "user", "command", "memory", "reservation"].map((h) =>
      el("th", { scope: "col", text: h })));
    const rows = procs.slice(0, PROC_ROWS).map((p) => el("tr", { testid: `proc-${i}-${p.pid}` },
      el("td", { class: "num", text: String(p.pid) }),
      el("td", { testid: `proc-user-${i}-${p.pid}`, text: userOf(p) }),
      el("td", { class: "cmd", title: p.command || "", text: p.command || "?" }),
      el("td", { class: "num", text: iec(p.memory) }),
      el("td", { class: p.reservation ? "" : "unmanaged", text: p.reservation || "unmanaged" })));
    const table = el("table", { class: "procs" }, el("thead", {}, head), el("tbody", {}, ...rows));
    const more = procs.length > PROC_ROWS ? el("p", { class: "muted", text: `and ${procs.length - PROC_ROWS} more` }) : null;
    box.replaceChildren(...[table, more].filter(Boolean));
  }

  // A process's owner: its user name, or its uid until gpumd knows the name (or when it has none).
  function userOf(p) {
    if (p.user) return p.user;
    return p.uid === null || p.uid === undefined ? "?" : String(p.uid);
  }

  function makeCharts(d) {
    for (const c of d.charts) c.destroy();
    d.charts = [memChart(d, d.memBox), loadChart(d, d.loadBox)];
    for (const c of d.charts) fitChart(c);
  }

  function redrawCharts(d) {
    const s = d.series;
    if (!d.charts.length) return;
    d.charts[0].setData([s.t, s.committed, s.unmanaged, s.used, s.cap]);
    d.charts[1].setData([s.t, s.util, s.temp, s.power]);
    // What the chart holds, for tests and the curious: points and the newest used bytes.
    d.memBox.dataset.points = String(s.t.length);
    d.memBox.dataset.lastUsed = s.t.length ? String(s.used[s.t.length - 1]) : "";
  }

  function setText(testid, text) {
    const e = document.querySelector(`[data-testid="${testid}"]`);
    if (e && e.textContent !== text) e.textContent = text;
  }

  // On a node of several vendors: which runtime drives the GPU and its number there (what
  // rocm-smi, ROCR_VISIBLE_DEVICES or ZE_AFFINITY_MASK call it).
  function vendorNote(s) {
    const vendors = new Set();
    for (const o of st.devices.values()) if (o.status && o.status.vendor) vendors.add(o.status.vendor);
    if (vendors.size < 2 || !s.vendor) return "";
    return ` (${s.vendor} ${s.vendor_index ?? "?"})`;
  }

  function renderDevice(d) {
    if (!d.el) buildCard(d);
    const i = d.index;
    const s = d.status || {};
    const h = d.health || {};
    let state = h.state || s.state || "…";
    let reason = h.reason !== undefined ? h.reason : s.reason || "";
    // Committed memory over the capacity: only gpumd knows (ERROR and DISABLED say more).
    if ((s.overcommit || 0) > 0 && (state === "AVAILABLE" || state === "BUSY")) {
      state = "OVERCOMMITTED";
      reason = `committed ${iec(s.committed)} is ${iec(s.overcommit)} over its capacity of ` +
        `${iec(s.capacity)}: memory taken outside reservations after they were granted`;
    }
    d.el.className = "gpu gpu-" + state + (d.expanded ? " expanded" : "");
    for (const badge of d.el.querySelectorAll(".state")) {
      badge.className = "state state-" + state;
      badge.textContent = state;
    }
    d.el.dataset.state = state;
    setText(`gpu-reason-${i}`, reason);
    setText(`gpu-name-${i}`, `GPU ${i}` + (s.name ? " · " + s.name : "") + vendorNote(s));
    const sr = d.series;
    const n = sr.t.length - 1;
    const last = (k) => (n >= 0 ? sr[k][n] : null);
    const mem = s.memory || {};
    setText(`gpu-used-${i}`, iec(last("used") ?? mem.used));
    setText(`gpu-total-${i}`, iec(last("total") ?? mem.total));
    setText(`gpu-reserved-${i}`, iec(s.reserved ?? last("reserved")));
    setText(`gpu-unmanaged-${i}`, iec(s.unmanaged ?? last("unmanaged")));
    // A device in ERROR (lost, hung) is not measured: its last values would look like a healthy
    // idle GPU. They are shown unknown until it answers again.
    const measured = state !== "ERROR";
    const util = measured ? last("util") : null;
    const temp = measured ? last("temp") : null;
    const power = measured ? last("power") : null;
    setText(`gpu-util-${i}`, util === null ? "–" : util + " %");
    setText(`gpu-temp-${i}`, temp === null ? "–" : temp + " °C");
    setText(`gpu-power-${i}`, power === null ? "–" : power.toFixed(0) + " W");
    setText(`gpu-jobs-${i}`, s.jobs === undefined ? "–" : String(s.jobs));
    // What gpumd can still grant: its capacity less what is committed (the newest figures:
    // a sample's, else the status's).
    const grant = grantableOf(s);
    setText(`gpu-grantable-${i}`, grant === null ? "–" : `${iec(grant)} of ${iec(s.capacity)}`);
    // The compact row.
    const total = last("total") ?? mem.total;
    const used = last("used") ?? mem.used;
    setText(`gpu-row-name-${i}`, `GPU ${i}` + (s.name ? " · " + s.name : ""));
    // What the bar shows, in words: the room gpumd has left ("Which GPU is full?").
    setText(`gpu-row-mem-${i}`, grant === null ? "–" : `can grant ${iec(grant)}`);
    setText(`gpu-row-util-${i}`, util === null ? "–" : util + " %");
    setText(`gpu-row-temp-${i}`, temp === null ? "–" : temp + " °C");
    const pct = (v) => (total > 0 && v !== null && v !== undefined ? Math.min(100, (100 * v) / total).toFixed(1) + "%" : "0%");
    const bar = d.el.querySelector(".membar");
    bar.querySelector(".m-committed").style.width = pct((s.reserved ?? 0) + (s.unmanaged ?? 0));
    bar.querySelector(".m-used").style.width = pct(used);
    bar.title = `used ${iec(used)}, committed ${iec((s.reserved ?? 0) + (s.unmanaged ?? 0))}, can grant ${iec(grant)}`;
    renderProcs(d);
    renderSummary();
  }

  function grantableOf(s) {
    if (Number.isFinite(s.capacity) && Number.isFinite(s.committed)) return Math.max(0, s.capacity - s.committed);
    return Number.isFinite(s.grantable) ? s.grantable : null;
  }

  // ---- the summary at the top ----------------------------------------------------------------

  const WELL = new Set(["AVAILABLE", "BUSY"]);
  function renderSummary() {
    const devs = [...st.devices.values()].filter((d) => d.el);
    const bad = devs.filter((d) => d.el.dataset.state && d.el.dataset.state !== "…" && !WELL.has(d.el.dataset.state));
    const health = $("summary-health");
    health.textContent = !devs.length ? "–" : bad.length === 0 ? `All ${devs.length} GPUs well` :
      `${bad.length} of ${devs.length} GPUs in trouble: ` + bad.map((d) => `GPU ${d.index} ${d.el.dataset.state}`).join(", ");
    health.className = "sum " + (bad.length ? "sum-bad" : "sum-ok");
    let grant = 0;
    for (const d of devs) if (WELL.has(d.el.dataset.state)) grant += grantableOf(d.status || {}) || 0;
    setText("summary-grant", devs.length ? `can grant ${iec(grant)}` : "–");
    let queued = 0;
    for (const r of st.resv.values()) if (r.state === "QUEUED") queued++;
    setText("summary-queue", queued ? `${queued.toLocaleString("en")} waiting` : "nothing waits");
    const active = [...st.alerts.values()].filter((a) => a.state === "active");
    const serious = active.filter((a) => a.level === "ERROR" || a.level === "CRITICAL").length;
    const alerts = $("summary-alerts");
    alerts.textContent = active.length ? `${active.length} active alert${active.length > 1 ? "s" : ""}` : "no active alert";
    alerts.className = "sum " + (serious ? "sum-bad" : active.length ? "sum-warn" : "sum-ok");
  }

  function onSample(e) {
    const d = deviceOf(e.gpu);
    // memory_reserved / memory_unmanaged: in the sample since the history endpoint; from the
    // latest status otherwise.
    const s = d.status || {};
    const reserved = e.memory_reserved ?? s.reserved ?? null;
    const unmanaged = e.memory_unmanaged ?? s.unmanaged ?? null;
    // The newest figures win, the sample's or the last status read's.
    if (d.status && d.status.memory) d.status.memory.used = e.memory_used ?? d.status.memory.used;
    if (d.status && e.memory_reserved !== undefined) d.status.reserved = e.memory_reserved;
    if (d.status && e.memory_unmanaged !== undefined) d.status.unmanaged = e.memory_unmanaged;
    if (d.status && e.memory_overcommit !== undefined) {
      d.status.overcommit = e.memory_overcommit;
      if (e.memory_capacity !== undefined) d.status.capacity = e.memory_capacity;
      if (reserved !== null && unmanaged !== null) d.status.committed = reserved + unmanaged;
    }
    addPoint(d, e.time_ns / 1e6, e.memory_used ?? null, reserved, unmanaged, e.memory_total ?? null,
      e.utilization_gpu ?? null, e.temperature ?? null, e.power ?? null, e.memory_capacity ?? s.capacity ?? null);
    if (d.el) redrawCharts(d);
    renderDevice(d);
  }

  // ---- reservations ----------------------------------------------------------------------------

  // queue_position: 0 is the head; shown from 1.
  const qpos = (r) => (Number.isInteger(r.queue_position) ? r.queue_position + 1 : "?");

  // A time since ns that moves on with the clock (start() updates every [data-since]).
  const ageSpan = (ns) => el("span", { class: "num", "data-since": String(ns || 0), text: ageOf(ns) });

  function ownerOf(r) {
    return r.uid === 0 ? "root" : r.uid === undefined ? "–" : "uid " + r.uid;
  }

  // The job's own figures (workload reports, docs/report.md): over its processes' sources, the
  // pools' allocated and cached bytes summed, the largest peak (a pool's, or a batch runner's
  // peak_bytes) and fragmentation, OOMs and OOM retries summed (a pool's alloc_retries, a
  // batch runner's oom_retries), the batch size a runner (or a custom source) reports.
  function workloadOf(r) {
    const w = { allocated: 0, cached: 0, peak: 0, frag: null, ooms: 0, retries: 0, batch: null, any: false };
    const known = ["allocated_bytes", "cached_bytes", "allocated_peak_bytes", "peak_bytes", "fragmentation_ratio",
      "ooms", "alloc_retries", "oom_retries", "batch_size"];
    for (const src of r.workload || []) {
      const f = src.figures || {};
      if (known.some((k) => k in f)) w.any = true;
      w.allocated += f.allocated_bytes || 0;
      w.cached += f.cached_bytes || 0;
      w.peak = Math.max(w.peak, f.allocated_peak_bytes || 0, f.peak_bytes || 0);
      if (f.fragmentation_ratio !== undefined) w.frag = Math.max(w.frag ?? 0, f.fragmentation_ratio);
      w.ooms += f.ooms || 0;
      w.retries += (f.alloc_retries || 0) + (f.oom_retries || 0);
      if (f.batch_size !== undefined) w.batch = f.batch_size;
    }
    return w;
  }

  function workloadCell(r) {
    const w = workloadOf(r);
    if (!w.any) return el("span", { class: "muted", text: "no report" });
    const limit = r.bytes_per_gpu || 1;
    const pct = (v) => Math.min(100, (100 * v) / limit).toFixed(1) + "%";
    const bar = el("div", { class: "bar", testid: `workload-bar-${r.id}`,
      title: "allocated (dark) and cached (light) against the reservation's limit; red: peak" },
    el("span", { class: "cached", style: { width: pct(w.allocated + w.cached) } }),
    el("span", { class: "alloc", style: { width: pct(w.allocated) } }),
    el("span", { class: "peak", style: { left: pct(w.peak) } }));
    const parts = [`allocated ${iec(w.allocated)}`, `cached ${iec(w.cached)}`, `peak ${iec(w.peak)}`];
    if (w.frag !== null) parts.push(`fragmentation ${(100 * w.frag).toFixed(0)}%`);
    parts.push(`OOMs ${w.ooms}`, `OOM retries ${w.retries}`);
    if (w.batch !== null) parts.push(`batch ${w.batch}`);
    const more = otherFigures(r);
    return el("div", {}, bar, el("div", { class: "workload-text", testid: `workload-${r.id}`, text: parts.join(" · ") }),
      more ? el("div", { class: "workload-text", testid: `workload-more-${r.id}`, text: more }) : null);
  }

  // The figures of the job's reports other than those drawn above (a batcher's queue and latency
  // percentiles, custom ones), each with the unit gpumd read from its name ("units": libgpum's
  // gpum_figure_unit, so the page does not repeat the rule; a count without it).
  const DRAWN = new Set(["allocated_bytes", "cached_bytes", "allocated_peak_bytes", "peak_bytes", "fragmentation_ratio",
    "ooms", "alloc_retries", "oom_retries", "batch_size", "limit_bytes"]);
  function otherFigures(r) {
    const parts = [];
    for (const src of r.workload || []) {
      const units = src.units || {};
      for (const [name, v] of Object.entries(src.figures || {})) {
        if (DRAWN.has(name)) continue;
        const u = units[name] || { unit: "count", scale: 1 };
        parts.push(`${u.name || name} ${figure(v * (u.scale ?? 1), u.unit)}`);
      }
    }
    return parts.join(" · ");
  }

  // A value in its unit's base as people read it (gpum_value_format's rules, gpum/size.h).
  function figure(v, unit) {
    if (!Number.isFinite(v)) return "–";
    const sig = (x) => (Math.abs(x) >= 100 ? x.toFixed(0) : Math.abs(x) >= 10 ? x.toFixed(1) : x.toFixed(2));
    switch (unit) {
      case "bytes":
        return iec(v);
      case "seconds": {
        const a = Math.abs(v);
        if (a === 0) return "0 s";
        if (a < 1e-6) return sig(v * 1e9) + " ns";
        if (a < 1e-3) return sig(v * 1e6) + " µs";
        if (a < 1) return sig(v * 1e3) + " ms";
        return a < 100 ? sig(v) + " s" : duration(v * 1000);
      }
      case "ratio":
        return (100 * v).toFixed(1) + "%";
      case "per_second":
        return count(v) + "/s";
      default:
        return count(v);
    }
  }

  function count(v) {
    const a = Math.abs(v);
    if (a >= 1e6) return (v / 1e6).toFixed(2) + "M";
    if (a >= 1e4) return (v / 1e3).toFixed(1) + "k";
    return Number.isInteger(v) ? String(v) : v.toFixed(2);
  }

  // A "workload" event: one process's report on a reservation; the page keeps the newest of
  // each (pid, source), as gpumd does.
  function onWorkload(e) {
    const r = st.resv.get(e.reservation);
    if (!r) return;
    const list = (r.workload || []).filter((w) => !(w.pid === e.pid && w.source === e.source));
    list.push({ pid: e.pid, source: e.source, age_ms: 0, figures: e.figures || {}, units: e.units || {} });
    r.workload = list;
    renderReservations();
  }

  // A Slurm step's reservation (gpum_spank.so): its job and step ids under the label.
  function slurmLine(r) {
    if (!r.slurm) return null;
    return el("div", { class: "workload-text", testid: `resv-slurm-${r.id}`,
      text: `job ${r.slurm.job_id}.${r.slurm.step_id}` });
  }

  const COLUMNS = ["id", "owner", "label", "GPUs", "limit", "used (shim)", "state", "age", "queue", "inside the job", ""];

  function renderReservations() {
    const body = $("resv-body");
    const cutoff = Date.now() - ENDED_KEEP_MS;
    for (const [id, r] of st.resv)
      if (TERMINAL.has(r.state) && (r.ended_ns || 0) / 1e6 < cutoff) st.resv.delete(id);
    const rows = [...st.resv.values()].sort((a, b) => rank(b.state) - rank(a.state) ||
      (a.queue_position ?? 0) - (b.queue_position ?? 0) || (a.created_ns || 0) - (b.created_ns || 0));
    const pages = Math.max(1, Math.ceil(rows.length / PAGE_ROWS));
    st.resvPage = Math.min(st.resvPage, pages - 1);
    const first = st.resvPage * PAGE_ROWS;
    const shown = rows.slice(first, first + PAGE_ROWS);
    const old = new Map([...body.children].map((tr) => [tr.dataset.id, tr]));
    for (const r of shown) {
      const gpus = (r.devices || []).map((x) => x.index).join(",") || `${r.gpus} (any)`;
      const fenced = r.fenced ? `${iec(r.fenced.used)} / ${iec(r.fenced.limit)}` : "not fenced";
      const queued = r.state === "QUEUED";
      const ended = TERMINAL.has(r.state);
      const cells = [
        el("td", { text: r.id }),
        el("td", { text: ownerOf(r) }),
        el("td", {}, r.label || "", slurmLine(r)),
        el("td", { text: gpus }),
        el("td", { class: "num", text: iec(r.bytes_per_gpu) + (r.gpus > 1 ? ` × ${r.gpus}` : "") }),
        el("td", { class: "num", text: fenced }),
        el("td", {}, el("span", { class: "state state-" + r.state, testid: `resv-state-${r.id}`,
          text: r.state + (r.moving ? ` · ${r.moving}` : "") })),
        el("td", { class: "num" }, ageSpan(r.created_ns)),
        el("td", {}, queued ? `#${qpos(r)} · waiting ` : "", queued ? ageSpan(r.created_ns) : "",
          r.state === "SUSPENDED" ? el("span", { testid: `resv-suspended-${r.id}`,
            text: `${iec(r.host_bytes || 0)} in host memory · ${r.hold ? "until resumed" : "resumes when there is room"}` }) : "",
          ended ? el("span", { class: "ended-reason", testid: `resv-reason-${r.id}`, text: r.reason || "" }) : ""),
        el("td", { class: "workload" }, ended ? "" : workloadCell(r)),
        el("td", {}, ended ? "" : el("button", { type: "button", class: "danger", testid: `release-${r.id}`, "data-id": r.id,
          text: queued ? "Cancel" : "Release" })),
      ];
      // Each cell names its column: on a phone the rows are cards (style.css), one line a cell.
      cells.forEach((td, k) => (td.dataset.label = COLUMNS[k]));
      let tr = old.get(r.id);
      old.delete(r.id);
      if (!tr) tr = el("tr", { "data-id": r.id, testid: `resv-${r.id}` });
      tr.className = ended ? "ended" : "";
      tr.replaceChildren(...cells);
      body.append(tr); // in sorted order
    }
    for (const tr of old.values()) tr.remove();
    $("resv-empty").hidden = rows.length > 0;
    $("resv-pager").hidden = rows.length <= PAGE_ROWS;
    const n = (v) => v.toLocaleString("en");
    $("resv-range").textContent = `${n(first + 1)}–${n(first + shown.length)} of ${n(rows.length)} reservations`;
    $("resv-prev").disabled = st.resvPage === 0;
    $("resv-next").disabled = st.resvPage >= pages - 1;

    const q = $("queue");
    const queued = rows.filter((r) => r.state === "QUEUED");
    const head = queued.slice(0, PAGE_ROWS).map((r) => el("li", { testid: `queue-${r.id}` },
      `#${qpos(r)} ${r.id} · ${r.label || ""} · ${iec(r.bytes_per_gpu)} × ${r.gpus} · ${ownerOf(r)} · waiting `,
      ageSpan(r.created_ns), r.waiting_for ? ` · ${r.waiting_for}` : ""));
    if (queued.length > PAGE_ROWS)
      head.push(el("li", { class: "muted more", testid: "queue-more",
        text: `and ${(queued.length - PAGE_ROWS).toLocaleString("en")} more waiting` }));
    q.replaceChildren(...head);
    $("queue-empty").hidden = queued.length > 0;
    renderSummary();
  }

  // A reservation as an event or a list shows it; never taken back to an earlier state.
  function mergeReservation(r, fromEvent) {
    const old = st.resv.get(r.id);
    if (old && rank(old.state) > rank(r.state)) return;
    if (fromEvent) st.touched.set("r:" + r.id, st.seq);
    if (TERMINAL.has(r.state) && !KEPT_ENDED.has(r.state)) st.resv.delete(r.id);
    else st.resv.set(r.id, { ...old, ...r, ended_ns: r.ended_ns || (TERMINAL.has(r.state) ? Date.now() * 1e6 : 0) });
  }

  async function release(id) {
    const r = st.resv.get(id);
    if (!r) return;
    let t = token();
    if (!t) t = await askToken(`Releasing ${id} needs gpumd's API token (gpum http-token shows it). ` +
      "It is kept in this tab only.");
    const res = await fetch(`/api/v1/reservations/${encodeURIComponent(id)}`, {
      method: "DELETE", headers: t ? { Authorization: "Bearer " + t } : {},
    });
    let body = null;
    try {
      body = await res.json();
    } catch {
      body = null;
    }
    const why = body && body.error ? body.error.message : "";
    if (res.ok) {
      say(`${id}: ${body.reservation.state.toLowerCase()}`, false);
      mergeReservation(body.reservation, true);
      renderReservations();
    } else if (res.status === 401 || res.status === 403) {
      if (res.status === 403) sessionStorage.removeItem(TOKEN_KEY);
      say(`Release of ${id} refused (${res.status} ${res.status === 401 ? "no token" : "wrong token"}): ${why}`, true);
    } else {
      say(`Release of ${id} failed (${res.status}): ${why}`, true);
    }
  }

  // ---- alerts --------------------------------------------------------------------------------------

  function mergeAlert(a, fromEvent) {
    const old = st.alerts.get(a.id);
    if (old && old.state === "cleared" && a.state !== "cleared") return;
    if (fromEvent) st.touched.set("a:" + a.id, st.seq);
    const rest = { ...a };
    delete rest.event; // "fired" / "cleared": the event's, not the alert's
    st.alerts.set(a.id, { ...old, ...rest });
  }

  function renderAlerts() {
    const list = [...st.alerts.values()].sort((a, b) => (b.fired_ns || 0) - (a.fired_ns || 0)).slice(0, 100);
    $("alerts").replaceChildren(...list.map((a) => el("li", {
      class: `level-${a.level} ${a.state}`, testid: `alert-${a.id}`, "data-level": a.level, "data-state": a.state,
    }, el("span", { class: "when", text: clockOf(a.fired_ns) + (a.state === "cleared" ? " · cleared" : "") }),
    el("span", { class: `level level-${a.level}`, text: a.level }),
    a.message || a.rule_text || "")));
    $("alerts-empty").hidden = list.length > 0;
    renderSummary();
  }

  // ---- snapshots -----------------------------------------------------------------------------------

  // Applies /status (and /health) to the devices.
  function applyStatus(body, health, since) {
    st.node = body.node;
    $("host").textContent = body.node ? "· " + body.node.hostname : "";
    for (const dev of body.devices || []) {
      const d = deviceOf(dev.index);
      d.status = dev;
    }
    for (const h of (health && health.devices) || []) {
      const d = deviceOf(h.index);
      const t = st.touched.get("h:" + h.index);
      if (t !== undefined && t > since && d.since_ns > (h.since_ns || 0)) continue; // an event is newer
      d.health = { state: h.state, reason: h.reason };
      d.since_ns = h.since_ns || 0;
    }
    for (const d of st.devices.values()) renderDevice(d);
  }

  function applyHistory(body) {
    if (body.interval_ms > 0) st.intervalS = body.interval_ms / 1000;
    const f = body.fields || [];
    const col = (name) => f.indexOf(name);
    const c = ["t", "memory_used", "memory_reserved", "memory_unmanaged", "memory_total", "utilization_gpu",
      "temperature", "power"].map(col);
    for (const dev of body.devices || []) {
      const d = deviceOf(dev.index);
      const live = d.series;
      d.series = newSeries();
      const v = (p, k) => (c[k] >= 0 && p[c[k]] !== undefined ? p[c[k]] : null);
      const points = dev.points || [];
      const first = points.length ? v(points[0], 0) / 1000 : Infinity;
      const keep = (i) => addPoint(d, live.t[i] * 1000, live.used[i], live.reserved[i], live.unmanaged[i],
        live.total[i], live.util[i], live.temp[i], live.power[i] === null ? null : live.power[i] * 1000, live.cap[i]);
      // The history has no capacity column: the status's (it moves only with the options).
      const cap = d.status && Number.isFinite(d.status.capacity) ? d.status.capacity : null;
      // The page's points older than the history (a gpumd restarted: its history starts
      // anew), the history, then the page's points newer than it.
      for (let i = 0; i < live.t.length && live.t[i] < first; i++) keep(i);
      for (const p of points) addPoint(d, v(p, 0), v(p, 1), v(p, 2), v(p, 3), v(p, 4), v(p, 5), v(p, 6), v(p, 7), cap ?? v(p, 4));
      for (let i = 0; i < live.t.length; i++) keep(i);
      if (d.el) redrawCharts(d);
    }
  }

  let refreshing = null;
  let refreshAgain = false;

  // Reads the whole state. Events received meanwhile are applied as they come; a snapshot does
  // not overwrite what an event received after its request said (st.touched).
  async function refreshAll() {
    if (refreshing) {
      refreshAgain = true;
      return refreshing;
    }
    refreshing = (async () => {
      const since = st.seq;
      const [status, health, resv, alerts, hist] = await Promise.all([
        getJSON("/api/v1/gpu/status"), getJSON("/api/v1/gpu/health"), getReservations(),
        getJSON("/api/v1/alerts?limit=100"), getJSON("/api/v1/gpu/history?window=1h"),
      ]);
      if (status.status === 200) applyStatus(status.body, health.body, since);
      if (hist.status === 200) applyHistory(hist.body);
      st.historyMissing = hist.status !== 200;
      if (resv.status === 200) applyReservations(resv.body, since);
      if (alerts.status === 200) {
        const fresh = new Map();
        for (const a of [...(alerts.body.history || []), ...(alerts.body.active || [])]) fresh.set(a.id, a);
        for (const [id, a] of st.alerts) if ((st.touched.get("a:" + id) ?? -1) > since && !fresh.has(id)) fresh.set(id, a);
        st.alerts = new Map();
        for (const a of fresh.values()) mergeAlert(a, false);
        renderAlerts();
      }
      for (const d of st.devices.values()) renderDevice(d);
      if ([status, resv, alerts].some((r) => r.status === 401 || r.status === 403))
        say("gpumd refused to read without the right API token (Token button).", true);
    })();
    try {
      await refreshing;
    } finally {
      refreshing = null;
      if (refreshAgain) {
        refreshAgain = false;
        refreshAll();
      }
    }
  }

  function applyReservations(body, since) {
    const fresh = new Map();
    for (const r of body.ended || []) if (KEPT_ENDED.has(r.state)) fresh.set(r.id, r);
    for (const r of body.reservations || []) fresh.set(r.id, r);
    // Reservations an event told about after the request went out: the event may be newer.
    for (const [id, r] of st.resv)
      if ((st.touched.get("r:" + id) ?? -1) > since) {
        const f = fresh.get(id);
        if (!f || rank(f.state) < rank(r.state)) fresh.set(id, { ...f, ...r });
      }
    const ended = [...st.touched.entries()].filter(([k, v]) => k.startsWith("r:") && v > since && !st.resv.has(k.slice(2)));
    for (const [k] of ended) fresh.delete(k.slice(2));
    st.resv = new Map();
    for (const r of fresh.values()) mergeReservation(r, false);
    renderReservations();
  }

  // A reservation's used/fenced memory and its workload reports change without an event of
  // their own: while some reservation is granted, the list is read again at most every 2 s,
  // on the sample events (no timer of its own).
  // What changes without an event: granted reservations' used memory, the processes on the
  // GPUs and their owners' names (gpumd resolves them after a first status shows the uid).
  function needsReread() {
    if ([...st.resv.values()].some((r) => r.state === "GRANTED")) return true;
    for (const d of st.devices.values()) {
      const s = d.status || {};
      if ((s.processes && s.processes.length) || (s.unmanaged || 0) > 0) return true;
    }
    return false;
  }

  let lastResvRead = 0;
  let resvTimer = null;
  async function readReservations() {
    lastResvRead = Date.now();
    const since = st.seq;
    const [resv, status] = await Promise.all([getReservations(), getJSON("/api/v1/gpu/status")]);
    if (resv.status === 200) applyReservations(resv.body, since);
    if (status.status === 200) {
      for (const dev of status.body.devices || []) deviceOf(dev.index).status = dev;
      for (const d of st.devices.values()) renderDevice(d);
    }
  }
  function soonReadReservations(delayMs) {
    if (resvTimer) return;
    resvTimer = setTimeout(() => {
      resvTimer = null;
      readReservations().catch(() => {});
    }, delayMs);
  }

  // ---- the event stream ------------------------------------------------------------------------------

  function setConn(state, text) {
    const c = $("conn");
    c.dataset.state = state;
    c.textContent = text;
  }

  function onEvent(type, data) {
    let e;
    try {
      e = JSON.parse(data);
    } catch {
      return;
    }
    st.seq++;
    switch (type) {
      case "sample":
        onSample(e);
        if (Date.now() - lastResvRead > 2000 && needsReread()) soonReadReservations(0);
        break;
      case "reservation":
        if (e.reservation) mergeReservation(e.reservation, true);
        renderReservations();
        soonReadReservations(150); // the queue positions of the others, the devices' figures
        break;
      case "alert":
        mergeAlert(e, true);
        renderAlerts();
        break;
      case "health": {
        const d = deviceOf(e.gpu);
        st.touched.set("h:" + e.gpu, st.seq);
        if ((e.time_ns || 0) >= d.since_ns) {
          d.health = { state: e.to, reason: e.reason };
          d.since_ns = e.time_ns || 0;
        }
        renderDevice(d);
        break;
      }
      case "workload":
        onWorkload(e);
        break;
      case "reset":
        refreshAll().catch(() => {});
        break;
      default:
        break;
    }
  }

  // Reads the SSE stream with fetch: the token goes in a header, Last-Event-ID on reconnects.
  async function streamLoop() {
    let lastId = "";
    let retryMs = 2000;
    let failures = 0;
    for (;;) {
      // gpumd sends a comment every 15 s: a stream silent for 45 s is dead (a peer gone
      // without a close) and is opened again.
      const ac = new AbortController();
      let idle = setTimeout(() => ac.abort(), 45000);
      try {
        const h = headers();
        if (lastId) h["Last-Event-ID"] = lastId;
        const res = await fetch("/api/v1/events", { headers: h, cache: "no-store", signal: ac.signal });
        if (res.status === 401 || res.status === 403) {
          setConn("down", "token needed");
          const wrong = res.status === 403;
          sessionStorage.removeItem(TOKEN_KEY);
          const t = await askToken((wrong ? "That token is wrong. " : "") + "gpumd listens on a network " +
            "address: showing anything needs its API token (gpum http-token shows it). It is kept in this tab only.");
          if (!t) {
            say("gpumd needs its API token to show this node (Token button).", true);
            await nextToken();
          }
          say("", false);
          continue;
        }
        if (!res.ok || !res.body) throw new Error("status " + res.status);
        failures = 0;
        setConn("live", "live");
        // On every opening: a fresh state (after a gpumd restart the events missed are gone;
        // the `reset` event says so too where gpumd sends it).
        refreshAll().catch(() => {});
        const reader = res.body.getReader();
        const dec = new TextDecoder();
        let buf = "";
        let type = "";
        let data = [];
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          clearTimeout(idle);
          idle = setTimeout(() => ac.abort(), 45000);
          buf += dec.decode(value, { stream: true });
          let nl;
          while ((nl = buf.search(/\r\n|\n|\r/)) >= 0) {
            const line = buf.slice(0, nl);
            buf = buf.slice(nl + (buf.startsWith("\r\n", nl) ? 2 : 1));
            if (line === "") {
              if (data.length) onEvent(type || "message", data.join("\n"));
              type = "";
              data = [];
              continue;
            }
            if (line.startsWith(":")) continue;
            const colon = line.indexOf(":");
            const field = colon < 0 ? line : line.slice(0, colon);
            let value = colon < 0 ? "" : line.slice(colon + 1);
            if (value.startsWith(" ")) value = value.slice(1);
            if (field === "event") type = value;
            else if (field === "data") data.push(value);
            else if (field === "id" && !value.includes("\0")) lastId = value;
            else if (field === "retry" && /^\d+$/.test(value)) retryMs = Number(value);
          }
        }
      } catch {
        // gpumd went away or refused: try again below.
      } finally {
        clearTimeout(idle);
      }
      failures++;
      setConn("down", "reconnecting");
      await new Promise((r) => setTimeout(r, Math.min(retryMs * failures, 10000)));
      setConn("connecting", "connecting");
    }
  }

  // ---- theme, buttons, clock ------------------------------------------------------------------------

  function applyTheme(theme) {
    document.documentElement.dataset.theme = theme;
    for (const d of st.devices.values()) if (d.el) makeCharts(d);
  }

  function start() {
    const saved = localStorage.getItem("gpum.theme");
    const dark = window.matchMedia("(prefers-color-scheme: dark)");
    applyTheme(saved || (dark.matches ? "dark" : "light"));
    dark.addEventListener("change", (e) => {
      if (!localStorage.getItem("gpum.theme")) applyTheme(e.matches ? "dark" : "light");
    });
    $("theme-button").addEventListener("click", () => {
      const next = document.documentElement.dataset.theme === "dark" ? "light" : "dark";
      localStorage.setItem("gpum.theme", next);
      applyTheme(next);
    });
    $("token-button").addEventListener("click", async () => {
      const t = await askToken("gpumd's API token (gpum http-token shows it) for releasing " +
        "reservations, and for reading when gpumd listens on a network address. It is kept in this tab only.");
      say(t ? "Token set for this tab." : "", false);
    });
    $("resv-body").addEventListener("click", (e) => {
      const b = e.target.closest("button[data-id]");
      if (b) release(b.dataset.id).catch((err) => say(`Release failed: ${err.message}`, true));
    });
    for (const [id, step] of [["resv-prev", -1], ["resv-next", 1]])
      $(id).addEventListener("click", () => {
        st.resvPage = Math.max(0, st.resvPage + step);
        renderReservations();
      });
    // Ages and waiting times move on with the clock (no request: just the text).
    setInterval(() => {
      for (const e of document.querySelectorAll("[data-since]")) e.textContent = ageOf(Number(e.dataset.since));
    }, 1000);
    streamLoop();
  }

  if (typeof uPlot === "undefined") {
    say("The chart library did not load.", true);
    return;
  }
  start();
})();
