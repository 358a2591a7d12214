// The operator's console: everything comes from the admin API with the key
// typed in (or passed as #key=... in the URL fragment, which is never sent
// to the server). Data is inserted with textContent only.
"use strict";

const $ = (id) => document.getElementById(id);
const STEP = Math.pow(2, -40);
const SVG = "http://www.w3.org/2000/svg";
let key = "";
// The last lists loaded, for the forms' choices and the names of ids.
let analysts = [];
let datasets = [];

function setStatus(msg, error) {
  const s = $("status");
  s.textContent = msg;
  s.className = error ? "error" : "";
}

async function api(method, path, body) {
  const res = await fetch(path, {
    method,
    headers: { "Authorization": "Bearer " + key, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const data = await res.json();
  if (!res.ok) {
    throw new Error((data.error && data.error.message) || res.statusText);
  }
  return data;
}

function cell(row, text, cls) {
  const td = document.createElement("td");
  td.textContent = text;
  if (cls) td.className = cls;
  row.appendChild(td);
  return td;
}

function button(parent, text, onClick) {
  const b = document.createElement("button");
  b.type = "button";
  b.textContent = text;
  b.addEventListener("click", onClick);
  parent.appendChild(b);
  return b;
}

function fmt(x) {
  return Number(x).toLocaleString("en-US", { maximumFractionDigits: 6 });
}

function when(t) {
  return t.replace("T", " ").replace(/(\.\d+)?Z$/, "");
}

function fill(tableID, items, render) {
  const tbody = $(tableID).querySelector("tbody");
  tbody.replaceChildren();
  for (const it of items) {
    const tr = document.createElement("tr");
    render(tr, it);
    tbody.appendChild(tr);
  }
}

// options replaces a select's options, keeping its choice when it still exists.
function options(selectID, items, keepFirst) {
  const sel = $(selectID);
  const was = sel.value;
  const first = keepFirst ? [sel.options[0]] : [];
  sel.replaceChildren(...first);
  for (const [value, label] of items) {
    const o = document.createElement("option");
    o.value = value;
    o.textContent = label;
    sel.appendChild(o);
  }
  if ([...sel.options].some((o) => o.value === was)) sel.value = was;
}

// act runs an action and reloads, showing its error (in the element out, or
// the status line) if it fails.
async function act(f, out) {
  if (out) {
    out.textContent = "";
    out.className = "";
  }
  try {
    await f();
    await load();
  } catch (e) {
    if (out) {
      out.textContent = e.message;
      out.className = "error";
    } else {
      setStatus(e.message, true);
    }
  }
}

function revoke(keyID) {
  if (!confirm("Revoke key " + keyID + "? A revoked key stays revoked.")) return;
  act(() => api("DELETE", "/admin/v1/keys/" + encodeURIComponent(keyID)));
}

function setRetired(id, retired) {
  const question = retired
    ? "Retire dataset " + id + "? It will answer no new query; nothing is deleted (its ledger stays), and it can be put back in service."
    : "Put dataset " + id + " back in service?";
  if (!confirm(question)) return;
  act(() => api("PATCH", "/admin/v1/datasets/" + encodeURIComponent(id), { retired }));
}

function analystName(id) {
  const a = analysts.find((x) => x.id === id);
  return a ? a.name : id;
}

async function load() {
  if (!key) {
    setStatus("Type the admin key.", false);
    return;
  }
  try {
    const [ds, as, qs, ak, au] = await Promise.all([
      api("GET", "/admin/v1/datasets"),
      api("GET", "/admin/v1/analysts"),
      api("GET", "/admin/v1/queries?limit=50"),
      api("GET", "/admin/v1/admin-keys"),
      api("GET", "/admin/v1/audit?limit=200"),
    ]);
    datasets = ds.datasets;
    analysts = as.analysts;
    // The id of the key typed in: kdp_<id>_<secret>.
    const own = (/^kdp_([0-9a-f]{16})_/.exec(key) || [])[1];
    fill("admin-keys", ak.keys, (tr, k) => {
      cell(tr, k.id + (k.id === own ? " (this page)" : ""));
      cell(tr, when(k.created_at));
      const st = cell(tr, k.revoked_at ? "revoked " + when(k.revoked_at) : "active");
      if (!k.revoked_at && k.id !== own) button(st, "revoke", () => revoke(k.id));
    });
    fill("datasets", datasets, (tr, d) => {
      tr.dataset.id = d.id;
      cell(tr, d.id);
      cell(tr, d.name);
      const st = cell(tr, d.unavailable ? "unavailable: " + d.unavailable : d.retired_at ? "retired " + when(d.retired_at) : "in service");
      if (d.retired_at) {
        tr.className = "retired";
        button(st, "put back in service", () => setRetired(d.id, false));
      } else {
        button(st, "retire", () => setRetired(d.id, true));
      }
      cell(tr, fmt(d.rows), "num");
      cell(tr, fmt(d.cells), "num");
      cell(tr, d.invariants.map((c) => "{" + c.join(",") + "}").join(" ") || "none");
      cell(tr, d.generic_sensitivity, "num");
      cell(tr, d.rho_per_analyst ? fmt(d.rho_per_analyst) + " rho" : fmt(d.epsilon_per_analyst) + " epsilon", "num");
      cell(tr, d.analysts, "num");
      cell(tr, fmt(d.spent), "num");
      cell(tr, JSON.stringify(d.source));
    });
    const unit = (id) => {
      const d = datasets.find((x) => x.id === id);
      return d && d.rho_per_analyst ? "rho" : "epsilon";
    };
    fill("analysts", analysts, (tr, a) => {
      tr.dataset.id = a.id;
      cell(tr, a.name);
      cell(tr, a.id);
      const keys = cell(tr, "");
      for (const k of a.keys) {
        const span = document.createElement("span");
        span.textContent = k.id;
        if (k.revoked_at) span.className = "revoked";
        keys.appendChild(span);
        if (!k.revoked_at) button(keys, "revoke", () => revoke(k.id));
        keys.appendChild(document.createElement("br"));
      }
      cell(tr, a.budgets.map((b) => b.dataset + ": " + fmt(b.spent) + " / " + fmt(b.total) + " " + unit(b.dataset)).join("; ") || "nothing spent");
      const more = cell(tr, "");
      button(more, "new key", () => act(async () => {
        const r = await api("POST", "/admin/v1/analysts/" + encodeURIComponent(a.id) + "/keys");
        showSecret("New API key for " + a.name + " (shown only now): " + r.api_key);
      }));
      button(more, "spending", () => {
        $("spending-analyst").value = a.id;
        showSpending();
        $("sec-spending").scrollIntoView();
      });
    });
    fill("audit", au.events, (tr, e) => {
      cell(tr, e.seq, "num");
      cell(tr, when(e.created_at));
      cell(tr, e.actor === own ? e.actor + " (this page)" : e.actor || "(before the trail)");
      cell(tr, e.action);
      cell(tr, e.analyst_id ? analystName(e.analyst_id) : "");
      cell(tr, e.dataset || "");
      cell(tr, e.key_id || "");
      cell(tr, describe(e), "details");
    });
    fill("queries", qs.queries, (tr, q) => {
      cell(tr, q.seq, "num");
      cell(tr, when(q.created_at));
      cell(tr, q.analyst);
      cell(tr, q.dataset);
      cell(tr, q.kind);
      cell(tr, fmt(q.charged_steps * STEP) + " " + (q.unit || "epsilon"), "num");
      cell(tr, fmt(q.spent_after_steps * STEP), "num");
    });
    const analystChoices = analysts.map((a) => [a.id, a.name]);
    const datasetChoices = datasets.filter((d) => !d.unavailable).map((d) => [d.id, d.id + (d.retired_at ? " (retired)" : "")]);
    options("budget-analyst", analystChoices);
    options("budget-dataset", datasetChoices);
    options("spending-analyst", analystChoices);
    options("spending-dataset", datasetChoices, true);
    setStatus("Loaded " + new Date().toISOString().replace("T", " ").slice(0, 19) + " UTC.", false);
    document.body.dataset.loaded = "yes";
  } catch (e) {
    setStatus(e.message, true);
  }
}

// describe summarises an audit record's details.
function describe(e) {
  const d = e.details || {};
  if (e.action === "budget.changed") {
    let s = fmt(d.total_before) + " → " + fmt(d.total_after) + " " + d.unit + " (spent " + fmt(d.spent_steps * STEP) + ")";
    if (d.note) s += ": " + d.note;
    return s;
  }
  if (d.note) return d.note;
  if (e.action === "dataset.registered" && d.policy) return JSON.stringify(d.policy);
  if (e.action === "analyst.created" && d.name) return d.name;
  if (d.recorded_by) return "recorded by " + d.recorded_by;
  if (d.from) return d.from;
  return "";
}

function showSecret(text) {
  const p = $("new-key");
  p.textContent = text;
  p.hidden = false;
}

// The spending view: a chart of spent and total over time, and a table.
async function showSpending() {
  const analyst = $("spending-analyst").value;
  if (!analyst) return;
  const q = new URLSearchParams({ bucket: $("spending-bucket").value });
  if ($("spending-dataset").value) q.set("dataset", $("spending-dataset").value);
  const out = $("spending");
  try {
    const sp = await api("GET", "/admin/v1/analysts/" + encodeURIComponent(analyst) + "/spending?" + q);
    out.replaceChildren();
    const h = document.createElement("p");
    h.textContent = sp.datasets.length ? "Spending of " + sp.analyst.name + ", per " + (sp.bucket === "query" ? "answer or budget change" : sp.bucket) + " (UTC):"
      : sp.analyst.name + " has no budget on any dataset yet.";
    out.appendChild(h);
    for (const s of sp.datasets) {
      const fig = document.createElement("figure");
      fig.className = "spending";
      fig.dataset.dataset = s.dataset;
      const cap = document.createElement("figcaption");
      cap.textContent = s.dataset + ": spent " + fmt(s.budget.spent) + " of " + fmt(s.budget.total) + " " + s.unit +
        " (" + s.budget.spent_steps + " of " + s.budget.total_steps + " steps)" + (s.truncated ? "; older points left out" : "");
      fig.appendChild(cap);
      fig.appendChild(chart(s));
      const table = document.createElement("table");
      table.innerHTML = "<thead><tr><th>from (UTC)</th><th>answers</th><th>budget changes</th><th>charged</th><th>spent</th><th>total</th></tr></thead><tbody></tbody>";
      const tbody = table.querySelector("tbody");
      for (const p of s.points) {
        const tr = document.createElement("tr");
        cell(tr, when(p.start));
        cell(tr, p.queries, "num");
        cell(tr, p.budget_changes, "num");
        cell(tr, fmt(p.charged), "num");
        cell(tr, fmt(p.spent), "num");
        cell(tr, fmt(p.total), "num");
        tbody.appendChild(tr);
      }
      fig.appendChild(table);
      out.appendChild(fig);
    }
  } catch (e) {
    setStatus(e.message, true);
  }
}

// chart draws the budget's total (a line) and what was spent (filled) as
// step functions of time: each holds its value from a point to the next.
function chart(s) {
  const W = 640, H = 160, pad = 34;
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("viewBox", "0 0 " + W + " " + H);
  svg.setAttribute("width", W);
  svg.setAttribute("height", H);
  svg.setAttribute("role", "img");
  const ps = s.points;
  const top = Math.max(s.budget.total, ...ps.map((p) => p.total), 1e-12);
  const times = ps.map((p) => Date.parse(p.start));
  const t0 = Math.min(...times), t1 = Math.max(...times);
  const x = (i) => pad + (t1 > t0 ? ((times[i] - t0) * (W - 2 * pad)) / (t1 - t0) : 0);
  const y = (v) => H - pad + 10 - (v / top) * (H - pad - 10);
  const el = (name, attrs, text) => {
    const e = document.createElementNS(SVG, name);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    svg.appendChild(e);
    return e;
  };
  el("line", { x1: pad, y1: y(0), x2: W - pad, y2: y(0), class: "axis" });
  el("text", { x: 2, y: y(top) + 4, class: "tick" }, fmt(top));
  el("text", { x: 2, y: y(0) + 4, class: "tick" }, "0");
  if (ps.length) {
    const steps = (f) => {
      let d = "M" + x(0).toFixed(1) + " " + y(f(ps[0])).toFixed(1);
      for (let i = 1; i < ps.length; i++) d += " H" + x(i).toFixed(1) + " V" + y(f(ps[i])).toFixed(1);
      return d + " H" + (W - pad);
    };
    el("path", { d: steps((p) => p.spent) + " V" + y(0) + " H" + x(0).toFixed(1) + " Z", class: "spent" });
    el("path", { d: steps((p) => p.total), class: "total" });
    el("text", { x: pad, y: H - 4, class: "tick" }, when(ps[0].start));
    if (ps.length > 1) el("text", { x: W - pad, y: H - 4, class: "tick end" }, when(ps[ps.length - 1].start));
  }
  el("text", { x: W - pad, y: 12, class: "legend end" }, "line: total; filled: spent (" + s.unit + ")");
  return svg;
}

// register builds the registration request from the form.
function registration() {
  const kind = $("reg-kind").value;
  const path = $("reg-path").value.trim();
  const source = kind === "csv" ? { csv: path } : { sql: { driver: kind, dsn: path, table: $("reg-table").value.trim() } };
  if ($("reg-count").value.trim()) source.count_column = $("reg-count").value.trim();
  const budget = Number($("reg-budget").value);
  const policy = $("reg-unit").value === "rho" ? { rho_per_analyst: budget } : { epsilon_per_analyst: budget };
  const inv = $("reg-invariants").value.split(";").map((c) => c.split(",").map((n) => n.trim()).filter(Boolean)).filter((c) => c.length);
  if (inv.length) policy.invariants = inv;
  if ($("reg-sensitivity").value) policy.sensitivity = Number($("reg-sensitivity").value);
  let schema;
  try {
    schema = JSON.parse($("reg-schema").value);
  } catch (e) {
    throw new Error("schema: not JSON: " + e.message);
  }
  const req = { id: $("reg-id").value.trim(), schema, source, policy };
  if ($("reg-name").value.trim()) req.name = $("reg-name").value.trim();
  return req;
}

function sourceKindChanged() {
  const kind = $("reg-kind").value;
  $("reg-path-label").textContent = { csv: "CSV path", sqlite: "SQLite file", postgres: "PostgreSQL DSN" }[kind];
  $("reg-path").placeholder = { csv: "arrests.csv", sqlite: "arrests.db", postgres: "postgres://user@db.example.org/agency?sslmode=verify-full" }[kind];
  for (const e of document.querySelectorAll(".sql-only")) e.hidden = kind === "csv";
}

window.addEventListener("DOMContentLoaded", () => {
  const m = /(?:^|&)key=([^&]+)/.exec(location.hash.slice(1));
  if (m) {
    key = decodeURIComponent(m[1]);
    history.replaceState(null, "", location.pathname);
  } else {
    key = sessionStorage.getItem("knowdp-admin-key") || "";
  }
  $("key").value = key;
  $("login").addEventListener("submit", (ev) => {
    ev.preventDefault();
    key = $("key").value.trim();
    sessionStorage.setItem("knowdp-admin-key", key);
    load();
  });
  $("refresh").addEventListener("click", load);
  $("new-analyst").addEventListener("submit", (ev) => {
    ev.preventDefault();
    act(async () => {
      const r = await api("POST", "/admin/v1/analysts", { name: $("analyst-name").value.trim() });
      showSecret("API key for " + r.analyst.name + " (shown only now): " + r.api_key);
      $("analyst-name").value = "";
    });
  });
  $("issue-admin-key").addEventListener("click", () => act(async () => {
    const r = await api("POST", "/admin/v1/admin-keys");
    showSecret("New admin key (shown only now; revoke the old one once you use it): " + r.api_key);
  }));
  $("reg-kind").addEventListener("change", sourceKindChanged);
  sourceKindChanged();
  $("reg-schema-file").addEventListener("change", async () => {
    const f = $("reg-schema-file").files[0];
    if (f) $("reg-schema").value = await f.text();
  });
  $("register").addEventListener("submit", (ev) => {
    ev.preventDefault();
    act(async () => {
      const d = await api("POST", "/admin/v1/datasets", registration());
      $("register").reset();
      sourceKindChanged();
      $("register-result").textContent = "Registered " + d.id + ": " + fmt(d.rows) + " rows.";
    }, $("register-result"));
  });
  $("budget").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const result = $("budget-result");
    act(async () => {
      const body = {};
      body[$("budget-mode").value] = Number($("budget-amount").value);
      if ($("budget-note").value.trim()) body.note = $("budget-note").value.trim();
      const r = await api("PATCH", "/admin/v1/analysts/" + encodeURIComponent($("budget-analyst").value) +
        "/budgets/" + encodeURIComponent($("budget-dataset").value), body);
      const b = r.budget;
      result.textContent = analystName(b.analyst) + " on " + b.dataset + ": total " + fmt(b.total) + " " + b.unit +
        ", spent " + fmt(b.spent) + ", remaining " + fmt(b.remaining) + " (audit #" + r.event.seq + ")";
      $("budget-amount").value = "";
      $("budget-note").value = "";
    }, result);
  });
  $("spending-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    showSpending();
  });
  load();
});
