/* Prediction-surface page (plain JavaScript, no dependencies, no network beyond its own data files).
 *
 * Data: manifest.json, axes.json, queries.json and matrices/query_NNN.json, read from `?data=DIR` when
 * given, else next to the page, else from data/ (the published page's layout). One problem's matrix is
 * fetched when it is selected; the last few are cached. Files in the published layout (no `methods`, no
 * intervals) work too: the controls that need our extra fields are hidden.
 *
 * Matrices are indexed [budget_index][deadline_index]; the heatmap puts deadlines on x and budgets on y
 * (both log-spaced, so the axis indices are evenly spaced in log scale).
 *
 * What the page computes from a grid (contours, the cheapest budget, the difference with the best
 * baseline, colour ramps) is in logic.js (`SurfaceLogic`, pure functions tested without a browser); this
 * file holds the page state `S`, reads the data and draws.
 */
(function () {
  "use strict";

  var L = window.SurfaceLogic;
  var CACHE_SIZE = 8;
  var $ = function (id) { return document.getElementById(id); };

  var S = {
    base: "", manifest: null, axes: null, queries: [], methods: [], published: false, hasDiff: false,
    unit: "USD", qi: -1, matrix: null, method: null, view: "success", b: 0, d: 0, target: 90,
    cache: new Map(), token: 0, searchIndex: [], buttons: []
  };
  window.surfacePaints = [];

  // ------------------------------------------------------------------ formatting

  function sig(v, digits) {
    return Number(v).toLocaleString("en-US", { maximumSignificantDigits: digits || 3 });
  }
  function fmtBudget(v, short) {
    if (v == null || !isFinite(v)) return "–";
    if (S.unit === "tokens") {
      if (short) return Number(v).toLocaleString("en-US", { notation: "compact", maximumSignificantDigits: 3 });
      return sig(v) + " tokens";
    }
    return "$" + sig(v);
  }
  function fmtDeadline(s) {
    if (s == null) return "–";
    if (!isFinite(s)) return "no deadline";
    if (s < 60) return sig(s) + " s";
    if (s < 3600) return sig(s / 60) + " min";
    return sig(s / 3600) + " h";
  }
  function fmtPct(v, digits) {
    if (v == null) return "–";
    return (digits ? Number(v).toFixed(digits) : String(Math.round(v))) + "%";
  }
  function fmtPoints(v) {
    if (v == null) return "–";
    return (v > 0 ? "+" : v < 0 ? "−" : "±") + Math.abs(v) + " pts";
  }
  function int(v) { return Number(v).toLocaleString("en-US"); }

  // ------------------------------------------------------------------ data access

  function getJSON(url) {
    return fetch(url).then(function (r) {
      if (!r.ok) { var e = new Error(url + ": HTTP " + r.status); e.status = r.status; throw e; }
      return r.json().catch(function (err) { throw new Error(url + ": not valid JSON (" + err.message + ")"); });
    });
  }

  /** Where the data live: ?data=DIR, else next to the page, else data/ (the published page's layout). */
  function resolveBase() {
    var q = new URLSearchParams(location.search).get("data");
    if (q) {
      var base = q.endsWith("/") ? q : q + "/";
      return getJSON(base + "manifest.json").then(function (m) { return { base: base, manifest: m }; });
    }
    return getJSON("manifest.json").then(
      function (m) { return { base: "", manifest: m }; },
      function (err) {
        if (err.status !== 404) throw err;  // there but unreadable: say so rather than look elsewhere
        return getJSON("data/manifest.json").then(
          function (m) { return { base: "data/", manifest: m }; },
          function (err2) {
            if (err2.status !== 404) throw err2;
            throw new Error("no manifest.json next to this page nor in data/ (open the page with ?data=DIR " +
              "to read another folder)");
          });
      });
  }

  var cell = L.cell;

  /** A field of one method's results: methods[id][name], or the top-level published field for the first. */
  function field(m, methodId, name) {
    if (m.methods && methodId != null && m.methods[methodId] && m.methods[methodId][name] !== undefined) {
      return m.methods[methodId][name];
    }
    if (methodId === S.methods[0].id && (name === "success_pct" || name === "n_trials")) return m[name] || null;
    return null;
  }
  function methodById(id) {
    for (var i = 0; i < S.methods.length; i++) if (S.methods[i].id === id) return S.methods[i];
    return S.methods[0];
  }
  function baselines() { return S.methods.filter(function (m) { return m.baseline; }); }

  function baselineGrids(m) { return baselines().map(function (bm) { return field(m, bm.id, "success_pct"); }); }

  /** Best baseline at a cell: {value, method} over the baselines with a value there, or null. */
  function bestBaseline(m, b, d) {
    var best = L.bestAt(baselineGrids(m), b, d);
    return best === null ? null : { value: best.value, method: baselines()[best.index] };
  }

  /** A method's success minus the best baseline's, per cell (computed once per matrix and method). */
  function diffGrid(m, methodId) {
    m._diff = m._diff || {};
    if (!m._diff[methodId]) {
      m._diff[methodId] = L.diffGrid(field(m, methodId, "success_pct"), baselineGrids(m),
        S.axes.budgets.length, S.axes.deadlines.length);
    }
    return m._diff[methodId];
  }

  function cellStatus(pct, n) {
    var expected = S.manifest.expected_trials_per_cell;
    if (pct == null || n === 0) return "missing";
    if (n != null && expected != null && n < expected) return "partial";
    return "complete";
  }

  /** The smallest budget index whose success reaches `target` at deadline `d` (null when none does). */
  function cheapestIndex(arr, d, target) { return L.cheapestIndex(arr, S.axes.budgets.length, d, target); }

  function checkShape(m, path) {
    var nb = S.axes.budgets.length, nd = S.axes.deadlines.length, s = m.success_pct;
    if (!Array.isArray(s) || s.length !== nb || s.some(function (r) { return !Array.isArray(r) || r.length !== nd; })) {
      throw new Error(path + ": success_pct is not " + nb + " budgets x " + nd + " deadlines (axes.json)");
    }
    return m;
  }

  function loadMatrix(q) {
    var key = q.matrix_path;
    if (S.cache.has(key)) {
      var hit = S.cache.get(key);
      S.cache.delete(key);
      S.cache.set(key, hit);  // most recently used last
      return { promise: hit, cached: true };
    }
    var p = getJSON(S.base + key).then(function (m) { return checkShape(m, key); });
    p.catch(function () { S.cache.delete(key); });
    S.cache.set(key, p);
    while (S.cache.size > CACHE_SIZE) S.cache.delete(S.cache.keys().next().value);
    return { promise: p, cached: false };
  }

  // ------------------------------------------------------------------ colours

  var VIRIDIS = ["#440154", "#482475", "#414487", "#355f8d", "#2a788e", "#21918c", "#22a884", "#44bf70",
    "#7ad151", "#bddf26", "#fde725"];
  var DIVERGING = ["#b2182b", "#d6604d", "#f4a582", "#fddbc7", "#f7f7f7", "#d1e5f0", "#92c5de", "#4393c3",
    "#2166ac"];
  function hex(h) { return [parseInt(h.slice(1, 3), 16), parseInt(h.slice(3, 5), 16), parseInt(h.slice(5, 7), 16)]; }
  var VIR = VIRIDIS.map(hex), DIV = DIVERGING.map(hex);
  var ramp = L.ramp;
  function colorOf(v, view, range) {
    return view === "diff" ? ramp(DIV, (v + range) / (2 * range)) : ramp(VIR, v / 100);
  }

  // ------------------------------------------------------------------ heatmap

  var canvas = null, ctx = null, geom = null, hatch = null;

  function hatchPattern() {
    if (hatch) return hatch;
    var c = document.createElement("canvas");
    c.width = c.height = 8;
    var x = c.getContext("2d");
    x.fillStyle = "#eef1f5"; x.fillRect(0, 0, 8, 8);
    x.strokeStyle = "#c3cad4"; x.lineWidth = 1.5;
    x.beginPath(); x.moveTo(0, 8); x.lineTo(8, 0); x.moveTo(-2, 2); x.lineTo(2, -2); x.moveTo(6, 10); x.lineTo(10, 6); x.stroke();
    hatch = ctx.createPattern(c, "repeat");
    return hatch;
  }

  function successGrid() { return field(S.matrix, S.method, "success_pct"); }
  function displayGrid() { return S.view === "diff" ? diffGrid(S.matrix, S.method) : successGrid(); }

  /** Size the canvas to its box (in device pixels) and set `geom`, the plot area and the cell size in CSS
   *  pixels; returns the canvas height in CSS pixels. */
  function layoutCanvas() {
    var wrap = $("canvas-wrap"), cssW = Math.max(280, wrap.clientWidth);
    var cssH = Math.round(Math.max(260, Math.min(560, cssW * 0.5)));
    var dpr = window.devicePixelRatio || 1;
    if (canvas.width !== Math.round(cssW * dpr) || canvas.height !== Math.round(cssH * dpr)) {
      canvas.width = Math.round(cssW * dpr);
      canvas.height = Math.round(cssH * dpr);
      canvas.style.height = cssH + "px";
    }
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, cssW, cssH);

    var nb = S.axes.budgets.length, nd = S.axes.deadlines.length;
    var m = { l: 78, r: 12, t: 10, b: 46 };
    var pw = cssW - m.l - m.r, ph = cssH - m.t - m.b;
    geom = { x: m.l, y: m.t, w: pw, h: ph, cw: pw / nd, ch: ph / nb, nb: nb, nd: nd };
    canvas.dataset.plot = [geom.x, geom.y, pw, ph].join(",");  // the plot area in CSS pixels (for tests)
    return cssH;
  }

  /** The cells: one pixel per cell, scaled up unsmoothed; missing cells show the hatch beneath a
   *  transparent pixel. */
  function paintCells(grid, range) {
    var nb = geom.nb, nd = geom.nd;
    ctx.fillStyle = hatchPattern();
    ctx.fillRect(geom.x, geom.y, geom.w, geom.h);
    var img = document.createElement("canvas");
    img.width = nd; img.height = nb;
    var ictx = img.getContext("2d"), data = ictx.createImageData(nd, nb);
    for (var b = 0; b < nb; b++) {
      for (var d = 0; d < nd; d++) {
        var v = cell(grid, b, d), o = ((nb - 1 - b) * nd + d) * 4;
        if (v == null) continue;
        var c = colorOf(v, S.view, range);
        data.data[o] = c[0]; data.data[o + 1] = c[1]; data.data[o + 2] = c[2]; data.data[o + 3] = 255;
      }
    }
    ictx.putImageData(data, 0, 0);
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(img, geom.x, geom.y, geom.w, geom.h);
  }

  /** Thin cell borders, on grids whose cells are large enough (14 px) to tell apart. */
  function paintCellBorders() {
    if (geom.cw < 14 || geom.ch < 14) return;
    ctx.strokeStyle = "rgba(255,255,255,0.35)"; ctx.lineWidth = 1;
    ctx.beginPath();
    for (var d = 1; d < geom.nd; d++) {
      var x = Math.round(geom.x + d * geom.cw) + 0.5;
      ctx.moveTo(x, geom.y); ctx.lineTo(x, geom.y + geom.h);
    }
    for (var b = 1; b < geom.nb; b++) {
      var y = Math.round(geom.y + b * geom.ch) + 0.5;
      ctx.moveTo(geom.x, y); ctx.lineTo(geom.x + geom.w, y);
    }
    ctx.stroke();
  }

  /** The 50% (dashed) and 90% contours of the chosen method's success, white over a dark halo. */
  function paintContours(sg) {
    [[50, [7, 5]], [90, []]].forEach(function (lv) {
      var lines = L.contour(sg, lv[0]);
      ctx.setLineDash(lv[1]);
      ctx.lineJoin = "round"; ctx.lineCap = "round";
      [["rgba(10,14,22,0.7)", 4], ["#ffffff", 2]].forEach(function (st) {
        ctx.strokeStyle = st[0]; ctx.lineWidth = st[1];
        ctx.beginPath();
        lines.forEach(function (line) {
          line.forEach(function (p, k) {
            var px = geom.x + p[0] * geom.cw, py = geom.y + geom.h - p[1] * geom.ch;
            if (k === 0) ctx.moveTo(px, py); else ctx.lineTo(px, py);
          });
        });
        ctx.stroke();
      });
    });
    ctx.setLineDash([]);
  }

  /** A dot on the cheapest budget reaching the target at the chosen deadline (none when no budget does). */
  function paintCheapest(sg) {
    var cb = cheapestIndex(sg, S.d, S.target);
    if (cb == null) return;
    var cx = geom.x + (S.d + 0.5) * geom.cw, cy = geom.y + geom.h - (cb + 0.5) * geom.ch;
    var r = Math.max(3.5, Math.min(8, Math.min(geom.cw, geom.ch) * 0.28));
    ctx.beginPath(); ctx.arc(cx, cy, r, 0, 2 * Math.PI);
    ctx.fillStyle = "#ffffff"; ctx.fill();
    ctx.lineWidth = 2; ctx.strokeStyle = "#0a0e16"; ctx.stroke();
  }

  /** A box around the chosen cell, at least 12 px wide and high so that it shows on a 100 x 100 grid. */
  function paintChosenCell() {
    var sx = geom.x + S.d * geom.cw, sy = geom.y + geom.h - (S.b + 1) * geom.ch;
    var bw = Math.max(geom.cw, 12), bh = Math.max(geom.ch, 12);
    sx -= (bw - geom.cw) / 2; sy -= (bh - geom.ch) / 2;
    ctx.lineWidth = 3.5; ctx.strokeStyle = "#0a0e16"; ctx.strokeRect(sx, sy, bw, bh);
    ctx.lineWidth = 1.5; ctx.strokeStyle = "#ffffff"; ctx.strokeRect(sx, sy, bw, bh);
  }

  /** The frame, the ticks and their labels (deadlines below, budgets left) and the axis titles. */
  function paintAxes(cssH) {
    var pw = geom.w, ph = geom.h;
    ctx.strokeStyle = "#9aa4b2"; ctx.lineWidth = 1;
    ctx.strokeRect(geom.x - 0.5, geom.y - 0.5, pw + 1, ph + 1);
    ctx.fillStyle = "#4a5565"; ctx.font = "12px system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif";
    ctx.textAlign = "center"; ctx.textBaseline = "top";
    // deadline labels: only those that fit side by side within the canvas (a phone's narrow plot)
    var xi = L.tickIndices(geom.nd), xs = xi.map(function (i) { return geom.x + (i + 0.5) * geom.cw; });
    var xt = xi.map(function (i) { return fmtDeadline(S.axes.deadlines[i]); });
    var kept = L.fitLabels(xs, xt.map(function (t) { return ctx.measureText(t).width; }), 6, 0, canvas.clientWidth);
    var boxes = [];
    kept.forEach(function (k) {
      var w = ctx.measureText(xt[k]).width;
      ctx.fillRect(xs[k] - 0.5, geom.y + ph, 1, 4);
      ctx.fillText(xt[k], xs[k], geom.y + ph + 7);
      boxes.push([Math.round(xs[k] - w / 2), Math.round(xs[k] + w / 2)]);
    });
    canvas.dataset.xlabels = JSON.stringify(boxes);  // what the browser test checks: no two overlap
    ctx.textAlign = "right"; ctx.textBaseline = "middle";
    L.tickIndices(geom.nb).forEach(function (i) {
      var ty = geom.y + ph - (i + 0.5) * geom.ch;
      ctx.fillRect(geom.x - 4, ty - 0.5, 4, 1);
      ctx.fillText(fmtBudget(S.axes.budgets[i], true), geom.x - 7, ty);
    });
    ctx.fillStyle = "#1c2430"; ctx.font = "600 12px system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif";
    ctx.textAlign = "center"; ctx.textBaseline = "bottom";
    ctx.fillText("deadline (log scale)", geom.x + pw / 2, cssH - 2);
    ctx.save();
    ctx.translate(13, geom.y + ph / 2); ctx.rotate(-Math.PI / 2); ctx.textBaseline = "middle";
    ctx.fillText("budget" + (S.unit === "tokens" ? " (tokens)" : " ($)") + ", log scale", 0, 0);
    ctx.restore();
  }

  /** The heatmap for screen readers: what it shows and the value of the chosen cell. */
  function describeCanvas(grid) {
    var here = cell(grid, S.b, S.d);
    canvas.setAttribute("aria-label", (S.view === "diff" ? "heatmap of " + methodById(S.method).display_name +
      " minus the best baseline" : "heatmap of the success rate") + " over " + geom.nb + " budgets and " +
      geom.nd + " deadlines; chosen cell: " + (S.view === "diff" ? fmtPoints(here) : fmtPct(here)));
  }

  /** The whole heatmap, layer by layer (each layer one function above, drawn in this order). */
  function paint() {
    if (!S.matrix) return;
    var cssH = layoutCanvas();
    var grid = displayGrid() || [];
    var range = S.view === "diff" ? L.diffRange(grid) : 100;
    S.range = range;
    paintCells(grid, range);
    paintCellBorders();
    var sg = successGrid();
    if (sg) {
      paintContours(sg);
      paintCheapest(sg);
    }
    paintChosenCell();
    paintAxes(cssH);
    renderLegend(range);
    describeCanvas(grid);
  }

  function renderLegend(range) {
    var el = $("legend"), diff = S.view === "diff";
    var key = (diff ? "diff" : "success") + ":" + range;
    if (el.dataset.key === key) return;
    el.dataset.key = key;
    el.textContent = "";
    var bar = document.createElement("span"); bar.className = "bar";
    var lo = document.createElement("span"); lo.textContent = diff ? "−" + range + " pts" : "0%";
    var c = document.createElement("canvas"); c.width = 150; c.height = 10;
    c.setAttribute("aria-hidden", "true");
    var x = c.getContext("2d");
    for (var i = 0; i < 150; i++) {
      var t = i / 149, col = diff ? ramp(DIV, t) : ramp(VIR, t);
      x.fillStyle = "rgb(" + col.map(Math.round).join(",") + ")";
      x.fillRect(i, 0, 1, 10);
    }
    var hi = document.createElement("span"); hi.textContent = diff ? "+" + range + " pts" : "100%";
    bar.append(lo, c, hi);
    el.append(bar);
    function sw(cls, text) {
      var s = document.createElement("span"); s.className = "sw";
      var i = document.createElement("span"); i.className = cls;
      s.append(i, document.createTextNode(text));
      el.append(s);
    }
    sw("line", "90%");
    sw("line dashed", "50%");
    sw("box", "chosen cell");
    sw("dot", "cheapest budget for target");
    sw("hatch", "missing");
  }

  function cellAt(ev) {
    if (!geom) return null;
    var r = canvas.getBoundingClientRect(), x = ev.clientX - r.left - geom.x, y = ev.clientY - r.top - geom.y;
    if (x < 0 || y < 0 || x >= geom.w || y >= geom.h) return null;
    return { d: Math.min(geom.nd - 1, Math.floor(x / geom.cw)), b: Math.min(geom.nb - 1, geom.nb - 1 - Math.floor(y / geom.ch)) };
  }

  // ------------------------------------------------------------------ readouts

  function setText(id, text) { $(id).textContent = text; }

  function renderReadout() {
    var m = S.matrix, b = S.b, d = S.d, meth = methodById(S.method);
    setText("budget-value", fmtBudget(S.axes.budgets[b]));
    setText("deadline-value", fmtDeadline(S.axes.deadlines[d]));
    $("budget").setAttribute("aria-valuetext", fmtBudget(S.axes.budgets[b]));
    $("deadline").setAttribute("aria-valuetext", fmtDeadline(S.axes.deadlines[d]));
    if (!m) return;
    var pct = cell(field(m, S.method, "success_pct"), b, d);
    var n = cell(field(m, S.method, "n_trials"), b, d);
    var k = cell(field(m, S.method, "successes"), b, d);
    var lo = cell(field(m, S.method, "wilson_low_pct"), b, d), hi = cell(field(m, S.method, "wilson_high_pct"), b, d);
    var cost = cell(field(m, S.method, "mean_cost"), b, d);
    var status = cellStatus(pct, n);
    var sv = $("success-value");
    sv.textContent = fmtPct(pct);
    sv.dataset.value = pct == null ? "" : String(pct);
    setText("success-caption", !S.published ? meth.display_name + " at the chosen cell" : "Success at the chosen cell");
    var st = $("status");
    st.textContent = status;
    st.className = "pill " + status;
    $("interval").hidden = lo == null || hi == null;
    setText("interval", lo == null || hi == null ? "" : "95% interval " + lo.toFixed(1) + "–" + hi.toFixed(1) + "% (Wilson)");
    var expected = S.manifest.expected_trials_per_cell, parts = [];
    if (n != null) {
      parts.push((k != null ? int(k) + " successes in " : "") + int(n) + " trial" + (n === 1 ? "" : "s") +
        (expected != null && n < expected ? " (of " + int(expected) + " expected)" : ""));
    } else {
      parts.push("trial count not in this data set");
    }
    if (cost != null) parts.push("mean cost " + fmtBudget(cost));
    setText("trials", parts.join(" · "));

    // difference with the best baseline
    var showDiff = S.hasDiff && !meth.baseline;
    $("diff-readout").hidden = !showDiff;
    if (showDiff) {
      var bb = bestBaseline(m, b, d), dv = pct == null || bb == null ? null : pct - bb.value;
      var out = $("diff-value");
      out.textContent = fmtPoints(dv);
      out.dataset.value = dv == null ? "" : String(dv);
      out.className = "mid " + (dv > 0 ? "pos" : dv < 0 ? "neg" : "");
      setText("diff-detail", bb == null ? "no baseline result at this cell" :
        meth.display_name + " " + fmtPct(pct) + " vs " + bb.method.display_name + " " + fmtPct(bb.value) +
        " (best of " + baselines().length + " baseline" + (baselines().length === 1 ? "" : "s") + ")");
    }

    // cheapest budget reaching the target at this deadline
    var sg = field(m, S.method, "success_pct"), cb = cheapestIndex(sg, d, S.target), el = $("cheapest");
    el.textContent = "";
    el.dataset.index = cb == null ? "" : String(cb);
    var dl = fmtDeadline(S.axes.deadlines[d]);
    if (cb != null) {
      el.append("Cheapest budget reaching " + S.target + "% at " + dl + ": ");
      var strong = document.createElement("strong");
      strong.textContent = fmtBudget(S.axes.budgets[cb]);
      el.append(strong, " (" + fmtPct(cell(sg, cb, d)) + ")");
    } else {
      var best = null;
      for (var i = 0; i < S.axes.budgets.length; i++) {
        var v = cell(sg, i, d);
        if (v != null && (best === null || v > best.v)) best = { v: v, i: i };
      }
      el.append(best == null ? "No results at " + dl + "." :
        "No budget on the axis reaches " + S.target + "% at " + dl + " (best: " + fmtPct(best.v) + " at " +
        fmtBudget(S.axes.budgets[best.i]) + ").");
    }
    $("cheapest-go").hidden = cb == null || cb === b;
    var cbl = $("cheapest-baseline");
    cbl.hidden = !showDiff;
    if (showDiff) {
      var bestB = null;
      baselines().forEach(function (bm) {
        var i = cheapestIndex(field(m, bm.id, "success_pct"), d, S.target);
        if (i != null && (bestB === null || i < bestB.i)) bestB = { i: i, m: bm };
      });
      cbl.dataset.index = bestB == null ? "" : String(bestB.i);
      cbl.textContent = bestB == null ? "No baseline reaches " + S.target + "% at " + dl + "." :
        "Best baseline: " + fmtBudget(S.axes.budgets[bestB.i]) + " (" + bestB.m.display_name + ")";
    }
    setText("chart-title", S.view === "diff" ? meth.display_name + " minus the best baseline, in percentage points" :
      (!S.published ? meth.display_name + ": success" : "Success") + " over the whole grid");  // one method: still named
  }

  function update() {
    renderReadout();
    paint();
    saveHash();
  }

  // ------------------------------------------------------------------ problems

  function renderProblems() {
    var list = $("problem-list"), frag = document.createDocumentFragment();
    S.buttons = S.queries.map(function (q, i) {
      var li = document.createElement("li"), btn = document.createElement("button");
      btn.type = "button";
      btn.dataset.index = String(i);
      btn.dataset.queryId = q.query_id;
      var pid = document.createElement("span"); pid.className = "pid"; pid.textContent = q.problem_id || q.query_id;
      var title = document.createElement("span"); title.className = "ptitle";
      title.textContent = q.title && q.title !== q.problem_id ? q.title : "";  // a title repeating the id: once
      btn.append(pid, title);
      btn.addEventListener("click", function () { select(i, performance.now()); });
      li.append(btn);
      frag.append(li);
      S.searchIndex.push([q.query_id, q.problem_id, q.title].join(" ").toLowerCase());
      return btn;
    });
    list.append(frag);
    filterProblems();
  }

  function visibleButtons() { return S.buttons.filter(function (b) { return !b.parentNode.hidden; }); }

  function filterProblems() {
    var words = $("search").value.toLowerCase().split(/\s+/).filter(Boolean), shown = 0;
    S.buttons.forEach(function (btn, i) {
      var hit = words.every(function (w) { return S.searchIndex[i].indexOf(w) >= 0; });
      btn.parentNode.hidden = !hit;
      if (hit) shown++;
    });
    setText("problem-count", shown === S.queries.length ? int(shown) + " DAGs" :
      int(shown) + " of " + int(S.queries.length) + " DAGs");
  }

  function select(i, t0) {
    var q = S.queries[i];
    S.qi = i;
    S.buttons.forEach(function (b, k) { b.setAttribute("aria-current", k === i ? "true" : "false"); });
    var name = q.title || q.query_id;
    setText("problem-title", (q.problem_id && q.problem_id !== name ? q.problem_id + " · " : "") + name);
    var meta = [q.query_id];
    if (q.n_nodes != null) meta.push(q.n_nodes + " subtasks");
    if (q.dag_index != null) meta.push("DAG " + q.dag_index);
    setText("problem-meta", meta.join(" · "));
    var token = ++S.token, got = loadMatrix(q);
    $("loading").hidden = false;
    got.promise.then(function (m) {
      if (token !== S.token) return;
      $("loading").hidden = true;
      $("error").hidden = true;
      S.matrix = m;
      update();
      requestAnimationFrame(function () {
        setTimeout(function () {
          if (token !== S.token) return;
          var rec = { query_id: q.query_id, ms: performance.now() - t0, cached: got.cached };
          window.surfacePaints.push(rec);
          window.surfacePaint = rec;
          document.body.dataset.paintedQuery = q.query_id;
        }, 0);
      });
    }, function (err) {
      if (token !== S.token) return;
      $("loading").hidden = true;
      showError("could not load the matrix of " + q.query_id + ": " + err.message);
    });
  }

  // ------------------------------------------------------------------ state in the URL hash

  function saveHash() {
    var q = S.queries[S.qi];
    if (!q) return;
    var p = new URLSearchParams();
    p.set("q", q.query_id);
    if (S.methods.length > 1) p.set("m", methodById(S.method).label);  // the name a person reads (MCPP)
    p.set("b", String(S.b));
    p.set("d", String(S.d));
    if (S.view === "diff") p.set("v", "diff");
    if (S.target !== 90) p.set("t", String(S.target));
    history.replaceState(null, "", location.pathname + location.search + "#" + p.toString());
  }

  function readHash() {
    var p = new URLSearchParams(location.hash.slice(1)), out = {};
    ["q", "m", "b", "d", "v", "t"].forEach(function (k) { if (p.has(k)) out[k] = p.get(k); });
    return out;
  }

  // ------------------------------------------------------------------ controls

  function showError(text) {
    var e = $("error");
    e.textContent = text;
    e.hidden = false;
  }

  function setView(v) {
    S.view = v === "diff" && S.hasDiff && !methodById(S.method).baseline ? "diff" : "success";
    $("view-success").checked = S.view === "success";
    $("view-diff").checked = S.view === "diff";
  }

  /** One slider block: label, value, the range input over the axis' indices, its min / middle / max. */
  function sliderBlock(name, title) {
    var wrap = document.createElement("div"), head = document.createElement("div");
    wrap.className = "slider";
    head.className = "slider-head";
    var label = document.createElement("label");
    label.htmlFor = name; label.className = "label"; label.textContent = title;
    var out = document.createElement("output");
    out.id = name + "-value"; out.className = "value"; out.htmlFor = name;
    head.append(label, out);
    var input = document.createElement("input");
    input.id = name; input.type = "range"; input.min = "0"; input.max = "0"; input.step = "1"; input.value = "0";
    var ticks = document.createElement("div");
    ticks.className = "ticks";
    ticks.setAttribute("aria-hidden", "true");
    ["min", "mid", "max"].forEach(function (k) {
      var t = document.createElement("span");
      t.id = name + "-" + k;
      ticks.append(t);
    });
    wrap.append(head, input, ticks);
    $("sliders").append(wrap);
  }

  function setupControls(hash) {
    sliderBlock("budget", "Budget");
    sliderBlock("deadline", "Deadline");
    var nb = S.axes.budgets.length, nd = S.axes.deadlines.length;
    function clampIdx(v, n, dflt) { v = parseInt(v, 10); return isNaN(v) ? dflt : Math.max(0, Math.min(n - 1, v)); }
    S.b = clampIdx(hash.b, nb, Math.floor((nb - 1) / 2));
    S.d = clampIdx(hash.d, nd, Math.floor((nd - 1) / 2));
    [["budget", nb, S.b, fmtBudget, S.axes.budgets], ["deadline", nd, S.d, fmtDeadline, S.axes.deadlines]].forEach(function (a) {
      var el = $(a[0]);
      el.max = String(a[1] - 1);
      el.value = String(a[2]);
      setText(a[0] + "-min", a[3](a[4][0]));
      setText(a[0] + "-mid", a[3](a[4][Math.floor((a[1] - 1) / 2)]));
      setText(a[0] + "-max", a[3](a[4][a[1] - 1]));
      el.addEventListener("input", function () {
        if (a[0] === "budget") S.b = +el.value; else S.d = +el.value;
        update();
      });
      el.addEventListener("keydown", function (ev) {  // PageUp / PageDown: a tenth of the axis
        if (ev.key !== "PageUp" && ev.key !== "PageDown") return;
        ev.preventDefault();
        var step = Math.max(1, Math.round(a[1] / 10)), v = +el.value + (ev.key === "PageUp" ? step : -step);
        el.value = String(Math.max(0, Math.min(a[1] - 1, v)));
        el.dispatchEvent(new Event("input"));
      });
    });

    var sel = $("method");
    S.methods.forEach(function (m) {
      var o = document.createElement("option");
      o.value = m.id;
      o.textContent = m.display_name + (m.baseline ? " (baseline)" : "");
      sel.append(o);
    });
    // opens on the first method compared with the baselines (MCPP), whatever order the run listed them in
    var compared = S.methods.filter(function (m) { return !m.baseline; })[0] || S.methods[0];
    // a link names the method by its label (m=MCPP) or, as older links do, by its id
    var linked = hash.m && S.methods.filter(function (m) { return m.label === hash.m || m.id === hash.m; })[0];
    S.method = linked ? linked.id : compared.id;
    sel.value = S.method;
    $("method-control").hidden = S.methods.length < 2;
    $("view-control").hidden = !S.hasDiff;
    function syncDiffRadio() {
      var base = methodById(S.method).baseline;
      $("view-diff").disabled = base;
      $("view-diff").parentNode.title = base ? "choose a non-baseline method to compare it with the baselines" : "";
    }
    sel.addEventListener("change", function () {
      S.method = sel.value;
      syncDiffRadio();
      setView(S.view);
      update();
    });
    syncDiffRadio();
    setView(hash.v || "success");
    ["view-success", "view-diff"].forEach(function (id) {
      $(id).addEventListener("change", function () { setView($(id).value); update(); });
    });

    var target = $("target");
    var t0 = parseFloat(hash.t);
    if (t0 > 0 && t0 <= 100) S.target = t0;
    target.value = String(S.target);
    target.addEventListener("input", function () {
      var v = parseFloat(target.value), ok = v > 0 && v <= 100;
      target.setAttribute("aria-invalid", ok ? "false" : "true");
      if (!ok) return;
      S.target = v;
      update();
    });
    $("cheapest-go").addEventListener("click", function () {
      var i = $("cheapest").dataset.index;
      if (i === "") return;
      S.b = +i;
      $("budget").value = i;
      update();
      $("budget").focus();
    });

    var search = $("search");
    search.addEventListener("input", filterProblems);
    search.addEventListener("keydown", function (ev) {
      var vis = visibleButtons();
      if (ev.key === "Enter" && vis.length) { ev.preventDefault(); vis[0].click(); }
      if (ev.key === "ArrowDown" && vis.length) { ev.preventDefault(); vis[0].focus(); }
    });
    $("problem-list").addEventListener("keydown", function (ev) {
      if (ev.key !== "ArrowDown" && ev.key !== "ArrowUp") return;
      var vis = visibleButtons(), k = vis.indexOf(document.activeElement);
      if (k < 0) return;
      ev.preventDefault();
      if (ev.key === "ArrowUp" && k === 0) { search.focus(); return; }
      var next = vis[Math.max(0, Math.min(vis.length - 1, k + (ev.key === "ArrowDown" ? 1 : -1)))];
      next.focus();
    });

    canvas.addEventListener("click", function (ev) {
      var c = cellAt(ev);
      if (!c) return;
      S.b = c.b; S.d = c.d;
      $("budget").value = String(c.b);
      $("deadline").value = String(c.d);
      update();
    });
    canvas.addEventListener("mousemove", function (ev) {
      var c = cellAt(ev);
      if (!c || !S.matrix) { setText("hover", "\u00a0"); return; }
      var v = cell(displayGrid(), c.b, c.d);
      var n = cell(field(S.matrix, S.method, "n_trials"), c.b, c.d);
      var sval = cell(successGrid(), c.b, c.d);
      setText("hover", fmtBudget(S.axes.budgets[c.b]) + " · " + fmtDeadline(S.axes.deadlines[c.d]) + " → " +
        (S.view === "diff" ? fmtPoints(v) + " (success " + fmtPct(sval) + ")" : fmtPct(v)) +
        (n != null ? " · " + int(n) + " trials" : "") + " · " + cellStatus(sval, n));
    });
    canvas.addEventListener("mouseleave", function () { setText("hover", "\u00a0"); });
    var pending = false;
    window.addEventListener("resize", function () {
      if (pending) return;
      pending = true;
      requestAnimationFrame(function () { pending = false; paint(); });
    });
  }

  function renderMeta() {
    var mf = S.manifest, nb = S.axes.budgets.length, nd = S.axes.deadlines.length, parts = [];
    if (mf.dataset) parts.push(mf.dataset);
    parts.push(int(S.queries.length) + " DAGs");
    if (!S.published) parts.push(S.methods.map(function (m) { return m.display_name; }).join(", "));
    parts.push(nb + " × " + nd + " grid");
    if (mf.generated_at) parts.push(String(mf.generated_at).slice(0, 10));
    if (S.published) parts.push("published layout");
    var badge = $("dataset-badge");
    badge.textContent = parts.join(" · ");
    badge.title = "data from " + (S.base || "./");
    var approx = mf.approximation;
    if (approx != null) {
      var desc = typeof approx === "object" ? approx.description || JSON.stringify(approx) : String(approx);
      $("approx-badge").textContent = "approximate: " + desc;
      $("approx-badge").title = desc;
      $("approx-badge").hidden = false;
    }
    var notes = [];
    if (mf.public_data_notice) notes.push(mf.public_data_notice);
    var cells = [];
    if (mf.complete_cells != null) cells.push(int(mf.complete_cells) + " complete");
    if (mf.partial_cells != null) cells.push(int(mf.partial_cells) + " partial");
    if (mf.missing_cells != null) cells.push(int(mf.missing_cells) + " missing");
    if (cells.length) notes.push("Cells: " + cells.join(", ") + (mf.expected_trials_per_cell != null ?
      " (" + int(mf.expected_trials_per_cell) + " trials expected per cell)" : "") + ".");
    setText("notice", notes.join(" "));
    var run = [];
    var names = mf.model_display_names || mf.model_ids;
    if (names && names.length) run.push("Models: " + names.join(", "));
    if (mf.cost_mode) run.push("cost mode " + mf.cost_mode);
    if (mf.execution_rules) run.push("execution rules " + mf.execution_rules);
    if (mf.seed != null) run.push("seed " + mf.seed);
    if (mf.pool && mf.pool.sha256) run.push("pool sha256 " + String(mf.pool.sha256).slice(0, 12) + "…");
    setText("models", run.join(" · "));
  }

  // ------------------------------------------------------------------ start

  function start() {
    canvas = $("heatmap");
    ctx = canvas.getContext("2d");
    resolveBase().then(function (r) {
      S.base = r.base;
      S.manifest = r.manifest;
      return Promise.all([getJSON(S.base + "axes.json"), getJSON(S.base + "queries.json")]);
    }).then(function (res) {
      S.axes = res[0];
      S.queries = Array.isArray(res[1]) ? res[1] : [];
      if (!S.axes || !Array.isArray(S.axes.budgets) || !Array.isArray(S.axes.deadlines) ||
          !S.axes.budgets.length || !S.axes.deadlines.length) {
        throw new Error(S.base + "axes.json: needs non-empty budgets and deadlines lists");
      }
      var mf = S.manifest;
      S.published = !(Array.isArray(mf.methods) && mf.methods.length);
      S.methods = S.published ? [{ id: "success", display_name: "Success", label: "success", baseline: false }] :
        mf.methods.map(function (m) {
          return { id: String(m.id), display_name: m.display_name || String(m.id), label: m.label || String(m.id),
                   baseline: !!m.baseline };
        });
      S.hasDiff = S.methods.some(function (m) { return m.baseline; }) && S.methods.some(function (m) { return !m.baseline; });
      S.unit = mf.budget_unit === "tokens" ? "tokens" : "USD";
      var hash = readHash();
      renderMeta();
      setupControls(hash);
      renderProblems();
      document.body.dataset.ready = "1";
      if (!S.queries.length) { showError("queries.json lists no DAGs"); return; }
      var qi = 0;
      if (hash.q) S.queries.some(function (q, i) { if (q.query_id === hash.q) { qi = i; return true; } return false; });
      select(qi, performance.now());
    }).catch(function (err) {
      document.body.dataset.ready = "error";
      $("dataset-badge").textContent = "no data";
      showError(err.message);
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
