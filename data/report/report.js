/* The plotting script of `ak report` (embedded in the page by src/cli/cmd_report.c):
 * reads the results lines the page carries as JSON (#ak-data: {generated, folders:
 * [{label, lines: [envelope + "_src": "FILE:LINE"]}]}) and draws each section as inline
 * SVG, beside a table of the same figures. Plain JavaScript, no library, no network.
 *
 * Every mark and table cell that shows a figure carries data-src (FILE:LINE) and
 * data-field (figures.NAME), so a test can check the page against the results files;
 * every plot is a figure.ak-plot whose svg has g.axis.x, g.axis.y and one g.series per
 * series (docs/report.md). */
'use strict';

const DATA = JSON.parse(document.getElementById('ak-data').textContent);
const SVGNS = 'http://www.w3.org/2000/svg';
const MULTI = DATA.folders.length > 1;
const COLORS = {
  'accelkit': '#1f6feb', 'OpenBLAS': '#d97706', 'BLIS': '#7c3aed', 'Open MPI': '#dc2626',
  'Gloo': '#059669', 'ONNX Runtime': '#db2777', 'PyTorch': '#ea580c', 'PyTorch DDP': '#ea580c',
  'llama.cpp': '#0891b2', 'iperf3': '#475467', 'memcpy': '#475467',
};
const PALETTE = ['#1f6feb', '#d97706', '#059669', '#7c3aed', '#dc2626', '#0891b2', '#db2777',
                 '#65a30d', '#ea580c', '#475467'];

/* ---- DOM helpers ------------------------------------------------------------------- */

function h(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v !== undefined && v !== null) e.setAttribute(k, v);
  for (const k of kids) if (k !== null && k !== undefined) e.append(k);
  return e;
}
function s(tag, attrs, ...kids) {
  const e = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v !== undefined && v !== null) e.setAttribute(k, v);
  for (const k of kids) if (k !== null && k !== undefined) e.append(k);
  return e;
}

/* ---- the results: newest line per folder, benchmark, engine and parameters ---------- */

function engine(line) { return line.peer ? line.peer.name : 'accelkit'; }
function stable(v) {
  if (v === null || typeof v !== 'object') return JSON.stringify(v);
  return '{' + Object.keys(v).sort().map(k => JSON.stringify(k) + ':' + stable(v[k])).join(',') + '}';
}
/* [{fi, line}] of the benchmarks `match` accepts; a rerun replaces an older line */
function records(match) {
  const kept = new Map();
  DATA.folders.forEach((folder, fi) => {
    for (const line of folder.lines) {
      if (!match(line.benchmark)) continue;
      const key = [fi, line.benchmark, engine(line), stable(line.params)].join('|');
      const old = kept.get(key);
      if (!old || old.line.timestamp <= line.timestamp) kept.set(key, {fi, line});
    }
  });
  return [...kept.values()];
}
const isBench = name => b => b === name;
function seriesName(r) { return MULTI ? engine(r.line) + ' · ' + DATA.folders[r.fi].label : engine(r.line); }
function colorOf(name, i) { return COLORS[name.split(' · ')[0]] || PALETTE[i % PALETTE.length]; }
function fig(r, field) {
  let v = r.line.figures;
  for (const part of field.split('.')) v = v == null ? undefined : v[part];
  return typeof v === 'number' ? v : undefined;
}
/* a figure as a traceable reference: what a mark or cell shows, and where it comes from */
function ref(r, field) { return {value: fig(r, field), src: r.line._src, field: 'figures.' + field}; }
function groupBy(list, keyOf) {
  const m = new Map();
  for (const x of list) {
    const k = keyOf(x);
    if (!m.has(k)) m.set(k, []);
    m.get(k).push(x);
  }
  return m;
}
function uniq(list) { return [...new Set(list)]; }

/* ---- number formats ----------------------------------------------------------------- */

function fmtBytes(b) {
  const u = ['B', 'K', 'M', 'G', 'T'];
  let i = 0;
  while (b >= 1024 && i < u.length - 1 && b % 1024 === 0) { b /= 1024; i++; }
  return b + (i ? u[i] : '');
}
function fmtTick(v) {
  if (v === 0) return '0';
  const a = Math.abs(v);
  if (a >= 1e9) return +(v / 1e9).toPrecision(3) + 'G';
  if (a >= 1e6) return +(v / 1e6).toPrecision(3) + 'M';
  if (a >= 1e4) return +(v / 1e3).toPrecision(3) + 'k';
  return String(+v.toPrecision(3));
}

/* ---- scales ------------------------------------------------------------------------- */

function linearTicks(lo, hi) {
  const span = hi - lo || 1, raw = span / 5, p = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 5, 10].map(m => m * p).find(x => span / x <= 6);
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(+v.toPrecision(12));
  return out;
}
function logTicks(lo, hi, base2) {
  const out = [];
  if (base2) {
    const a = Math.floor(Math.log2(lo)), b = Math.ceil(Math.log2(hi));
    const step = Math.max(1, Math.ceil((b - a) / 8));
    for (let e = a; e <= b; e += step) out.push(Math.pow(2, e));
  } else {
    /* powers of 10, then 1-2-5 steps when the range is under a decade or two */
    for (const steps of [[1], [1, 2, 5], [1, 1.5, 2, 3, 5, 7]]) {
      const ticks = [];
      for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++)
        for (const m of steps) ticks.push(+(m * Math.pow(10, e)).toPrecision(6));
      const inside = ticks.filter(t => t >= lo * 0.999 && t <= hi * 1.001);
      if (inside.length >= 3) return inside;
    }
    return [+lo.toPrecision(3), +hi.toPrecision(3)];
  }
  return out.filter(t => t >= lo * 0.999 && t <= hi * 1.001);
}
function scale(lo, hi, a, b, log) {
  if (log) {
    const l0 = Math.log(lo), l1 = Math.log(hi);
    return v => a + (b - a) * (Math.log(v) - l0) / (l1 - l0 || 1);
  }
  return v => a + (b - a) * (v - lo) / (hi - lo || 1);
}
function domain(values, log, zero) {
  let lo = Math.min(...values), hi = Math.max(...values);
  if (log) {
    if (lo === hi) { lo /= 2; hi *= 2; }
    return [lo, hi];
  }
  if (zero) lo = Math.min(0, lo);
  if (lo === hi) hi = lo + 1;
  const t = linearTicks(lo, hi);
  return [Math.min(lo, t[0]), Math.max(hi, t[t.length - 1] < hi ? hi * 1.05 : t[t.length - 1])];
}

/* ---- plots -------------------------------------------------------------------------- */

const W = 600, H = 340, M = {l: 64, r: 18, t: 14, b: 64};

function axes(svg, x, y, xTicks, yTicks, xFmt, xLabel, yLabel) {
  const grid = s('g', {class: 'grid'}), ax = s('g', {class: 'axis x'}), ay = s('g', {class: 'axis y'});
  ax.append(s('line', {x1: M.l, x2: W - M.r, y1: H - M.b, y2: H - M.b}));
  ay.append(s('line', {x1: M.l, x2: M.l, y1: M.t, y2: H - M.b}));
  /* category labels (bar plots) lean so that long ones do not overlap */
  const lean = xTicks.length > 3 && xTicks.some(t => t.label !== undefined && String(t.label).length > 6);
  xTicks.forEach(t => {
    const px = typeof t.pos === 'number' ? t.pos : x(t), py = H - M.b + 16;
    ax.append(s('g', {class: 'tick'}, s('line', {x1: px, x2: px, y1: H - M.b, y2: H - M.b + 4}),
      s('text', {x: px, y: py, 'text-anchor': lean ? 'end' : 'middle',
                 transform: lean ? `rotate(-22 ${px} ${py})` : null}, t.label !== undefined ? t.label : xFmt(t))));
  });
  yTicks.forEach(t => {
    const py = y(t);
    grid.append(s('line', {x1: M.l, x2: W - M.r, y1: py, y2: py}));
    ay.append(s('g', {class: 'tick'}, s('line', {x1: M.l - 4, x2: M.l, y1: py, y2: py}),
      s('text', {x: M.l - 7, y: py + 4, 'text-anchor': 'end'}, fmtTick(t))));
  });
  ax.append(s('text', {class: 'label', x: (M.l + W - M.r) / 2, y: H - 6, 'text-anchor': 'middle'}, xLabel));
  ay.append(s('text', {class: 'label', transform: `translate(14 ${(M.t + H - M.b) / 2}) rotate(-90)`,
                       'text-anchor': 'middle'}, yLabel));
  svg.append(grid, ax, ay);
}

function legend(items) {
  const d = h('div', {class: 'legend'});
  for (const it of items) {
    d.append(h('span', {style: 'margin-right:12px;white-space:nowrap'},
      h('span', {style: `display:inline-block;width:14px;height:${it.dash ? 2 : 10}px;` +
                        `background:${it.color};margin-right:4px;vertical-align:middle;opacity:${it.faded ? 0.55 : 1};` +
                        (it.dash ? 'border-top:2px dashed ' + it.color + ';background:none' : '')}),
      it.name));
  }
  return d;
}

function figureBox(title, kind, svg, items) {
  return h('figure', {class: 'ak-plot', 'data-kind': kind, 'data-title': title},
           h('figcaption', null, title), svg, legend(items));
}

function mark(tag, attrs, r, what) {
  const e = s(tag, Object.assign({'data-src': r.src, 'data-field': r.field, 'data-value': r.value}, attrs));
  e.append(s('title', null, `${what}: ${r.value} (${r.src})`));
  return e;
}

/* one line per bound name: the peak is measured at each run, so one folder's lines carry
 * slightly different readings of it; the median reading is drawn */
function uniqBounds(bounds) {
  return [...groupBy(bounds.filter(b => b.value !== undefined), b => b.name)].map(([name, bs]) => {
    const v = bs.map(b => b.value).sort((a, b) => a - b);
    return {name, value: v[(v.length - 1) >> 1]};
  });
}

/* physical bounds as labelled horizontal lines across the plot, each with a legend item */
function drawBounds(svg, y, bounds, items) {
  for (const b of bounds) {
    const g = s('g', {class: 'bound', 'data-name': b.name});
    g.append(s('line', {x1: M.l, x2: W - M.r, y1: y(b.value), y2: y(b.value), stroke: '#475467'}));
    g.append(s('text', {x: W - M.r - 4, y: y(b.value) - 4, 'text-anchor': 'end'}, `${b.name}: ${b.value}`));
    svg.append(g);
    items.push({name: b.name + ' (bound)', color: '#475467', dash: true});
  }
}

/* series: [{name, points: [{x, ref}]}]; bounds: [{name, value}] drawn as dashed lines */
function linePlot({title, xLabel, yLabel, series, bounds = [], xLog = true, yLog = false, xBytes = false, colorByIndex = false}) {
  bounds = uniqBounds(bounds);
  const xs = series.flatMap(se => se.points.map(p => p.x));
  const ys = series.flatMap(se => se.points.map(p => p.ref.value)).concat(bounds.map(b => b.value));
  const [x0, x1] = domain(xs, xLog, false), [y0, y1] = domain(ys.filter(v => !yLog || v > 0), yLog, true);
  const x = scale(x0, x1, M.l, W - M.r, xLog), y = scale(y0, y1, H - M.b, M.t, yLog);
  const svg = s('svg', {viewBox: `0 0 ${W} ${H}`, role: 'img'});
  axes(svg, x, y, xLog ? logTicks(x0, x1, xBytes || x1 / x0 <= 256) : linearTicks(x0, x1),
       yLog ? logTicks(y0, y1, false) : linearTicks(y0, y1), xBytes ? fmtBytes : fmtTick, xLabel, yLabel);
  const items = [];
  series.forEach((se, i) => {
    const color = colorByIndex ? PALETTE[i % PALETTE.length] : colorOf(se.name, i), dash = se.folder > 0 ? '5 3' : null;
    const pts = se.points.filter(p => !yLog || p.ref.value > 0).sort((a, b) => a.x - b.x);
    const g = s('g', {class: 'series', 'data-name': se.name});
    g.append(s('polyline', {fill: 'none', stroke: color, 'stroke-width': 2, 'stroke-dasharray': dash,
                            points: pts.map(p => `${x(p.x).toFixed(1)},${y(p.ref.value).toFixed(1)}`).join(' ')}));
    for (const p of pts)
      g.append(mark('circle', {cx: x(p.x).toFixed(1), cy: y(p.ref.value).toFixed(1), r: 3, fill: color}, p.ref,
                    `${se.name} at ${xBytes ? fmtBytes(p.x) : p.x}`));
    svg.append(g);
    items.push({name: se.name, color});
  });
  drawBounds(svg, y, bounds, items);
  return figureBox(title, 'line', svg, items);
}

/* categories: labels along x; series: [{name, refs: [ref|undefined per category]}] */
/* yLog: a log axis for figures spread over decades; bars then rise from the axis' foot */
function barPlot({title, yLabel, categories, series, bounds = [], xLabel = '', yLog = false}) {
  bounds = uniqBounds(bounds);
  const vals = series.flatMap(se => se.refs.filter(Boolean).map(r => r.value)).concat(bounds.map(b => b.value));
  const [y0, y1] = yLog ? domain(vals.filter(v => v > 0), true, true) : domain(vals.concat([0]), false, true);
  const y = scale(y0, y1, H - M.b, M.t, yLog), foot = yLog ? y0 : 0;
  const band = (W - M.l - M.r) / categories.length, bw = Math.min(28, band * 0.8 / series.length);
  const cx = i => M.l + band * (i + 0.5);
  const svg = s('svg', {viewBox: `0 0 ${W} ${H}`, role: 'img'});
  axes(svg, cx, y, categories.map((c, i) => ({pos: cx(i), label: c})),
       yLog ? logTicks(y0, y1, false) : linearTicks(y0, y1), yLog ? fmtTick : String, xLabel, yLabel);
  const items = [];
  series.forEach((se, si) => {
    const color = colorOf(se.name, si);
    const g = s('g', {class: 'series', 'data-name': se.name});
    se.refs.forEach((r, ci) => {
      if (!r || (yLog && !(r.value > 0))) return;
      const left = cx(ci) - bw * series.length / 2 + bw * si;
      g.append(mark('rect', {x: left.toFixed(1), y: y(r.value).toFixed(1), width: (bw - 1).toFixed(1),
                             height: Math.max(0, y(foot) - y(r.value)).toFixed(1), fill: color,
                             'fill-opacity': se.folder > 0 ? 0.55 : 1}, r, `${se.name}, ${categories[ci]}`));
    });
    svg.append(g);
    items.push({name: se.name, color, faded: se.folder > 0});
  });
  drawBounds(svg, y, bounds, items);
  return figureBox(title, 'bar', svg, items);
}

/* stacked bars: categories along x; parts: [{name, refs per category}], scaled by `unit` */
function stackedPlot({title, yLabel, categories, parts, unit = 1}) {
  const totals = categories.map((_, ci) => parts.reduce((t, p) => t + (p.refs[ci] ? p.refs[ci].value / unit : 0), 0));
  const [y0, y1] = domain(totals.concat([0]), false, true);
  const y = scale(y0, y1, H - M.b, M.t, false);
  const band = (W - M.l - M.r) / categories.length, bw = Math.min(48, band * 0.6), cx = i => M.l + band * (i + 0.5);
  const svg = s('svg', {viewBox: `0 0 ${W} ${H}`, role: 'img'});
  axes(svg, cx, y, categories.map((c, i) => ({pos: cx(i), label: c})), linearTicks(y0, y1), String, '', yLabel);
  const base = categories.map(() => 0), items = [];
  parts.forEach((p, pi) => {
    const color = PALETTE[pi % PALETTE.length], g = s('g', {class: 'series', 'data-name': p.name});
    p.refs.forEach((r, ci) => {
      if (!r || !(r.value > 0)) return;
      const v = r.value / unit, top = base[ci] + v;
      g.append(mark('rect', {x: (cx(ci) - bw / 2).toFixed(1), y: y(top).toFixed(1), width: bw.toFixed(1),
                             height: (y(base[ci]) - y(top)).toFixed(1), fill: color}, r, `${p.name}, ${categories[ci]}`));
      base[ci] = top;
    });
    svg.append(g);
    items.push({name: p.name, color});
  });
  return figureBox(title, 'stacked', svg, items);
}

/* a timeline: lanes along y, time along x; events: [{lane, name, start: ref, dur: ref}] */
function timelinePlot({title, lanes, events}) {
  const end = Math.max(...events.map(e => e.start.value + e.dur.value));
  const [x0, x1] = domain([0, end], false, true);
  const x = scale(x0, x1, M.l + 60, W - M.r, false);
  const band = (H - M.t - M.b) / lanes.length, yOf = i => M.t + band * (i + 0.5);
  const svg = s('svg', {viewBox: `0 0 ${W} ${H}`, role: 'img'});
  axes(svg, x, v => v, linearTicks(x0, x1), [], fmtTick, 'ms from the window\'s start', '');
  const ay = svg.querySelector('g.axis.y');
  lanes.forEach((lane, i) => ay.append(s('g', {class: 'tick'},
    s('text', {x: M.l + 56, y: yOf(i) + 4, 'text-anchor': 'end'}, lane))));
  const items = [];
  lanes.forEach((lane, i) => {
    const color = PALETTE[i % PALETTE.length], g = s('g', {class: 'series', 'data-name': lane});
    for (const e of events.filter(ev => ev.lane === lane))
      g.append(mark('rect', {x: x(e.start.value).toFixed(1), y: (yOf(i) - band * 0.35).toFixed(1),
                             width: Math.max(0.8, x(e.start.value + e.dur.value) - x(e.start.value)).toFixed(1),
                             height: (band * 0.7).toFixed(1), fill: color, 'fill-opacity': 0.8}, e.dur,
                    `${lane} ${e.name}, ${e.start.value} ms + (ms)`));
    svg.append(g);
    items.push({name: lane, color});
  });
  return figureBox(title, 'timeline', svg, items);
}

/* ---- tables ------------------------------------------------------------------------- */

/* columns: [{title, cell: r => text | ref}]; a ref cell shows the JSON value unchanged */
function table(columns, rows) {
  const t = h('table', {class: 'figures'});
  t.append(h('thead', null, h('tr', null, ...columns.map(c => h('th', {class: c.text ? 'text' : null}, c.title)))));
  const body = h('tbody');
  for (const r of rows) {
    body.append(h('tr', null, ...columns.map(c => {
      const v = c.cell(r);
      if (v && typeof v === 'object' && 'src' in v)
        return v.value === undefined ? h('td', null, '–')
          : h('td', {'data-src': v.src, 'data-field': v.field, title: v.src}, String(v.value));
      return h('td', {class: c.text ? 'text' : null}, v === undefined ? '–' : String(v));
    })));
  }
  t.append(body);
  return h('details', null, h('summary', null, `the figures (${rows.length} rows)`), t);
}

/* ---- sections ----------------------------------------------------------------------- */

const SECTIONS = [];
function section(id, title, render) { SECTIONS.push({id, title, render}); }
function empty(text) { return h('p', {class: 'empty'}, text); }
function plots(...figs) { return h('div', {class: 'plots'}, ...figs.filter(Boolean)); }
/* one series per engine (and folder) of recs, keyed so categories can be looked up */
function seriesOf(recs) {
  return [...groupBy(recs, seriesName)].map(([name, rs]) => ({name, folder: rs[0].fi, recs: rs}));
}

/* a bar plot of one figure: one bar group per category (catOf), one series per engine */
function barsBy({title, yLabel, recs, catOf, field, bounds = []}) {
  const cats = uniq(recs.map(catOf));
  return barPlot({title, yLabel, categories: cats, bounds,
    series: seriesOf(recs).map(se => ({name: se.name, folder: se.folder,
      refs: cats.map(c => { const r = se.recs.find(x => catOf(x) === c); return r && fig(r, field) !== undefined ? ref(r, field) : undefined; })}))});
}

section('machine', 'Machines and runs', () => {
  const rows = DATA.folders.map((f, fi) => {
    const first = f.lines[0] || {}, m = first.machine || {}, a = first.accelkit || {};
    const peers = uniq(f.lines.filter(l => l.peer).map(l => `${l.peer.name} ${l.peer.version}`));
    const stamps = f.lines.map(l => l.timestamp).sort();
    return {fi, label: f.label, m, a, peers, lines: f.lines.length,
            from: stamps[0], to: stamps[stamps.length - 1]};
  });
  const t = h('table', {class: 'machines'});
  t.append(h('tr', null, ...['folder', 'CPU', 'cores', 'ISA', 'FMA peak GFLOP/s/core', 'memory GB/s',
                             'accelkit', 'peers', 'lines', 'measured'].map(x => h('th', {class: 'text'}, x))));
  for (const r of rows) {
    const src = DATA.folders[r.fi].lines[0] ? DATA.folders[r.fi].lines[0]._src : '';
    t.append(h('tr', null, h('td', {class: 'text'}, r.label), h('td', {class: 'text'}, r.m.cpu || '–'),
      h('td', null, String(r.m.cores ?? '–')), h('td', {class: 'text'}, r.m.isa || '–'),
      h('td', {'data-src': src, 'data-field': 'machine.fma_peak_gflops_per_core'}, String(r.m.fma_peak_gflops_per_core ?? '–')),
      h('td', {'data-src': src, 'data-field': 'machine.memory_gbps'}, String(r.m.memory_gbps ?? '–')),
      h('td', {class: 'text'}, `${r.a.version || '?'} (${r.a.commit || '?'})`),
      h('td', {class: 'text'}, r.peers.join(', ') || 'none'), h('td', null, String(r.lines)),
      h('td', {class: 'text'}, r.from === r.to ? (r.from || '–') : `${r.from} … ${r.to}`)));
  }
  return [t];
});

section('sgemm', 'SGEMM: GFLOP/s and % of the FMA peak by shape', () => {
  const recs = records(isBench('kernels.sgemm'));
  if (!recs.length) return [empty('No SGEMM results here (`ak bench kernels` writes them).')];
  /* bench/kernels/vs_peers.sh's stand-alone peer harness: categories of their own */
  const shape = r => `${r.line.params.m}×${r.line.params.n}×${r.line.params.k}` +
                     (r.line.params.threads > 1 ? ` ·${r.line.params.threads}t` : '') +
                     (r.line.params.harness ? ` (${r.line.params.harness})` : '');
  const cats = uniq(recs.map(shape)), ser = seriesOf(recs);
  const refs = (se, field) => cats.map(c => { const r = se.recs.find(x => shape(x) === c); return r && fig(r, field) !== undefined ? ref(r, field) : undefined; });
  const peaks = uniq(recs.filter(r => r.line.params.threads === 1).map(r => r.line.machine.fma_peak_gflops_per_core));
  const out = [plots(
    barPlot({title: 'SGEMM GFLOP/s (higher is better)', yLabel: 'GFLOP/s', categories: cats,
             series: ser.map(se => ({name: se.name, folder: se.folder, refs: refs(se, 'gflops')})),
             bounds: peaks.map(p => ({name: 'FMA peak, 1 core', value: p}))}),
    barPlot({title: 'SGEMM % of the measured FMA peak', yLabel: '% of peak', categories: cats,
             series: ser.map(se => ({name: se.name, folder: se.folder, refs: refs(se, 'pct_peak')})),
             bounds: [{name: 'peak', value: 100}]}))];
  const vec = records(b => b === 'kernels.reductions' || b === 'kernels.conversions');
  if (vec.length) {
    const vcats = uniq(vec.map(r => r.line.params.kernel)), vser = seriesOf(vec);
    out.push(h('h3', null, 'Reductions and conversions (one thread, 16 MiB operands)'), plots(
      barPlot({title: 'GB/s moved (reads + writes)', yLabel: 'GB/s', categories: vcats,
               series: vser.map(se => ({name: se.name, folder: se.folder,
                 refs: vcats.map(c => { const r = se.recs.find(x => x.line.params.kernel === c); return r ? ref(r, 'gbps') : undefined; })})),
               bounds: uniq(vec.map(r => r.line.machine.memory_gbps)).map(v => ({name: 'memcpy', value: v}))})));
  }
  out.push(table([{title: 'engine', text: 1, cell: seriesName}, {title: 'shape', text: 1, cell: shape},
                  {title: 'GFLOP/s', cell: r => ref(r, 'gflops')}, {title: '% peak', cell: r => ref(r, 'pct_peak')}],
                 recs.concat(vec.length ? [] : [])));
  out.push(...linearKernels(), ...threadPool());
  return out;
});

/* `ak bench linear`: ak_linear per LLM weight type; T = 1 against the read bandwidth, more
 * tokens against the FMA peak */
function linearKernels() {
  const lin = records(isBench('kernels.linear'));
  if (!lin.length) return [];
  const out = [h('h3', null, 'ak_linear per weight type (`ak bench linear`)')];
  for (const [key, rs] of groupBy(lin, r => `${r.line.params.tokens} token(s) · ${r.line.params.threads} thread(s)`)) {
    const decode = rs[0].line.params.tokens === 1;
    /* the integer types' dot products (VNNI: 4 products per 32-bit lane) can pass the f32 peak */
    out.push(plots(barsBy({title: `${key}: % of the ${decode ? 'streaming-read bandwidth' : 'f32 FMA peak (integer dot products can pass it)'}`, yLabel: '%',
      recs: rs, catOf: r => `${r.line.params.type} ${r.line.params.n}×${r.line.params.k}`,
      field: decode ? 'pct_read_bw' : 'pct_fma_peak', bounds: [{name: 'bound', value: 100}]})));
  }
  out.push(table([{title: 'type', text: 1, cell: r => r.line.params.type}, {title: 'N×K', text: 1, cell: r => `${r.line.params.n}×${r.line.params.k}`},
                  {title: 'tokens', cell: r => r.line.params.tokens}, {title: 'threads', cell: r => r.line.params.threads},
                  {title: 'µs/call', cell: r => ref(r, 'us')}, {title: 'GB/s', cell: r => ref(r, 'gbps')},
                  {title: 'GFLOP/s', cell: r => ref(r, 'gflops')}], lin));
  return out;
}

/* `ak bench pool`: wake-up latencies spread over four decades, so bars on a log axis */
function threadPool() {
  const pool = records(isBench('core.pool'));
  if (!pool.length) return [];
  const fields = ['wake_spinning_p50_us', 'wake_spinning_p99_us', 'wake_sleeping_p50_us', 'wake_sleeping_p99_us', 'empty_parallel_for_us'];
  const label = f => f.replace(/_us$/, '').replace(/_/g, ' ');
  /* one series per engine, folder and thread count (the last line of each) */
  const series = [...groupBy(pool, r => `${seriesName(r)}, ${r.line.params.threads} threads`)].map(([name, rs]) => {
    const r = rs[rs.length - 1];
    return {name, folder: r.fi, refs: fields.map(f => fig(r, f) !== undefined ? ref(r, f) : undefined)};
  });
  return [h('h3', null, 'Thread pool wake-up, µs (`ak bench pool`)'),
          plots(barPlot({title: 'thread pool: wake-up and empty parallel-for, µs (log; lower is better)', yLabel: 'µs (log)',
                         categories: fields.map(label), series, yLog: true})),
          table([{title: 'engine', text: 1, cell: seriesName}, {title: 'threads', cell: r => r.line.params.threads},
                 ...fields.map(f => ({title: f.replace(/_us$/, '').replace(/_/g, ' '), cell: r => ref(r, f)}))], pool)];
}

section('comm', 'Collectives: allreduce bus bandwidth and latency by size', () => {
  const recs = records(b => b.startsWith('comm.') && b !== 'comm.bound');
  if (!recs.length) return [empty('No collective results here (`ak bench comm` and bench/comm/vs_peers.sh write them).')];
  const bounds = records(isBench('comm.bound'));
  const out = [];
  const groups = groupBy(recs, r => `${r.line.benchmark.slice(5)} · ${r.line.params.transport || 'auto'} · ${r.line.params.ranks} ranks`);
  for (const [key, rs] of groups) {
    const transport = rs[0].line.params.transport || 'auto';
    const bw = bounds.filter(b => (b.line.params.transport || 'tcp') === transport)
                     .map(b => ({name: `${engine(b.line)} ${transport}`, value: fig(b, 'gbps')}));
    if (transport !== 'tcp') /* shared memory: one memcpy of the machine is the ceiling */
      uniq(rs.map(r => r.line.machine.memory_gbps)).forEach(v => bw.push({name: 'memcpy', value: v}));
    /* a forced algorithm (--algo ring, hier, ...) is a series of its own */
    const algo = r => r.line.params.algo && r.line.params.algo !== 'auto' ? ` --algo ${r.line.params.algo}` : '';
    const ser = [...groupBy(rs, r => seriesName(r) + algo(r))].map(([name, g]) => ({name, folder: g[0].fi, recs: g}));
    const byIndex = ser.some(se => se.name.includes('--algo')); /* one engine: a color per algorithm */
    /* coll_algos.sh's lines carry time_us only: no busbw plot for them */
    const hasBusbw = rs.some(r => fig(r, 'busbw') !== undefined);
    out.push(h('h3', null, key), plots(
      hasBusbw && linePlot({title: `busbw GB/s by size (${key})`, xLabel: 'bytes', yLabel: 'busbw GB/s', xBytes: true,
                series: ser.map(se => ({name: se.name, folder: se.folder,
                  points: se.recs.filter(r => fig(r, 'busbw') !== undefined).map(r => ({x: r.line.params.bytes, ref: ref(r, 'busbw')}))})),
                bounds: bw.filter(b => b.value !== undefined), colorByIndex: byIndex}),
      linePlot({title: `latency µs by size (${key})`, xLabel: 'bytes', yLabel: 'time µs (log)', xBytes: true, yLog: true, colorByIndex: byIndex,
                series: ser.map(se => ({name: se.name, folder: se.folder,
                  points: se.recs.filter(r => fig(r, 'time_us') !== undefined).map(r => ({x: r.line.params.bytes, ref: ref(r, 'time_us')}))}))})));
  }
  out.push(table([{title: 'engine', text: 1, cell: seriesName}, {title: 'collective', text: 1, cell: r => r.line.benchmark},
                  {title: 'transport', text: 1, cell: r => r.line.params.transport}, {title: 'algo', text: 1, cell: r => r.line.params.algo},
                  {title: 'bytes', cell: r => r.line.params.bytes},
                  {title: 'time µs', cell: r => ref(r, 'time_us')}, {title: 'busbw GB/s', cell: r => ref(r, 'busbw')}], recs));
  return out;
});

section('infer', 'Inference: latency per model', () => {
  const recs = records(isBench('infer.latency'));
  const prof = records(isBench('infer.profile'));
  if (!recs.length && !prof.length) return [empty('No inference results here (bench/infer/vs_peers.sh writes them).')];
  const out = [];
  if (recs.length) {
    // one bar per model, or per model and thread count when runs of several are here
    // (else an engine's 1- and 2-thread latencies would share a bar, the first one shown)
    const manyThreads = uniq(recs.map(r => r.line.params.threads)).length > 1;
    const catOf = r => manyThreads ? `${r.line.params.model}, ${r.line.params.threads} threads` : r.line.params.model;
    const cats = uniq(recs.map(catOf)), ser = seriesOf(recs);
    out.push(plots(barPlot({title: 'latency p50 ms, batch 1 (lower is better)', yLabel: 'ms', categories: cats,
      series: ser.map(se => ({name: se.name, folder: se.folder,
        refs: cats.map(c => { const r = se.recs.find(x => catOf(x) === c); return r ? ref(r, 'p50_ms') : undefined; })}))})));
    out.push(table([{title: 'engine', text: 1, cell: seriesName}, {title: 'model', text: 1, cell: r => r.line.params.model},
                    {title: 'threads', cell: r => r.line.params.threads}, {title: 'p50 ms', cell: r => ref(r, 'p50_ms')}], recs));
  }
  if (prof.length) {
    for (const [model, rs] of groupBy(prof, r => r.line.params.model)) {
      const cats = uniq(rs.map(r => r.line.params.op)), ser = seriesOf(rs);
      out.push(h('h3', null, `Per-operator time, ${model} (AK_PROFILE beside the peer's profiler)`),
        plots(barPlot({title: `time per operator type, ms (${model})`, yLabel: 'ms', categories: cats,
          series: ser.map(se => ({name: se.name, folder: se.folder,
            refs: cats.map(c => { const r = se.recs.find(x => x.line.params.op === c); return r ? ref(r, 'ms') : undefined; })}))})));
    }
  } else {
    out.push(empty('No per-layer profile here (runs with AK_PROFILE write infer.profile lines).'));
  }
  return out;
});

section('llm', 'LLM: prefill and decode tokens/s per weight type and threads; server latency', () => {
  const recs = records(b => b === 'llm.prefill' || b === 'llm.decode' || b === 'llm.batched');
  const srv = records(isBench('llm.server'));
  if (!recs.length && !srv.length) return [empty('No LLM results here (bench/llm/vs_llamacpp.sh and `ak bench llm` write them).')];
  const out = [];
  for (const [key, rs] of groupBy(recs, r => `${r.line.benchmark.slice(4)} · ${r.line.params.threads} thread(s)`)) {
    const cats = uniq(rs.map(r => r.line.params.type)), ser = seriesOf(rs);
    const look = (se, c, f) => { const r = se.recs.find(x => x.line.params.type === c); return r && fig(r, f) !== undefined ? ref(r, f) : undefined; };
    const pctField = rs[0].line.benchmark === 'llm.prefill' ? 'pct_fma_peak' : 'pct_bandwidth';
    out.push(h('h3', null, key), plots(
      barPlot({title: `${key}: tokens/s (higher is better)`, yLabel: 'tokens/s', categories: cats,
               series: ser.map(se => ({name: se.name, folder: se.folder, refs: cats.map(c => look(se, c, 'tokens_per_s'))}))}),
      rs.some(r => fig(r, pctField) !== undefined) ?
        barPlot({title: `${key}: % of the ${pctField === 'pct_fma_peak' ? 'FMA peak' : 'read-bandwidth bound'}`, yLabel: '%',
                 categories: cats, bounds: [{name: 'bound', value: 100}],
                 series: ser.map(se => ({name: se.name, folder: se.folder, refs: cats.map(c => look(se, c, pctField))}))
                           .filter(se => se.refs.some(Boolean))}) : null));
  }
  if (recs.length)
    out.push(table([{title: 'engine', text: 1, cell: seriesName}, {title: 'phase', text: 1, cell: r => r.line.benchmark},
                    {title: 'type', text: 1, cell: r => r.line.params.type}, {title: 'threads', cell: r => r.line.params.threads},
                    {title: 'tokens/s', cell: r => ref(r, 'tokens_per_s')}], recs));
  if (srv.length) {
    const ser = seriesOf(srv), pts = (se, f) => se.recs.filter(r => fig(r, f) !== undefined).map(r => ({x: r.line.params.concurrency, ref: ref(r, f)}));
    const lines = (prefix) => ser.flatMap(se => ['p50', 'p90', 'p99'].map(p => ({name: `${se.name} ${p}`, folder: se.folder, points: pts(se, `${prefix}_${p}_ms`)})))
                                  .filter(x => x.points.length);
    out.push(h('h3', null, 'Server under concurrent streaming clients'), plots(
      linePlot({title: 'time to first token, ms, by concurrency', xLabel: 'concurrent clients', yLabel: 'TTFT ms', series: lines('ttft'), colorByIndex: true}),
      linePlot({title: 'inter-token latency, ms, by concurrency', xLabel: 'concurrent clients', yLabel: 'ITL ms', series: lines('itl'), colorByIndex: true})));
    out.push(table([{title: 'engine', text: 1, cell: seriesName}, {title: 'clients', cell: r => r.line.params.concurrency},
                    ...['ttft_p50_ms', 'ttft_p99_ms', 'itl_p50_ms', 'itl_p99_ms'].map(f => ({title: f, cell: r => ref(r, f)}))], srv));
  } else {
    out.push(empty('No server latency results here (`ak bench llm --url` writes them).'));
  }
  out.push(...speculative());
  return out;
});

/* `ak bench llm --draft`: speculative decoding against plain decoding of the same model */
function speculative() {
  const spec = records(isBench('llm.speculative'));
  if (!spec.length) return [];
  const cats = spec.map(r => `${r.line.params.model} + ${r.line.params.draft} γ${r.line.params.gamma} ·${r.line.params.threads}t` + (MULTI ? ` · ${DATA.folders[r.fi].label}` : ''));
  return [h('h3', null, 'Speculative decoding (`ak bench llm --draft`)'),
    plots(barPlot({title: 'decode tokens/s, plain and speculative (higher is better)', yLabel: 'tokens/s', categories: cats,
      series: [{name: 'plain decode', folder: 0, refs: spec.map(r => ref(r, 'plain_tokens_per_s'))},
               {name: 'speculative', folder: 0, refs: spec.map(r => ref(r, 'tokens_per_s'))}]})),
    table([{title: 'model + draft', text: 1, cell: (r) => cats[spec.indexOf(r)]}, {title: 'speedup', cell: r => ref(r, 'speedup')},
           {title: 'drafts accepted', cell: r => ref(r, 'drafts_accepted')}, {title: 'drafts proposed', cell: r => ref(r, 'drafts_proposed')}], spec)];
}

section('train', 'Training: step time against PyTorch DDP', () => {
  const recs = records(isBench('train.step'));
  if (!recs.length) return [empty('No training results here (bench/train/vs_ddp.sh writes them).')].concat(timelines(), optimizers());
  const caseOf = r => r.line.params.case + (r.line.params.ranks ? ` · ${r.line.params.ranks}r` : '');
  /* accelkit's variants (fp16 compression, DGC, ...) are series of their own */
  const variant = r => { const v = r.line.params.variant; return v && v !== 'ak' && v !== 'ddp' ? ` (${v})` : ''; };
  const cats = uniq(recs.map(caseOf));
  const ser = [...groupBy(recs, r => seriesName(r) + variant(r))].map(([name, rs]) => ({name, folder: rs[0].fi, recs: rs}));
  const out = [plots(barPlot({title: 'step time ms, median (lower is better)', yLabel: 'ms', categories: cats,
    series: ser.map(se => ({name: se.name, folder: se.folder,
      refs: cats.map(c => { const r = se.recs.find(x => caseOf(x) === c); return r ? ref(r, 'step_ms') : undefined; })}))}))];
  const withParts = recs.filter(r => r.line.figures.breakdown);
  if (withParts.length) {
    const names = uniq(withParts.flatMap(r => Object.keys(r.line.figures.breakdown)));
    const cats2 = withParts.map(r => `${seriesName(r)} ${caseOf(r)}`);
    out.push(plots(stackedPlot({title: 'step breakdown, ms', yLabel: 'ms', categories: cats2,
      parts: names.map(n => ({name: n, refs: withParts.map(r => fig(r, 'breakdown.' + n) !== undefined ? ref(r, 'breakdown.' + n) : undefined)}))})));
  }
  /* the runtime's own CPU share of the wall time (its ≤ 2 % target drawn as a bound) */
  const withOverhead = recs.filter(r => fig(r, 'runtime_overhead_pct') !== undefined);
  if (withOverhead.length)
    out.push(plots(barsBy({title: 'runtime overhead, % of the wall time (lower is better)', yLabel: '%', recs: withOverhead,
                           catOf: caseOf, field: 'runtime_overhead_pct', bounds: [{name: 'target', value: 2}]})));
  out.push(table([{title: 'engine', text: 1, cell: r => seriesName(r) + variant(r)}, {title: 'case', text: 1, cell: caseOf},
                  {title: 'step ms', cell: r => ref(r, 'step_ms')}, {title: 'samples/s', cell: r => ref(r, 'samples_per_s')},
                  {title: 'runtime overhead %', cell: r => ref(r, 'runtime_overhead_pct')},
                  {title: 'steady-state overhead %', cell: r => ref(r, 'steady_overhead_pct')}], recs));
  out.push(...timelines(), ...optimizers());
  return out;
});

/* bench/train/timeline_excerpt.py: the last step's gradient reduction, from the timeline */
function timelines() {
  const tl = records(isBench('train.timeline'));
  const out = [];
  for (const [key, rs] of groupBy(tl, r => `${r.line.params.case} · ${r.line.params.variant}` + (MULTI ? ` · ${DATA.folders[r.fi].label}` : ''))) {
    const lanes = uniq(rs.map(r => r.line.params.lane));
    out.push(h('h3', null, `Timeline excerpt, ${key}: the last step's gradient reduction (HOROVOD_TIMELINE)`),
      plots(timelinePlot({title: `${key}: negotiation, fusion copies and communication per tensor, ms`, lanes,
        events: rs.map(r => ({lane: r.line.params.lane, name: r.line.params.name, start: ref(r, 'start_ms'), dur: ref(r, 'dur_ms')}))})));
  }
  return out;
}

/* bench/train/optim_vs_torch.py: one fused optimizer step against torch.optim */
function optimizers() {
  const opt = records(isBench('train.optim'));
  if (!opt.length) return [];
  const catOf = r => `${r.line.params.optimizer} · ${r.line.params.params / 1e6} M`;
  return [h('h3', null, 'Fused optimizers, one step, one thread (bench/train/optim_vs_torch.py)'),
    plots(barsBy({title: 'optimizer step ms (lower is better)', yLabel: 'ms', recs: opt, catOf, field: 'step_ms'})),
    table([{title: 'engine', text: 1, cell: seriesName}, {title: 'optimizer', text: 1, cell: catOf},
           {title: 'step ms', cell: r => ref(r, 'step_ms')}, {title: 'GB/s', cell: r => ref(r, 'gbps')}], opt)];
}

section('plan', 'Planner: the best plans, time and memory per device', () => {
  const recs = records(isBench('plan.best'));
  if (!recs.length) return [empty('No planner results here (`ak plan ... --out DIR` writes them).')].concat(validation());
  const out = [];
  for (const [key, rs] of groupBy(recs, r => `${r.line.params.model} on ${r.line.params.devices} × ${r.line.params.cluster}, gbs ${r.line.params.gbs}` + (MULTI ? ` · ${DATA.folders[r.fi].label}` : ''))) {
    rs.sort((a, b) => a.line.params.rank - b.line.params.rank);
    const cats = rs.map(r => `#${r.line.params.rank}`);
    const tparts = uniq(rs.flatMap(r => Object.keys(r.line.figures.breakdown || {})));
    const mparts = uniq(rs.flatMap(r => Object.keys(r.line.figures.memory || {})));
    out.push(h('h3', null, key), plots(
      stackedPlot({title: 'time per iteration, s (stacked by part)', yLabel: 's', categories: cats,
        parts: tparts.map(n => ({name: n.replace(/_s$/, ''), refs: rs.map(r => fig(r, 'breakdown.' + n) !== undefined ? ref(r, 'breakdown.' + n) : undefined)}))}),
      stackedPlot({title: 'memory per device, GiB (stacked by part)', yLabel: 'GiB', categories: cats, unit: 1 << 30,
        parts: mparts.map(n => ({name: n.replace(/_bytes$/, ''), refs: rs.map(r => fig(r, 'memory.' + n) !== undefined ? ref(r, 'memory.' + n) : undefined)}))})));
    out.push(table([{title: 'rank', cell: r => r.line.params.rank}, {title: 'plan', text: 1, cell: r => r.line.params.plan},
                    {title: 's / iteration', cell: r => ref(r, 'time_per_iter_s')}, {title: 'MFU', cell: r => ref(r, 'mfu')},
                    {title: 'measured s / iteration', cell: r => ref(r, 'measured_time_per_iter_s')}], rs));
  }
  out.push(...validation());
  return out;
});

/* bench/plan/validate_published.py: the planner's predictions of published runs */
function validation() {
  const val = records(isBench('plan.validation'));
  if (!val.length) return [];
  const out = [h('h3', null, 'Predicted against published runs (bench/plan/validate_published.py)')];
  for (const [metric, rs] of groupBy(val, r => r.line.params.metric)) {
    const catOf = r => r.line.params.model + (metric === 'MFU' ? ` · ${r.line.params.plan}` : '');
    const own = rs.filter(r => !r.line.peer);
    out.push(plots(barsBy({title: `${metric}: predicted and published`, yLabel: metric, recs: rs, catOf, field: 'value'}),
      barsBy({title: `${metric}: predicted ÷ published (±15 % band)`, yLabel: 'ratio', recs: own, catOf, field: 'ratio_to_published',
              bounds: [{name: '-15 %', value: 0.85}, {name: '+15 %', value: 1.15}]})));
  }
  out.push(table([{title: 'source', text: 1, cell: r => r.line.params.source}, {title: 'model', text: 1, cell: r => r.line.params.model},
                  {title: 'plan', text: 1, cell: r => r.line.params.plan}, {title: 'engine', text: 1, cell: seriesName},
                  {title: 'value', cell: r => ref(r, 'value')}, {title: 'ratio', cell: r => ref(r, 'ratio_to_published')}], val));
  return out;
}

/* figures present in two folders or more: each folder's value and its change from the first */
section('compare', 'Comparison between result folders', () => {
  if (!MULTI) return [empty('One results folder: give `ak report` several to compare them side by side.')];
  const keyOf = r => [r.line.benchmark, engine(r.line), stable(r.line.params)].join('|');
  const all = records(() => true), byKey = groupBy(all, keyOf), rows = [];
  for (const [, rs] of byKey) {
    if (uniq(rs.map(r => r.fi)).length < 2) continue;
    for (const f of Object.keys(rs[0].line.figures))
      if (typeof rs[0].line.figures[f] === 'number') rows.push({rs, f});
  }
  if (!rows.length) return [empty('The folders share no measurement (same benchmark, engine and parameters).')];
  const t = h('table', {class: 'compare'});
  t.append(h('tr', null, h('th', {class: 'text'}, 'benchmark'), h('th', {class: 'text'}, 'engine'),
             h('th', {class: 'text'}, 'parameters'), h('th', {class: 'text'}, 'figure'),
             ...DATA.folders.map(f => h('th', null, f.label)), h('th', null, 'change')));
  let flagged = 0;
  for (const {rs, f} of rows) {
    const cells = DATA.folders.map((_, fi) => { const r = rs.find(x => x.fi === fi); return r ? ref(r, f) : undefined; });
    const base = cells[0] && cells[0].value, last = [...cells].reverse().find(c => c && c.value !== undefined);
    const change = base ? last.value / base - 1 : undefined;
    /* higher is better except for times */
    const better = change === undefined ? 0 : (/(_ms|_us|_s)$/.test(f) ? -change : change);
    const cls = Math.abs(change || 0) < 0.05 ? null : better > 0 ? 'diff-up' : 'diff-down';
    if (cls) flagged++;
    t.append(h('tr', null, h('td', {class: 'text'}, rs[0].line.benchmark), h('td', {class: 'text'}, engine(rs[0].line)),
      h('td', {class: 'text'}, Object.entries(rs[0].line.params).map(([k, v]) => `${k}=${v}`).join(' ')), h('td', {class: 'text'}, f),
      ...cells.map(c => c && c.value !== undefined ? h('td', {'data-src': c.src, 'data-field': c.field}, String(c.value)) : h('td', null, '–')),
      h('td', {class: cls}, change === undefined ? '–' : `${change >= 0 ? '+' : ''}${(100 * change).toFixed(1)} %`)));
  }
  return [h('p', {class: 'note'}, `${rows.length} figures measured in several folders; ${flagged} differ by 5 % or more ` +
            '(green: better, red: worse; times are better lower).'), t];
});

/* ---- the page ----------------------------------------------------------------------- */

function render() {
  const main = document.getElementById('main'), nav = document.getElementById('nav');
  const lines = DATA.folders.reduce((n, f) => n + f.lines.length, 0);
  document.getElementById('summary').textContent =
    `${lines} results lines from ${DATA.folders.map(f => f.label).join(', ')}; generated ${DATA.generated} by accelkit ${DATA.accelkit}.`;
  for (const sec of SECTIONS) {
    const el = h('section', {id: sec.id, 'data-section': sec.id}, h('h2', null, sec.title));
    try {
      el.append(...sec.render());
    } catch (e) { /* one broken section must not hide the others; the console says why */
      console.error(`section ${sec.id}: ${e && e.stack || e}`);
      el.append(h('p', {class: 'empty error'}, `This section failed to render: ${e}`));
    }
    main.append(el);
    nav.append(h('a', {href: '#' + sec.id}, sec.title.split(':')[0]));
  }
  document.body.setAttribute('data-rendered', 'true');
}

render();
