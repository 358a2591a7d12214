// The curator's page: everything comes from the admin API with the key
// typed in (or passed as #key=... in the URL fragment, which is never sent
// to the server). Data is inserted with textContent only.
"use strict";

const $ = (id) => document.getElementById(id);
let key = "";

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

function fmt(x) {
  return Number(x).toLocaleString("en-US", { maximumFractionDigits: 6 });
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

async function revoke(keyID) {
  if (!confirm("Revoke key " + keyID + "?")) return;
  try {
    await api("DELETE", "/admin/v1/keys/" + encodeURIComponent(keyID));
    await load();
  } catch (e) {
    setStatus(e.message, true);
  }
}

async function load() {
  if (!key) {
    setStatus("Type the admin key.", false);
    return;
  }
  try {
    const [ds, as, qs, ak] = await Promise.all([
      api("GET", "/admin/v1/datasets"),
      api("GET", "/admin/v1/analysts"),
      api("GET", "/admin/v1/queries?limit=50"),
      api("GET", "/admin/v1/admin-keys"),
    ]);
    // The id of the key typed in: kdp_<id>_<secret>.
    const own = (/^kdp_([0-9a-f]{16})_/.exec(key) || [])[1];
    fill("admin-keys", ak.keys, (tr, k) => {
      cell(tr, k.id + (k.id === own ? " (this page)" : ""));
      cell(tr, k.created_at.replace("T", " ").replace(/\.\d+Z$/, ""));
      const st = cell(tr, k.revoked_at ? "revoked " + k.revoked_at.replace("T", " ").replace(/\.\d+Z$/, "") : "active");
      if (!k.revoked_at && k.id !== own) {
        const b = document.createElement("button");
        b.textContent = "revoke";
        b.addEventListener("click", () => revoke(k.id));
        st.appendChild(b);
      }
    });
    fill("datasets", ds.datasets, (tr, d) => {
      cell(tr, d.id);
      cell(tr, d.unavailable ? d.name + " (" + d.unavailable + ")" : d.name);
      cell(tr, fmt(d.rows), "num");
      cell(tr, fmt(d.cells), "num");
      cell(tr, d.invariants.map((c) => "{" + c.join(",") + "}").join(" ") || "none");
      cell(tr, d.generic_sensitivity, "num");
      cell(tr, fmt(d.epsilon_per_analyst), "num");
      cell(tr, d.analysts, "num");
      cell(tr, fmt(d.spent), "num");
      cell(tr, JSON.stringify(d.source));
    });
    fill("analysts", as.analysts, (tr, a) => {
      cell(tr, a.name);
      cell(tr, a.id);
      const keys = cell(tr, "");
      for (const k of a.keys) {
        const span = document.createElement("span");
        span.textContent = k.id;
        if (k.revoked_at) {
          span.className = "revoked";
        }
        keys.appendChild(span);
        if (!k.revoked_at) {
          const b = document.createElement("button");
          b.textContent = "revoke";
          b.addEventListener("click", () => revoke(k.id));
          keys.appendChild(b);
        }
        keys.appendChild(document.createElement("br"));
      }
      cell(tr, a.budgets.map((b) => b.dataset + ": " + fmt(b.spent) + " / " + fmt(b.total)).join("; ") || "nothing spent");
    });
    fill("queries", qs.queries, (tr, q) => {
      cell(tr, q.seq, "num");
      cell(tr, q.created_at.replace("T", " ").replace(/\.\d+Z$/, ""));
      cell(tr, q.analyst);
      cell(tr, q.dataset);
      cell(tr, q.kind);
      cell(tr, fmt(q.charged_epsilon), "num");
      cell(tr, fmt(q.spent_after_steps * Math.pow(2, -40)), "num");
    });
    setStatus("Loaded " + new Date().toISOString().replace("T", " ").slice(0, 19) + " UTC.", false);
    document.body.dataset.loaded = "yes";
  } catch (e) {
    setStatus(e.message, true);
  }
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
  $("new-analyst").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    try {
      const r = await api("POST", "/admin/v1/analysts", { name: $("analyst-name").value.trim() });
      const p = $("new-key");
      p.textContent = "API key for " + r.analyst.name + " (shown only now): " + r.api_key;
      p.hidden = false;
      $("analyst-name").value = "";
      await load();
    } catch (e) {
      setStatus(e.message, true);
    }
  });
  load();
});
