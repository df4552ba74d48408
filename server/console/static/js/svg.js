// SVG drawing for the patient chart: line charts with hover and links,
// sparklines and a zoomable timeline. Every shape is built through the
// DOM (nothing is parsed as markup) and styled by style.css, so the
// console's Content-Security-Policy needs no inline style or script.
import {safeHref} from './dom.js';

const NS = 'http://www.w3.org/2000/svg';

// s builds an SVG element as h builds an HTML one.
export function s(tag, attrs, ...children) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k === 'href') el.setAttribute('href', safeHref(v));
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// linear maps the domain [d0, d1] onto [r0, r1]; a point domain maps to the middle.
function linear(d0, d1, r0, r1) {
  if (d1 === d0) return () => (r0 + r1) / 2;
  const k = (r1 - r0) / (d1 - d0);
  return (v) => r0 + (v - d0) * k;
}

const round = (v) => Math.round(v * 10) / 10;

// niceTicks spans [min, max] with about count round steps (1, 2, 2.5, 5
// times a power of ten).
export function niceTicks(min, max, count = 4) {
  if (min === max) {
    const d = Math.abs(min) * 0.1 || 1;
    min -= d;
    max += d;
  }
  const raw = (max - min) / count;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((x) => x >= raw);
  const lo = Math.floor(min / step) * step;
  const hi = Math.ceil(max / step) * step;
  const ticks = [];
  for (let v = lo; v <= hi + step / 2; v += step) ticks.push(Number(v.toPrecision(12)));
  return {lo, hi, ticks};
}

const DAY = 864e5;
// TIME_STEPS are the tick intervals of a time axis, smallest first.
const TIME_STEPS = [[DAY, 'day', 1], [2 * DAY, 'day', 2], [7 * DAY, 'day', 7], [31 * DAY, 'month', 1], [92 * DAY, 'month', 3],
  [183 * DAY, 'month', 6], [366 * DAY, 'year', 1], [731 * DAY, 'year', 2], [1827 * DAY, 'year', 5], [3653 * DAY, 'year', 10],
  [7306 * DAY, 'year', 20], [18263 * DAY, 'year', 50]];

// timeTicks are at most about count calendar-aligned ticks in [t0, t1].
export function timeTicks(t0, t1, count = 6) {
  const [, unit, n] = TIME_STEPS.find(([ms]) => (t1 - t0) / ms <= count) || TIME_STEPS[TIME_STEPS.length - 1];
  const d = new Date(t0);
  let cur = unit === 'day' ? new Date(d.getFullYear(), d.getMonth(), d.getDate())
    : unit === 'month' ? new Date(d.getFullYear(), d.getMonth() - (d.getMonth() % n), 1)
      : new Date(d.getFullYear() - (d.getFullYear() % n), 0, 1);
  const out = [];
  for (let guard = 0; cur.getTime() <= t1 && guard < 400; guard++) {
    if (cur.getTime() >= t0) out.push({t: cur.getTime(), label: tickLabel(cur, unit)});
    cur = unit === 'day' ? new Date(cur.getFullYear(), cur.getMonth(), cur.getDate() + n)
      : unit === 'month' ? new Date(cur.getFullYear(), cur.getMonth() + n, 1)
        : new Date(cur.getFullYear() + n, 0, 1);
  }
  return out;
}

// Formatters are made once: making one per call (toLocaleString) costs
// more than drawing the point it labels.
const MONTH_FMT = new Intl.DateTimeFormat(undefined, {month: 'short', year: '2-digit'});
const MONTH_DAY_FMT = new Intl.DateTimeFormat(undefined, {month: 'short', day: 'numeric'});
const DAY_FMT = new Intl.DateTimeFormat(undefined, {year: 'numeric', month: 'short', day: 'numeric'});
const WHEN_FMT = new Intl.DateTimeFormat(undefined, {year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit'});
const TIME_FMT = new Intl.DateTimeFormat(undefined, {hour: '2-digit', minute: '2-digit'});

function tickLabel(d, unit) {
  if (unit === 'year') return String(d.getFullYear());
  return (unit === 'month' ? MONTH_FMT : MONTH_DAY_FMT).format(d);
}

// fmtDay is a date to read: 3 Jan 2025 (in the browser's locale).
export function fmtDay(t) { return DAY_FMT.format(t); }

// fmtWhen is a date and time to read.
export function fmtWhen(t) { return WHEN_FMT.format(t); }

// fmtTime is the time of day to read.
export function fmtTime(t) { return TIME_FMT.format(t); }

// tooltip is a box of text lines inside an SVG of width w and height h,
// placed next to a point and kept inside the picture.
function tooltip(w, h) {
  const text = s('text', {class: 'tip-text'});
  const box = s('rect', {class: 'tip-box', rx: 3});
  const g = s('g', {class: 'tip', visibility: 'hidden', 'aria-hidden': 'true'}, box, text);
  return {
    g,
    show(lines, px, py) {
      text.replaceChildren(...lines.map((l, i) => s('tspan', {x: 0, dy: i ? '1.3em' : '1em', class: i ? null : 'tip-head'}, l)));
      g.setAttribute('visibility', 'visible');
      const b = text.getBBox();
      box.setAttribute('x', round(b.x - 6));
      box.setAttribute('y', round(b.y - 4));
      box.setAttribute('width', round(b.width + 12));
      box.setAttribute('height', round(b.height + 8));
      let tx = px + 12;
      if (tx + b.width + 10 > w) tx = px - b.width - 14;
      let ty = py - b.height - 12;
      if (ty < 4) ty = py + 12;
      if (ty + b.height > h) ty = h - b.height - 4;
      g.setAttribute('transform', 'translate(' + round(Math.max(6, tx)) + ',' + round(ty) + ')');
    },
    hide() { g.setAttribute('visibility', 'hidden'); },
  };
}

// hoverable makes a linked mark show the tooltip while the pointer is on
// it or it has the keyboard focus.
function hoverable(a, tip, lines, x, y) {
  const show = () => { a.classList.add('active'); tip.show(lines, x, y); };
  const hide = () => { a.classList.remove('active'); tip.hide(); };
  a.addEventListener('mouseenter', show);
  a.addEventListener('focus', show);
  a.addEventListener('mouseleave', hide);
  a.addEventListener('blur', hide);
  return a;
}

// lineChart draws series of points ({t, value, low?, high?}) over the time
// domain [t0, t1]: both axes, each point's reference range shaded from it
// to the next point, one line per series, and one linked point per
// reading that shows tip(series, point) on hover. opts: {label, series,
// domain, bounds?, href(point), tip(series, point), describe(series, point)}.
export function lineChart(opts) {
  const W = 560, H = 190, M = {l: 46, r: 14, t: 10, b: 26};
  const points = opts.series.flatMap((ser) => ser.points);
  const values = points.map((p) => p.value);
  let min = Math.min(...values), max = Math.max(...values);
  // Reference bounds widen the axis when they sit near the data; a far
  // bound would flatten the line, so it is cut at the edge instead.
  const span = Math.max(max - min, Math.abs(max) * 0.1, 1);
  for (const p of points) {
    for (const b of [p.low, p.high]) {
      if (typeof b === 'number' && b > min - span && b < max + span) { min = Math.min(min, b); max = Math.max(max, b); }
    }
  }
  let {lo, hi, ticks} = niceTicks(min, max, 4);
  if (opts.bounds) { // a percentage stops at 100
    lo = Math.max(lo, opts.bounds[0]);
    hi = Math.min(hi, opts.bounds[1]);
    ticks = ticks.filter((v) => v >= lo && v <= hi);
  }
  const [t0, t1] = opts.domain;
  const x = linear(t0, t1, M.l, W - M.r);
  const y = linear(lo, hi, H - M.b, M.t);
  const cy = (v) => round(y(Math.min(hi, Math.max(lo, v))));
  const tip = tooltip(W, H);
  const grid = s('g', {class: 'grid'}, ticks.map((v) => s('line', {x1: M.l, x2: W - M.r, y1: round(y(v)), y2: round(y(v))})));
  const yAxis = s('g', {class: 'axis'}, ticks.map((v) => s('text', {x: M.l - 6, y: round(y(v)), 'text-anchor': 'end', 'dominant-baseline': 'middle'}, String(v))));
  const xAxis = s('g', {class: 'axis'}, s('line', {x1: M.l, x2: W - M.r, y1: H - M.b, y2: H - M.b}),
    timeTicks(t0, t1, 6).map((tk) => s('text', {x: round(x(tk.t)), y: H - 8, 'text-anchor': 'middle'}, tk.label)));
  const bands = s('g', {class: 'bands'});
  const lines = s('g', {class: 'lines'});
  const marks = s('g', {class: 'points'});
  opts.series.forEach((ser, si) => {
    ser.points.forEach((p, i) => {
      if (typeof p.low !== 'number' && typeof p.high !== 'number') return;
      const next = ser.points[i + 1];
      const xa = i === 0 ? M.l : x(p.t), xb = next ? x(next.t) : W - M.r;
      const top = cy(typeof p.high === 'number' ? p.high : hi), bottom = cy(typeof p.low === 'number' ? p.low : lo);
      bands.append(s('rect', {class: 'band s' + si, x: round(xa), width: round(Math.max(1, xb - xa)), y: top, height: round(Math.max(1, bottom - top))}));
    });
    if (ser.points.length > 1) {
      lines.append(s('polyline', {class: 'line s' + si, points: ser.points.map((p) => round(x(p.t)) + ',' + cy(p.value)).join(' ')}));
    }
    for (const p of ser.points) {
      const px = round(x(p.t)), py = cy(p.value);
      const a = s('a', {class: 'pt s' + si, href: opts.href(p), 'aria-label': opts.describe(ser, p), dataset: {t: p.t, value: p.value, series: ser.key, id: p.id}},
        s('circle', {class: 'hit', cx: px, cy: py, r: 9}), s('circle', {class: 'dot', cx: px, cy: py, r: 3.2}));
      marks.append(hoverable(a, tip, opts.tip(ser, p), px, py));
    }
  });
  return s('svg', {class: 'linechart', viewBox: '0 0 ' + W + ' ' + H, role: 'group', 'aria-label': opts.label},
    grid, bands, yAxis, xAxis, lines, marks, tip.g);
}

// sparkline is a small trend of values in time order, the last one marked.
export function sparkline(points, label) {
  const W = 96, H = 24, P = 3;
  const svg = s('svg', {class: 'sparkline', viewBox: '0 0 ' + W + ' ' + H, role: 'img', 'aria-label': label});
  if (points.length === 0) return svg;
  const vs = points.map((p) => p.value);
  const x = linear(points[0].t, points[points.length - 1].t, P, W - P);
  const y = linear(Math.min(...vs), Math.max(...vs), H - P, P);
  if (points.length > 1) svg.append(s('polyline', {points: points.map((p) => round(x(p.t)) + ',' + round(y(p.value))).join(' ')}));
  const last = points[points.length - 1];
  svg.append(s('circle', {cx: round(points.length > 1 ? x(last.t) : W - P), cy: round(y(last.value)), r: 2.2}));
  return svg;
}

// SHAPES are the marks of a point in time, one per lane, so that lanes
// differ by more than their colour.
const SHAPES = {
  circle: (x, y) => s('circle', {class: 'shape', cx: x, cy: y, r: 5}),
  diamond: (x, y) => s('path', {class: 'shape', d: 'M' + x + ' ' + (y - 6.5) + 'l6.5 6.5l-6.5 6.5l-6.5 -6.5z'}),
  square: (x, y) => s('rect', {class: 'shape', x: x - 4.5, y: y - 4.5, width: 9, height: 9}),
  triangle: (x, y) => s('path', {class: 'shape', d: 'M' + x + ' ' + (y - 6) + 'l6 11h-12z'}),
};

// timelineChart draws marks ({lane, t0, t1, label, type, id}) in lanes
// along one time axis that zooms (the buttons, or Ctrl and the mouse
// wheel) and pans (dragging); each mark links to href(mark) and shows
// tip(mark) on hover. It returns the element with zoom(factor, at),
// pan(ms) and reset() for the buttons.
export function timelineChart(opts) {
  const LANE = 26, TOP = 26, LEFT = 176, W = 1100;
  const H = TOP + opts.lanes.length * LANE + 6;
  const ts = opts.marks.flatMap((m) => [m.t0, m.t1]);
  let full = ts.length ? [Math.min(...ts), Math.max(...ts)] : [Date.now() - 365 * DAY, Date.now()];
  const pad = Math.max((full[1] - full[0]) * 0.02, DAY);
  full = [full[0] - pad, full[1] + pad];
  let dom = full.slice();
  const minSpan = 2 * DAY;
  const tip = tooltip(W, H);
  const axis = s('g', {class: 'axis'});
  const body = s('g', {class: 'marks'});
  const laneIndex = new Map(opts.lanes.map((l, i) => [l.key, i]));
  const svg = s('svg', {class: 'timeline', id: opts.id, viewBox: '0 0 ' + W + ' ' + H, role: 'group', 'aria-label': opts.label},
    opts.lanes.map((l, i) => [
      s('rect', {class: 'lane' + (i % 2 ? ' odd' : ''), x: 0, y: TOP + i * LANE, width: W, height: LANE}),
      s('text', {class: 'lane-title', x: 6, y: TOP + i * LANE + LANE / 2, 'dominant-baseline': 'middle'}, l.title)]),
    axis, body, tip.g);
  const draw = () => {
    const x = linear(dom[0], dom[1], LEFT, W - 8);
    axis.replaceChildren(...timeTicks(dom[0], dom[1], 9).map((tk) => s('g', null,
      s('line', {x1: round(x(tk.t)), x2: round(x(tk.t)), y1: TOP - 4, y2: H - 6}),
      s('text', {x: round(x(tk.t)), y: TOP - 9, 'text-anchor': 'middle'}, tk.label))));
    const shown = [];
    for (const m of opts.marks) {
      if (m.t1 < dom[0] || m.t0 > dom[1]) continue;
      const lane = laneIndex.get(m.lane);
      const yc = TOP + lane * LANE + LANE / 2;
      const xa = Math.max(LEFT, x(m.t0)), xb = Math.min(W - 8, x(m.t1));
      const shape = m.t1 - m.t0 > 0 && xb - xa >= 6
        ? s('rect', {class: 'shape', x: round(xa), y: yc - 6, width: round(xb - xa), height: 12, rx: 2})
        : SHAPES[opts.lanes[lane].shape || 'circle'](round(x(m.t0)), yc);
      const a = s('a', {class: 'mark ' + m.lane, href: opts.href(m), 'aria-label': opts.tip(m).join(', '), dataset: {type: m.type, id: m.id, t: m.t0}},
        s('circle', {class: 'hit', cx: round((xa + xb) / 2), cy: yc, r: 9}), shape);
      shown.push(hoverable(a, tip, opts.tip(m), round((xa + xb) / 2), yc));
    }
    body.replaceChildren(...shown);
    svg.dataset.t0 = Math.round(dom[0]);
    svg.dataset.t1 = Math.round(dom[1]);
    svg.dataset.shown = shown.length;
    if (opts.onChange) opts.onChange(dom[0], dom[1], shown.length);
  };
  // set keeps the range inside the record, and at least minSpan wide.
  const set = (a, b) => {
    let span = Math.min(Math.max(b - a, minSpan), full[1] - full[0]);
    a = Math.min(Math.max(a, full[0]), full[1] - span);
    dom = [a, a + span];
    draw();
  };
  const api = {
    zoom(factor, at) {
      const c = at === undefined ? (dom[0] + dom[1]) / 2 : at;
      set(c - (c - dom[0]) * factor, c + (dom[1] - c) * factor);
    },
    pan(ms) { set(dom[0] + ms, dom[1] + ms); },
    reset() { dom = full.slice(); draw(); },
  };
  // Pointer positions in the picture's own units.
  const toT = (clientX) => {
    const r = svg.getBoundingClientRect();
    const vx = (clientX - r.left) * (W / r.width);
    return dom[0] + (vx - LEFT) * (dom[1] - dom[0]) / (W - 8 - LEFT);
  };
  svg.addEventListener('wheel', (ev) => {
    if (!ev.ctrlKey && !ev.metaKey) return; // a plain wheel scrolls the page
    ev.preventDefault();
    api.zoom(ev.deltaY < 0 ? 0.8 : 1.25, toT(ev.clientX));
  });
  let drag = null;
  svg.addEventListener('pointerdown', (ev) => {
    if (ev.button !== 0 || ev.target.closest('a')) return;
    drag = {x: ev.clientX, dom: dom.slice(), moved: false};
    svg.setPointerCapture(ev.pointerId);
  });
  svg.addEventListener('pointermove', (ev) => {
    if (!drag) return;
    const r = svg.getBoundingClientRect();
    const dt = (ev.clientX - drag.x) * (W / r.width) * (drag.dom[1] - drag.dom[0]) / (W - 8 - LEFT);
    if (Math.abs(ev.clientX - drag.x) > 2) drag.moved = true;
    if (drag.moved) set(drag.dom[0] - dt, drag.dom[1] - dt);
  });
  const end = () => { drag = null; };
  svg.addEventListener('pointerup', end);
  svg.addEventListener('pointercancel', end);
  draw();
  return {el: svg, ...api, domain: () => dom.slice(), full: () => full.slice()};
}
