// polite's dashboard. Plain JavaScript, no framework and no build step: it listens to
// /dashboard/events (server-sent events, one "tick" a second carrying the header's figures
// and the page of hosts asked for) and edits delays through PUT /delays/{host}.
// Everything from the network goes into the page as text (textContent), never as markup.
"use strict";

(function () {
  const $ = (id) => document.getElementById(id);
  const view = { sort: "last_seen", order: "desc", q: "", state: "all", offset: 0, limit: 50 };
  let source = null;
  let editing = null; // the host whose delay is being edited: its row is left alone
  let lastTotal = 0;
  const COLORS = { "2xx": "#2f9e5b", "3xx": "#3b7dd8", "4xx": "#d99a1e", "5xx": "#d64545",
                   "refused": "#8a63d2", "1xx": "#999" };

  // -- formatting ---------------------------------------------------------------------
  function num(n) { return (n || 0).toLocaleString("en-US"); }
  function duration(ms) {
    if (ms < 1000) return Math.round(ms) + " ms";
    const s = ms / 1000;
    if (s < 60) return (s < 10 ? s.toFixed(1) : Math.round(s)) + " s";
    if (s < 3600) return Math.floor(s / 60) + " min " + Math.floor(s % 60) + " s";
    if (s < 86400) return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
    return Math.floor(s / 86400) + " d " + Math.floor((s % 86400) / 3600) + " h";
  }
  function ago(t, now) { return t ? duration(Math.max(0, now - t) * 1000) + " ago" : "never"; }
  function clock(t) { return new Date(t * 1000).toLocaleTimeString("en-GB"); }
  function bytes(n) {
    if (n < 1024) return n + " B";
    if (n < 1048576) return (n / 1024).toFixed(1) + " KiB";
    return (n / 1048576).toFixed(1) + " MiB";
  }
  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }
  function count(td, n) {
    td.textContent = num(n);
    td.classList.toggle("zero", !n);
  }

  // -- the header ---------------------------------------------------------------------
  function renderSummary(s) {
    const node = s.node;
    $("where").textContent = "node " + node.node + " · store " + (s.store || "?") +
      " · mode " + (s.mode || "?") + " · agent " + s.agent;
    $("rps-now").textContent = node.rpsNow.toFixed(1);
    $("rps-avg").textContent = node.rpsAverage.toFixed(2);
    $("requests").textContent = num(node.requests);
    const d = node.decisions || {};
    $("d-allowed").textContent = num(d.allowed);
    $("d-robots").textContent = num(d.robots);
    $("d-delay").textContent = num(d.delay);
    $("d-cache").textContent = num(d.cache);
    $("queued").textContent = num(node.queued);
    $("in-flight").textContent = num(node.inFlight);
    if (s.cache) {
      $("hit-ratio").textContent = (s.cache.hitRatio * 100).toFixed(1) + " %";
      $("cache-sub").textContent = num(s.cache.hits) + " hits · " + num(s.cache.misses) +
        " misses · " + num(s.cache.revalidations) + " revalidated · " + num(s.cache.pages) +
        " pages, " + bytes(s.cache.bytes);
    } else {
      $("hit-ratio").textContent = "off";
      $("cache-sub").textContent = "the page cache is off (--no-cache)";
    }
    $("store").textContent = (s.store || "") + " · " + s.nodes.length +
      (s.nodes.length === 1 ? " node" : " nodes") + " sharing it";
    const body = $("nodes");
    body.replaceChildren();
    for (const n of s.nodes) {
      const tr = el("tr");
      tr.append(el("td", n.name === node.node ? "host" : "", n.name),
        el("td", "num", (n.rpsNow || 0).toFixed(1)), el("td", "num", num(n.requests)),
        el("td", "num", num(n.queued)), el("td", "num", num(n.inFlight)),
        el("td", "", n.started ? clock(n.started) : "?"));
      body.append(tr);
    }
    renderChart(s.timeline);
  }

  function renderChart(timeline) {
    const svg = $("chart");
    const ns = "http://www.w3.org/2000/svg";
    const kinds = ["2xx", "3xx", "4xx", "5xx", "refused"];
    let peak = 1;
    for (const second of timeline) {
      let sum = 0;
      for (const k of kinds) sum += second[k] || 0;
      peak = Math.max(peak, sum);
    }
    svg.replaceChildren();
    const width = 480 / timeline.length;
    timeline.forEach((second, i) => {
      let y = 90;
      for (const k of kinds) {
        const n = second[k] || 0;
        if (!n) continue;
        const h = (n / peak) * 84;
        y -= h;
        const rect = document.createElementNS(ns, "rect");
        rect.setAttribute("x", String(i * width));
        rect.setAttribute("y", String(y));
        rect.setAttribute("width", String(Math.max(width - 0.6, 0.6)));
        rect.setAttribute("height", String(h));
        rect.setAttribute("fill", COLORS[k]);
        const title = document.createElementNS(ns, "title");
        title.textContent = clock(second.t) + ": " + n + " × " + k;
        rect.append(title);
        svg.append(rect);
      }
    });
    const top = document.createElementNS(ns, "text");
    top.setAttribute("x", "2");
    top.setAttribute("y", "10");
    top.setAttribute("font-size", "9");
    top.setAttribute("fill", "#687385");
    top.textContent = "peak " + peak + "/s";
    svg.append(top);
    const legend = $("legend");
    if (!legend.childElementCount) {
      for (const k of kinds) {
        const swatch = el("i");
        swatch.style.background = COLORS[k];
        legend.append(swatch, document.createTextNode(k));
      }
    }
  }

  // -- the hosts ----------------------------------------------------------------------
  function robotsCell(td, r, now) {
    td.replaceChildren();
    if (!r) {
      td.append(el("span", "badge", "not fetched"));
      return;
    }
    const code = String(r.code);
    const kind = /^2/.test(code) ? (code.includes("stale") ? "warn" : "ok")
      : /^(4|HTML)/.test(code) && r.kind === "AllowAll" ? "info" : "bad";
    const badge = el("span", "badge " + kind, code);
    if (r.reason) badge.title = r.reason;
    td.append(badge);
    if (r.kind === "Parsed") td.append(document.createTextNode(" " + bytes(r.size)));
    if (r.issues) {
      const issues = el("span", "issues", " · " + r.issues + (r.issues === 1 ? " issue" : " issues"));
      issues.title = r.issueLines.join("\n") + (r.issues > r.issueLines.length ? "\n…" : "");
      td.append(issues);
    }
    const when = el("span", "small", "fetched " + ago(r.fetchedAt, now) + " · " +
      (r.expiresAt > now ? "expires in " + duration((r.expiresAt - now) * 1000)
                         : "expired"));
    td.append(when);
    if (r.reason) td.append(el("span", "small", r.reason));
  }

  function delayCell(td, row) {
    td.replaceChildren();
    td.className = "delay num";
    td.append(document.createTextNode(duration(row.delayMs) + " "));
    const kind = row.delaySource === "back-off" ? "warn"
      : row.delaySource === "operator" ? "info" : "";
    td.append(el("span", "badge " + kind, row.delaySource));
    const edit = el("button", "edit", "✎");
    edit.type = "button";
    edit.title = "set the operator's delay for " + row.host;
    edit.setAttribute("aria-label", "edit delay of " + row.host);
    edit.dataset.host = row.host;
    edit.addEventListener("click", () => openEditor(td, row));
    td.append(edit);
    if (row.configuredMs !== null && row.delaySource !== "operator") {
      td.append(el("span", "small", "operator: " + duration(row.configuredMs)));
    }
  }

  function openEditor(td, row) {
    editing = row.host;
    td.replaceChildren();
    const box = el("span", "editor");
    const input = el("input");
    input.type = "number";
    input.min = "0";
    input.step = "100";
    input.value = String(row.configuredMs !== null ? row.configuredMs : row.delayMs);
    input.setAttribute("aria-label", "delay in ms for " + row.host);
    const save = el("button", "save", "Save");
    save.type = "button";
    const reset = el("button", "reset", "Clear");
    reset.type = "button";
    reset.title = "forget the operator's delay: the site's own and the default apply";
    const cancel = el("button", "cancel", "×");
    cancel.type = "button";
    box.append(input, document.createTextNode(" ms"), save, reset, cancel);
    td.append(box);
    input.focus();
    input.select();
    const close = () => { editing = null; delayCell(td, row); };
    save.addEventListener("click", () => setDelay(row.host, input.value).then((ok) => ok && close()));
    reset.addEventListener("click", () => clearDelay(row.host).then((ok) => ok && close()));
    cancel.addEventListener("click", close);
    input.addEventListener("keydown", (e) => {
      if (e.key === "Enter") save.click();
      if (e.key === "Escape") close();
    });
  }

  function authHeaders() {
    const token = sessionStorage.getItem("polite-admin-token") || $("token").value;
    return token ? { "Authorization": "Bearer " + token } : {};
  }

  function flash(text, error) {
    const f = $("flash");
    f.textContent = text;
    f.classList.toggle("error", !!error);
    clearTimeout(flash.timer);
    flash.timer = setTimeout(() => { f.textContent = ""; }, 6000);
  }

  async function write(method, host, body) {
    const response = await fetch("/delays/" + encodeURIComponent(host), {
      method, headers: Object.assign({ "Content-Type": "application/json" }, authHeaders()),
      body: body === undefined ? undefined : JSON.stringify(body) });
    if (response.status === 401) {
      $("token-box").hidden = false;
      $("token").focus();
      flash("this server needs its admin token for writes: enter it and try again", true);
      return false;
    }
    if (!response.ok) {
      let message = response.statusText;
      try { message = (await response.json()).error || message; } catch (e) { /* text */ }
      flash("not saved: " + message, true);
      return false;
    }
    if ($("token").value) sessionStorage.setItem("polite-admin-token", $("token").value);
    return true;
  }

  async function setDelay(host, value) {
    const ms = Number(value);
    if (!Number.isInteger(ms) || ms < 0) {
      flash("a delay is a whole number of milliseconds, 0 or more", true);
      return false;
    }
    const ok = await write("PUT", host, { delay: ms });
    if (ok) flash("delay for " + host + " set to " + duration(ms) + ", in force now");
    return ok;
  }

  async function clearDelay(host) {
    const ok = await write("DELETE", host);
    if (ok) flash("the operator's delay for " + host + " is cleared");
    return ok;
  }

  const rowsByHost = new Map();

  function renderHosts(page) {
    const now = page.now;
    lastTotal = page.total;
    $("known").textContent = num(page.known);
    const first = page.total ? page.offset + 1 : 0;
    $("range").textContent = num(first) + "–" + num(page.offset + page.rows.length) +
      " of " + num(page.total);
    $("prev").disabled = page.offset === 0;
    $("next").disabled = page.offset + page.limit >= page.total;
    $("empty").hidden = page.rows.length > 0;
    const body = $("rows");
    const seen = new Set();
    page.rows.forEach((row, i) => {
      seen.add(row.host);
      let tr = rowsByHost.get(row.host);
      if (!tr) {
        tr = el("tr");
        for (let c = 0; c < 11; c++) tr.append(el("td"));
        rowsByHost.set(row.host, tr);
      }
      tr.dataset.host = row.host;
      tr.classList.toggle("backoff", !!row.backoff);
      const td = tr.children;
      td[0].replaceChildren(el("span", "host", row.host), el("span", "small", row.origin));
      td[0].className = "";
      robotsCell(td[1], row.robots, now);
      if (editing !== row.host) delayCell(td[2], row);
      td[3].className = "num wakes";
      td[3].textContent = row.wakesInMs > 0 ? duration(row.wakesInMs) : "now";
      td[3].classList.toggle("wake-now", row.wakesInMs <= 0);
      td[4].replaceChildren();
      td[4].className = "backoff-cell";
      if (row.backoff) {
        td[4].append(el("span", "backoff-text", "until " + clock(row.backoff.until) +
          " (" + duration((row.backoff.until - now) * 1000) + ")"),
          el("span", "small", row.backoff.reason));
      }
      td[5].className = "num queue";
      td[5].textContent = row.queued + " / " + row.inFlight;
      td[5].classList.toggle("zero", !row.queued && !row.inFlight);
      td[6].className = "num allowed"; count(td[6], row.allowed);
      td[7].className = "num robots-refused"; count(td[7], row.robotsRefused);
      td[8].className = "num delay-refused"; count(td[8], row.delayRefused);
      td[9].className = "num cache-hits"; count(td[9], row.cacheHits);
      td[10].className = "num";
      td[10].textContent = row.lastSeen ? ago(row.lastSeen, now) : "–";
      if (body.children[i] !== tr) body.insertBefore(tr, body.children[i] || null);
    });
    for (const [host, tr] of rowsByHost) {
      if (!seen.has(host)) {
        tr.remove();
        rowsByHost.delete(host);
        if (editing === host) editing = null;
      }
    }
  }

  // -- the feed -----------------------------------------------------------------------
  function query() {
    const p = new URLSearchParams({ sort: view.sort, order: view.order, state: view.state,
                                    offset: String(view.offset), limit: String(view.limit) });
    if (view.q) p.set("q", view.q);
    return p.toString();
  }

  function connect() {
    if (source) source.close();
    const live = $("live");
    source = new EventSource("/dashboard/events?" + query());
    source.addEventListener("tick", (e) => {
      const tick = JSON.parse(e.data);
      live.dataset.state = "live";
      $("live-text").textContent = "live";
      renderSummary(tick.summary);
      renderHosts(tick.hosts);
    });
    source.onerror = () => {
      live.dataset.state = "lost";
      $("live-text").textContent = "reconnecting";
    };
    for (const th of document.querySelectorAll("th[data-sort]")) {
      th.classList.toggle("sorted", th.dataset.sort === view.sort);
      th.classList.toggle("asc", th.dataset.sort === view.sort && view.order === "asc");
    }
    history.replaceState(null, "", "?" + query());
  }

  function start() {
    const given = new URLSearchParams(location.search);
    for (const key of Object.keys(view)) {
      if (given.has(key)) {
        view[key] = typeof view[key] === "number" ? Number(given.get(key)) || 0 : given.get(key);
      }
    }
    if (!view.limit) view.limit = 50;
    $("filter").value = view.q;
    $("state").value = view.state;
    $("limit").value = String(view.limit);
    for (const th of document.querySelectorAll("th[data-sort]")) {
      th.addEventListener("click", () => {
        const key = th.dataset.sort;
        if (view.sort === key) view.order = view.order === "desc" ? "asc" : "desc";
        else { view.sort = key; view.order = key === "host" || key === "robots" ? "asc" : "desc"; }
        view.offset = 0;
        connect();
      });
    }
    let typing = null;
    $("filter").addEventListener("input", () => {
      clearTimeout(typing);
      typing = setTimeout(() => { view.q = $("filter").value.trim(); view.offset = 0; connect(); }, 250);
    });
    $("state").addEventListener("change", () => { view.state = $("state").value; view.offset = 0; connect(); });
    $("limit").addEventListener("change", () => { view.limit = Number($("limit").value); view.offset = 0; connect(); });
    $("prev").addEventListener("click", () => { view.offset = Math.max(0, view.offset - view.limit); connect(); });
    $("next").addEventListener("click", () => {
      if (view.offset + view.limit < lastTotal) { view.offset += view.limit; connect(); }
    });
    connect();
  }

  document.addEventListener("DOMContentLoaded", start);
})();
