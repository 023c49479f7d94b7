// The surface page's pure functions (harness/surface/page/logic.js) under node's built-in test runner:
//   node --test tests/js/
// (tests/test_surface_logic_js.py runs this from pytest). Expected values come from small oracles
// written here the plain way, or from grids whose answer can be read off by hand.
"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const path = require("node:path");

const L = require(path.join(__dirname, "..", "..", "harness", "surface", "page", "logic.js"));

/** A seeded generator (mulberry32), so a failing grid can be reproduced. */
function rng(seed) {
  let a = seed >>> 0;
  return function () {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** An nb x nd grid of whole percentages, a share `holes` of them missing (null). */
function randomGrid(r, nb, nd, holes) {
  return Array.from({ length: nb }, () => Array.from({ length: nd }, () => (r() < holes ? null : Math.round(r() * 100))));
}

test("cell: null for a missing grid, row or value", () => {
  assert.equal(L.cell(null, 0, 0), null);
  assert.equal(L.cell([[1, 2]], 1, 0), null);
  assert.equal(L.cell([[1, 2]], 0, 2), null);
  assert.equal(L.cell([[1, null]], 0, 1), null);
  assert.equal(L.cell([[1, 0]], 0, 1), 0);
});

test("cheapestIndex: the first budget reaching the target, skipping missing cells", () => {
  const g = [[10, 95], [null, 40], [90, 60], [100, 100]];
  assert.equal(L.cheapestIndex(g, 4, 0, 90), 2);  // budget 1 is missing, budget 2 reaches 90 exactly
  assert.equal(L.cheapestIndex(g, 4, 1, 90), 0);
  assert.equal(L.cheapestIndex(g, 4, 1, 101), null);
  assert.equal(L.cheapestIndex(g, 2, 0, 90), null);  // only the first nb budgets are looked at
  assert.equal(L.cheapestIndex(null, 4, 0, 50), null);
  const r = rng(7);
  for (let k = 0; k < 200; k++) {
    const nb = 1 + Math.floor(r() * 12), nd = 1 + Math.floor(r() * 5), grid = randomGrid(r, nb, nd, 0.2);
    const d = Math.floor(r() * nd), target = Math.round(r() * 100);
    const oracle = grid.findIndex((row) => row[d] != null && row[d] >= target);
    assert.equal(L.cheapestIndex(grid, nb, d, target), oracle < 0 ? null : oracle);
  }
});

test("bestAt and diffGrid: own minus the best baseline, null where either is missing", () => {
  const own = [[50, null], [80, 20]];
  const b1 = [[40, 10], [null, 30]], b2 = [[45, 5], [null, 10]];
  assert.deepEqual(L.bestAt([b1, b2], 0, 0), { value: 45, index: 1 });
  assert.deepEqual(L.bestAt([b1, [[40]]], 0, 0), { value: 40, index: 0 });  // a tie keeps the first
  assert.equal(L.bestAt([b1, b2], 1, 0), null);
  assert.deepEqual(L.diffGrid(own, [b1, b2], 2, 2), [[5, null], [null, -10]]);
  assert.deepEqual(L.diffGrid(own, [], 2, 2), [[null, null], [null, null]]);
  const r = rng(11);
  for (let k = 0; k < 100; k++) {
    const nb = 1 + Math.floor(r() * 6), nd = 1 + Math.floor(r() * 6), n = Math.floor(r() * 4);
    const mine = randomGrid(r, nb, nd, 0.2), others = Array.from({ length: n }, () => randomGrid(r, nb, nd, 0.3));
    const got = L.diffGrid(mine, others, nb, nd);
    for (let b = 0; b < nb; b++) {
      for (let d = 0; d < nd; d++) {
        const vals = others.map((g) => g[b][d]).filter((v) => v != null);
        const want = mine[b][d] == null || !vals.length ? null : mine[b][d] - Math.max(...vals);
        assert.equal(got[b][d], want, `grid ${k} cell ${b},${d}`);
      }
    }
  }
});

test("diffRange: the largest |difference| rounded up to 10, kept within [10, 100]", () => {
  assert.equal(L.diffRange([[null, 3], [-4, 0]]), 10);
  assert.equal(L.diffRange([[11, -2]]), 20);
  assert.equal(L.diffRange([[-37], [null]]), 40);
  assert.equal(L.diffRange([[100, -100]]), 100);
  assert.equal(L.diffRange([[null]]), 10);
});

test("ramp: the stops at the ends, linear between, clamped outside [0, 1]", () => {
  const stops = [[0, 0, 0], [100, 200, 50], [200, 0, 250]];
  assert.deepEqual(L.ramp(stops, 0), [0, 0, 0]);
  assert.deepEqual(L.ramp(stops, 1), [200, 0, 250]);
  assert.deepEqual(L.ramp(stops, 0.5), [100, 200, 50]);
  assert.deepEqual(L.ramp(stops, 0.25), [50, 100, 25]);
  assert.deepEqual(L.ramp(stops, -3), [0, 0, 0]);
  assert.deepEqual(L.ramp(stops, 7), [200, 0, 250]);
});

test("tickIndices: every index of a short axis, else the ends, quarters and middle", () => {
  assert.deepEqual(L.tickIndices(1), [0]);
  assert.deepEqual(L.tickIndices(6), [0, 1, 2, 3, 4, 5]);
  assert.deepEqual(L.tickIndices(7), [0, 2, 3, 5, 6]);
  assert.deepEqual(L.tickIndices(100), [0, 25, 50, 74, 99]);
});

test("fitLabels: labels that would touch are dropped, the last kept over its neighbour, none past the edges", () => {
  // wide enough: all five
  assert.deepEqual(L.fitLabels([20, 80, 140, 200, 260], [40, 40, 40, 40, 40], 6, 0, 300), [0, 1, 2, 3, 4]);
  // a phone: 50-px labels 45 px apart -> every other one, and the last in place of the one before it
  assert.deepEqual(L.fitLabels([30, 75, 120, 165, 210], [50, 50, 50, 50, 50], 6, 0, 240), [0, 2, 4]);
  assert.deepEqual(L.fitLabels([30, 75, 120, 165], [50, 50, 50, 50], 6, 0, 240), [0, 3]);
  // a label running past the canvas is not drawn
  assert.deepEqual(L.fitLabels([10, 100], [40, 40], 6, 0, 300), [1]);
  assert.deepEqual(L.fitLabels([], [], 6, 0, 300), []);
});

test("contour: a step between two columns is one straight line at their border, frame to frame", () => {
  const grid = [[0, 0, 100, 100], [0, 0, 100, 100], [0, 0, 100, 100]];
  const lines = L.contour(grid, 50);
  assert.equal(lines.length, 1);
  assert.ok(lines[0].every((p) => Math.abs(p[0] - 2) < 1e-12), JSON.stringify(lines[0]));
  const ys = lines[0].map((p) => p[1]).sort((a, b) => a - b);
  assert.equal(ys[0], 0);
  assert.equal(ys[ys.length - 1], 3);
  assert.deepEqual(L.contour(grid, 101), []);  // no cell reaches the level
  assert.deepEqual(L.contour(grid, 0), []);  // every cell reaches it
  assert.deepEqual(L.contour([], 50), []);
  assert.deepEqual(L.contour([[null, null], [null, null]], 50), []);
});

test("contour: every point lies on a lattice edge whose linear interpolation is the level", () => {
  // the lattice: cell centres (k + 0.5), plus the frame (0 and n) carrying the edge cells' values
  const r = rng(2024);
  for (let k = 0; k < 60; k++) {
    const nb = 1 + Math.floor(r() * 7), nd = 1 + Math.floor(r() * 7), grid = randomGrid(r, nb, nd, 0.1);
    const t = 5 + Math.round(r() * 90);
    const X = [0, ...Array.from({ length: nd }, (_, j) => j + 0.5), nd];
    const Y = [0, ...Array.from({ length: nb }, (_, i) => i + 0.5), nb];
    const at = (i, j) => grid[Math.min(nb - 1, Math.max(0, i - 1))][Math.min(nd - 1, Math.max(0, j - 1))];
    function onEdge(p) {
      const yi = Y.findIndex((y) => Math.abs(y - p[1]) < 1e-9), xj = X.findIndex((x) => Math.abs(x - p[0]) < 1e-9);
      const checks = [];
      if (yi >= 0) {  // on a horizontal edge: interpolate along x
        for (let j = 0; j + 1 < X.length; j++) if (X[j] <= p[0] + 1e-9 && p[0] - 1e-9 <= X[j + 1]) checks.push([at(yi, j), at(yi, j + 1), (p[0] - X[j]) / (X[j + 1] - X[j])]);
      }
      if (xj >= 0) {  // on a vertical edge: interpolate along y
        for (let i = 0; i + 1 < Y.length; i++) if (Y[i] <= p[1] + 1e-9 && p[1] - 1e-9 <= Y[i + 1]) checks.push([at(i, xj), at(i + 1, xj), (p[1] - Y[i]) / (Y[i + 1] - Y[i])]);
      }
      return checks.some(([v0, v1, f]) => v0 != null && v1 != null && v0 !== v1 &&
        (v0 >= t) !== (v1 >= t) && Math.abs(v0 + (v1 - v0) * f - t) < 1e-6);
    }
    for (const line of L.contour(grid, t)) {
      assert.ok(line.length >= 2);
      for (const p of line) {
        assert.ok(p[0] >= 0 && p[0] <= nd && p[1] >= 0 && p[1] <= nb, `grid ${k}: ${p} outside the frame`);
        assert.ok(onEdge(p), `grid ${k} level ${t}: ${p} is on no crossing edge of ${JSON.stringify(grid)}`);
      }
    }
  }
});

test("chain: segments sharing end points become one polyline, in order", () => {
  const segs = [[[1, 0], [1, 1]], [[2, 2], [1, 1]], [[5, 5], [6, 6]]];
  const lines = L.chain(segs);
  assert.equal(lines.length, 2);
  assert.deepEqual(lines[0], [[1, 0], [1, 1], [2, 2]]);
  assert.deepEqual(lines[1], [[5, 5], [6, 6]]);
  assert.deepEqual(L.chain([]), []);
});
