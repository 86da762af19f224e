// Loads an `ak report` page in headless Chromium (Debian's chromium, driven by
// puppeteer-core) and checks what a person would see:
//   - no script error or console error, no request leaving the file (no network);
//   - every section rendered; the sections named by --plots have plots, those named by
//     --empty say that they have no data (and draw no plot);
//   - each plot has its axes (with ticks) and its series, each series its marks;
//   - every number the page shows with a source (data-src FILE:LINE, data-field) equals
//     that field of that line of the results files, read here from ROOT;
// then writes a screenshot and prints its path and the page's load time.
// usage: node check_report.js REPORT.html ROOT SCREENSHOT.png --plots a,b --empty c,d [--max-load-ms N]
//        [--categories 'TITLE=N' ...] (that plot has N x-axis categories)
'use strict';
const fs = require('fs');
const path = require('path');
const puppeteer = require('puppeteer-core');

const SECTIONS = ['machine', 'sgemm', 'comm', 'infer', 'llm', 'train', 'plan', 'compare'];

function parseArgs(argv) {
  const [report, root, shot, ...rest] = argv;
  const opts = {report: path.resolve(report), root: path.resolve(root), shot: path.resolve(shot),
                plots: [], empty: [], categories: [], maxLoadMs: 1000};
  for (let i = 0; i < rest.length; i += 2) {
    if (rest[i] === '--plots') opts.plots = rest[i + 1].split(',').filter(Boolean);
    else if (rest[i] === '--empty') opts.empty = rest[i + 1].split(',').filter(Boolean);
    else if (rest[i] === '--max-load-ms') opts.maxLoadMs = Number(rest[i + 1]);
    else if (rest[i] === '--categories') { /* TITLE=N: the plot titled TITLE has N x-axis categories */
      const eq = rest[i + 1].lastIndexOf('=');
      opts.categories.push({title: rest[i + 1].slice(0, eq), n: Number(rest[i + 1].slice(eq + 1))});
    }
    else throw new Error('unknown argument ' + rest[i]);
  }
  return opts;
}

/* the value of field ("figures.gflops", "figures.breakdown.gemm_s") of FILE:LINE under root */
const fileCache = new Map();
function sourceValue(root, src, field) {
  const cut = src.lastIndexOf(':');
  const file = path.join(root, src.slice(0, cut)), n = Number(src.slice(cut + 1));
  if (!fileCache.has(file)) fileCache.set(file, fs.readFileSync(file, 'utf8').split('\n'));
  let v = JSON.parse(fileCache.get(file)[n - 1]);
  for (const part of field.split('.')) v = v[part];
  return v;
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  const problems = [];
  const browser = await puppeteer.launch({executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
                                          headless: true, args: ['--no-sandbox', '--disable-gpu']});
  try {
    const page = await browser.newPage();
    await page.setViewport({width: 1300, height: 900});
    page.on('console', m => { if (m.type() === 'error') problems.push('console error: ' + m.text()); });
    page.on('pageerror', e => problems.push('script error: ' + e.message));
    await page.setRequestInterception(true);
    page.on('request', r => {
      if (r.url().startsWith('file:') || r.url().startsWith('data:')) return r.continue();
      problems.push('network request: ' + r.url());
      r.abort();
    });
    await page.goto('file://' + o.report, {waitUntil: 'load'});
    await page.waitForSelector('body[data-rendered="true"]', {timeout: 5000});
    /* navigation start to the end of the load event: the inline script has drawn by then */
    const loadMs = await page.evaluate(() => performance.getEntriesByType('navigation')[0].loadEventEnd);
    const view = await page.evaluate((sections) => {
      const out = {sections: {}, plots: [], values: []};
      for (const id of sections) {
        const sec = document.querySelector(`section[data-section="${id}"]`);
        out.sections[id] = sec ? {plots: sec.querySelectorAll('figure.ak-plot').length,
                                  empty: sec.querySelectorAll('p.empty').length,
                                  tables: sec.querySelectorAll(':scope > table').length,
                                  error: sec.querySelectorAll('p.error').length} : null;
      }
      for (const f of document.querySelectorAll('figure.ak-plot')) {
        const axis = c => f.querySelectorAll(`svg g.axis.${c} g.tick`).length;
        out.plots.push({title: f.dataset.title, kind: f.dataset.kind, xTicks: axis('x'), yTicks: axis('y'),
                        hasAxes: !!f.querySelector('svg g.axis.x') && !!f.querySelector('svg g.axis.y'),
                        series: [...f.querySelectorAll('svg g.series')].map(g => ({
                          name: g.dataset.name, marks: g.querySelectorAll('[data-value]').length})),
                        legend: f.querySelectorAll('.legend > span').length});
      }
      for (const e of document.querySelectorAll('[data-src][data-field]'))
        out.values.push({src: e.dataset.src, field: e.dataset.field, tag: e.tagName.toLowerCase(),
                         shown: e.tagName.toLowerCase() === 'td' ? e.textContent : e.getAttribute('data-value')});
      return out;
    }, SECTIONS);

    for (const id of SECTIONS) {
      const s = view.sections[id];
      if (!s) { problems.push(`section ${id} missing`); continue; }
      if (s.error) problems.push(`section ${id} failed to render`);
      if (!s.plots && !s.empty && !s.tables) problems.push(`section ${id}: neither plots, a table nor a note`);
    }
    for (const id of o.plots) if (view.sections[id] && !view.sections[id].plots) problems.push(`section ${id}: no plot`);
    for (const id of o.empty) {
      const s = view.sections[id];
      if (s && (s.plots || !s.empty)) problems.push(`section ${id}: want the no-data note and no plot`);
    }
    for (const p of view.plots) {
      /* a bar plot may have one category; a line plot's x axis needs a scale */
      if (!p.hasAxes || p.xTicks < (p.kind === 'line' ? 2 : 1) || p.yTicks < 2) problems.push(`plot "${p.title}": axes missing or without ticks (${p.xTicks} x, ${p.yTicks} y)`);
      if (!p.series.length) problems.push(`plot "${p.title}": no series`);
      for (const se of p.series) if (!se.marks) problems.push(`plot "${p.title}": series ${se.name} has no point`);
      if (p.legend < p.series.length) problems.push(`plot "${p.title}": ${p.series.length} series but ${p.legend} legend entries`);
    }
    for (const c of o.categories) {
      const p = view.plots.find(q => q.title === c.title);
      if (!p) problems.push(`no plot titled "${c.title}"`);
      else if (p.xTicks !== c.n) problems.push(`plot "${c.title}": ${p.xTicks} categories, want ${c.n}`);
    }
    let checked = 0;
    for (const v of view.values) {
      const want = sourceValue(o.root, v.src, v.field);
      if (String(want) !== v.shown) problems.push(`${v.tag} from ${v.src} ${v.field}: page shows ${v.shown}, the file has ${want}`);
      checked++;
    }
    if (checked < 20) problems.push(`only ${checked} numbers carry their source`);
    if (loadMs > o.maxLoadMs) problems.push(`load took ${loadMs.toFixed(0)} ms (limit ${o.maxLoadMs})`);
    await page.screenshot({path: o.shot, fullPage: true});
    const marks = view.plots.reduce((n, p) => n + p.series.reduce((m, s) => m + s.marks, 0), 0);
    console.log(`report ${o.report}: ${view.plots.length} plots, ${marks} marks, ${checked} numbers checked ` +
                `against the results files, loaded in ${loadMs.toFixed(0)} ms`);
    console.log(`screenshot: ${o.shot}`);
  } finally {
    await browser.close();
  }
  for (const p of problems) console.log('FAIL ' + p);
  process.exit(problems.length ? 1 : 0);
}

main().catch(e => { console.log('FAIL ' + (e && e.stack || e)); process.exit(1); });
