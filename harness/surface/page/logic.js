/* The prediction-surface page's logic: pure functions of grids, with no page state and no DOM.
 *
 * Why a module of its own: what the page computes (contours, the cheapest budget reaching a target,
 * the difference with the best baseline, the colour scale) can then be tested without a browser
 * (tests/js/surface_logic.test.js, run with node's built-in test runner) and read without the drawing
 * code. app.js holds the page state and passes it in.
 *
 * A grid is indexed [budget_index][deadline_index], as the matrices are; a value is a percentage or null
 * (missing). Loaded by the page as a plain script (it defines `SurfaceLogic`) and by node as a CommonJS
 * module.
 */
(function (root, factory) {
  "use strict";
  var api = factory();
  if (typeof module === "object" && module.exports) module.exports = api;
  else root.SurfaceLogic = api;
})(typeof self !== "undefined" ? self : this, function () {
  "use strict";

  /** The value at [b][d], or null when the grid, the row or the value is missing. */
  function cell(arr, b, d) {
    if (!arr || !arr[b]) return null;
    var v = arr[b][d];
    return v === undefined ? null : v;
  }

  /** The best of several grids at one cell: {value, index} over the grids with a value there, or null.
   *  Ties keep the first grid (the page passes the baselines in the run's order). */
  function bestAt(grids, b, d) {
    var best = null;
    grids.forEach(function (g, i) {
      var v = cell(g, b, d);
      if (v != null && (best === null || v > best.value)) best = { value: v, index: i };
    });
    return best;
  }

  /** `own` minus the best of `others` at every cell of an nb x nd grid (null where either is missing). */
  function diffGrid(own, others, nb, nd) {
    var grid = [];
    for (var b = 0; b < nb; b++) {
      var row = [];
      for (var d = 0; d < nd; d++) {
        var v = cell(own, b, d), best = bestAt(others, b, d);
        row.push(v == null || best == null ? null : v - best.value);
      }
      grid.push(row);
    }
    return grid;
  }

  /** The smallest budget index (of nb) whose value reaches `target` at deadline `d`, or null when none does. */
  function cheapestIndex(arr, nb, d, target) {
    for (var b = 0; b < nb; b++) {
      var v = cell(arr, b, d);
      if (v != null && v >= target) return b;
    }
    return null;
  }

  /** The half-width of the difference colour scale: the largest |value| rounded up to 10, within [10, 100]. */
  function diffRange(grid) {
    var mx = 0;
    grid.forEach(function (r) { r.forEach(function (v) { if (v != null) mx = Math.max(mx, Math.abs(v)); }); });
    return Math.min(100, Math.max(10, Math.ceil(mx / 10) * 10));
  }

  /** The colour at t in [0, 1] (clamped) of a ramp of [r, g, b] stops, linearly between neighbours. */
  function ramp(stops, t) {
    t = Math.max(0, Math.min(1, t));
    var x = t * (stops.length - 1), i = Math.min(stops.length - 2, Math.floor(x)), f = x - i;
    var a = stops[i], c = stops[i + 1];
    return [a[0] + (c[0] - a[0]) * f, a[1] + (c[1] - a[1]) * f, a[2] + (c[2] - a[2]) * f];
  }

  /** The axis indices that get a tick label: all of up to 6, else the ends, quarters and middle. */
  function tickIndices(n) {
    if (n <= 6) return Array.from({ length: n }, function (_, i) { return i; });
    var out = [];
    [0, 0.25, 0.5, 0.75, 1].forEach(function (f) {
      var i = Math.round(f * (n - 1));
      if (out.indexOf(i) < 0) out.push(i);
    });
    return out;
  }

  /** Which of the tick labels to draw so that none overlaps another or leaves [lo, hi]: labels centred at
   *  `centers[k]`, `widths[k]` wide, at least `gap` apart, taken left to right (the first that fits wins),
   *  then the last one kept in place of its left neighbour when only it was dropped. Returns positions in
   *  the input lists. On a phone the deadline labels of a 100-wide axis would otherwise run together. */
  function fitLabels(centers, widths, gap, lo, hi) {
    var out = [], right = -Infinity, k;
    function fits(k, after) {
      var a = centers[k] - widths[k] / 2, b = centers[k] + widths[k] / 2;
      return a >= lo && b <= hi && a >= after + gap;
    }
    for (k = 0; k < centers.length; k++) {
      if (fits(k, right)) { out.push(k); right = centers[k] + widths[k] / 2; }
    }
    var last = centers.length - 1;
    if (last > 0 && out[out.length - 1] !== last && out.length > 1) {
      var prev = out[out.length - 2];
      if (fits(last, centers[prev] + widths[prev] / 2)) out[out.length - 1] = last;
    }
    return out;
  }

  /** Contour lines of `grid` at level `t` (marching squares), as polylines in cell units: x along
   *  deadlines, y along budgets, both 0..n with cell k spanning [k, k + 1]. The grid is padded with its
   *  edge values so that lines run to the frame; squares with a missing corner are skipped; a saddle is
   *  resolved by the mean of its four corners. */
  function contour(grid, t) {
    var nb = grid.length, nd = nb ? grid[0].length : 0, segs = [];
    if (nb === 0 || nd === 0) return segs;
    function pos(i, n) { return i === 0 ? 0 : i === n + 1 ? n : i - 0.5; }
    function val(i, j) { return grid[Math.min(nb - 1, Math.max(0, i - 1))][Math.min(nd - 1, Math.max(0, j - 1))]; }
    function lerp(p0, p1, v0, v1) { var f = v1 === v0 ? 0.5 : (t - v0) / (v1 - v0); return p0 + (p1 - p0) * f; }
    for (var i = 0; i <= nb; i++) {
      for (var j = 0; j <= nd; j++) {
        var a = val(i, j), bq = val(i, j + 1), c = val(i + 1, j + 1), dq = val(i + 1, j);
        if (a == null || bq == null || c == null || dq == null) continue;
        var idx = (a >= t ? 1 : 0) | (bq >= t ? 2 : 0) | (c >= t ? 4 : 0) | (dq >= t ? 8 : 0);
        if (idx === 0 || idx === 15) continue;
        var x0 = pos(j, nd), x1 = pos(j + 1, nd), y0 = pos(i, nb), y1 = pos(i + 1, nb);
        var E = {
          bottom: [lerp(x0, x1, a, bq), y0], right: [x1, lerp(y0, y1, bq, c)],
          top: [lerp(x0, x1, dq, c), y1], left: [x0, lerp(y0, y1, a, dq)]
        };
        var centre = (a + bq + c + dq) / 4 >= t, pairs;
        switch (idx) {
          case 1: case 14: pairs = [["left", "bottom"]]; break;
          case 2: case 13: pairs = [["bottom", "right"]]; break;
          case 3: case 12: pairs = [["left", "right"]]; break;
          case 4: case 11: pairs = [["right", "top"]]; break;
          case 6: case 9: pairs = [["bottom", "top"]]; break;
          case 7: case 8: pairs = [["left", "top"]]; break;
          case 5: pairs = centre ? [["bottom", "right"], ["left", "top"]] : [["left", "bottom"], ["right", "top"]]; break;
          case 10: pairs = centre ? [["left", "bottom"], ["right", "top"]] : [["bottom", "right"], ["left", "top"]]; break;
        }
        pairs.forEach(function (p) { segs.push([E[p[0]], E[p[1]]]); });
      }
    }
    return chain(segs);
  }

  /** Join segments sharing end points into polylines (smooth joins, continuous dashes). */
  function chain(segs) {
    var key = function (p) { return p[0].toFixed(4) + "," + p[1].toFixed(4); };
    var ends = new Map(), used = new Array(segs.length).fill(false), lines = [];
    segs.forEach(function (s, k) {
      [0, 1].forEach(function (e) {
        var kk = key(s[e]);
        if (!ends.has(kk)) ends.set(kk, []);
        ends.get(kk).push(k);
      });
    });
    function extend(line, atEnd) {
      for (;;) {
        var p = atEnd ? line[line.length - 1] : line[0], next = null;
        (ends.get(key(p)) || []).some(function (k) { if (!used[k]) { next = k; return true; } return false; });
        if (next === null) return;
        used[next] = true;
        var s = segs[next], q = key(s[0]) === key(p) ? s[1] : s[0];
        if (atEnd) line.push(q); else line.unshift(q);
      }
    }
    segs.forEach(function (s, k) {
      if (used[k]) return;
      used[k] = true;
      var line = [s[0], s[1]];
      extend(line, true);
      extend(line, false);
      lines.push(line);
    });
    return lines;
  }

  return {
    cell: cell, bestAt: bestAt, diffGrid: diffGrid, cheapestIndex: cheapestIndex, diffRange: diffRange,
    ramp: ramp, tickIndices: tickIndices, fitLabels: fitLabels, contour: contour, chain: chain
  };
});
