// The drawn parts of the patient chart: vital-sign trends with their
// table, the laboratory results with trend lines, and the timeline.
import {h, enc, clear, append} from '../dom.js';
import * as data from '../chartdata.js';
import {lineChart, sparkline, timelineChart, fmtDay, fmtWhen} from '../svg.js';

const DAY = 864e5;

// RANGES are the choices of the vital signs' time range, each ending at
// the latest reading (a record's readings stop at the last visit, which
// may be long ago: a range ending today would show nothing).
const RANGES = [
  {key: '1m', label: '1 month', start: (t) => shift(t, 0, -1)},
  {key: '1y', label: '1 year', start: (t) => shift(t, -1, 0)},
  {key: 'all', label: 'All', start: () => -Infinity},
];

// shift moves an instant by calendar years and months (UTC).
function shift(t, years, months) {
  const d = new Date(t);
  d.setUTCFullYear(d.getUTCFullYear() + years, d.getUTCMonth() + months);
  return d.getTime();
}

const obsRoute = (id) => '#/r/Observation/' + enc(id);

// fmtValue is a charted value with its unit.
const fmtValue = (v, unit) => data.fmtNumber(v) + ' ' + unit;

// vitalsSection draws a chart per vital sign with the time range control,
// and the same readings as a table.
export function vitalsSection(vitals, error) {
  const box = h('section', {class: 'card vitals', id: 'vitals'}, h('h2', null, 'Vital signs'));
  if (error) {
    box.append(h('p', {class: 'muted refused'}, 'Not shown: ' + error + '.'));
    return box;
  }
  const all = vitals.charts.flatMap((c) => c.series.flatMap((s) => s.points));
  if (all.length === 0) {
    append(box, [h('p', {class: 'muted empty', id: 'vitals-none'}, 'No vital signs recorded.'), otherVitals(vitals.other)]);
    return box;
  }
  const first = Math.min(...all.map((p) => p.t));
  const latest = Math.max(...all.map((p) => p.t));
  const caption = h('span', {class: 'muted', id: 'range-caption'});
  const buttons = RANGES.map((r) => h('button', {type: 'button', class: 'secondary', id: 'range-' + r.key, 'aria-pressed': 'false', onclick: () => show(r.key)}, r.label));
  const grid = h('div', {class: 'vital-grid'});
  const tableBox = h('div', {class: 'vitals-table-box'});
  append(box, [h('div', {class: 'row range no-print', role: 'group', 'aria-label': 'Time range'}, h('span', null, 'Show'), buttons, caption),
    h('p', {class: 'print-only muted', id: 'range-print'}), grid,
    h('h3', null, 'Readings as a table'), tableBox, otherVitals(vitals.other)]);
  const show = (key) => {
    const range = RANGES.find((r) => r.key === key);
    const from = Math.max(range.start(latest), first);
    buttons.forEach((b, i) => b.setAttribute('aria-pressed', String(RANGES[i].key === key)));
    box.dataset.range = key;
    const text = 'From ' + fmtDay(from) + ' to the latest reading, ' + fmtDay(latest) + '.';
    clear(caption, text);
    clear(box.querySelector('#range-print'), RANGES.find((r) => r.key === key).label + ': ' + text);
    const pad = Math.max((latest - from) * 0.03, DAY / 2);
    const domain = [from - pad, latest + pad];
    const inRange = (p) => p.t >= range.start(latest) && p.t <= latest;
    const charts = vitals.charts.map((c) => ({...c, series: c.series.map((s) => ({...s, points: s.points.filter(inRange)}))}));
    clear(grid, charts.map((c, i) => vitalFigure(c, vitals.charts[i], domain)));
    clear(tableBox, vitalsTable(charts));
  };
  show('all');
  return box;
}

// latestOf is the latest reading of a chart as text: blood pressure as
// systolic/diastolic of one Observation.
function latestOf(c) {
  const lasts = c.series.map((s) => s.points[s.points.length - 1]).filter(Boolean);
  if (!lasts.length) return null;
  const top = lasts.reduce((a, b) => (b.t > a.t ? b : a));
  if (c.series.length > 1) {
    const parts = c.series.map((s) => {
      const same = s.points.filter((p) => p.id === top.id).pop() || s.points[s.points.length - 1];
      return same ? data.fmtNumber(same.value) : '–';
    });
    return {text: parts.join('/') + ' ' + c.unitLabel, t: top.t, id: top.id, from: top.from};
  }
  return {text: fmtValue(top.value, c.unitLabel), t: top.t, id: top.id, from: top.from};
}

// vitalFigure is one chart: its title, its latest reading (over all
// time), what was converted, and the points of the range.
function vitalFigure(c, whole, domain) {
  const latest = latestOf(whole);
  const n = c.series.reduce((k, s) => k + s.points.length, 0);
  const fig = h('figure', {class: 'vital', id: 'vital-' + c.key, dataset: {points: n}},
    h('figcaption', null, h('strong', null, c.title),
      latest ? [' ', h('a', {class: 'latest', id: 'latest-' + c.key, href: obsRoute(latest.id)}, latest.text), h('span', {class: 'muted'}, ' · ' + fmtDay(latest.t)),
        latest.from ? [h('span', {class: 'muted'}, ' · '), h('a', {class: 'from-response', id: 'from-' + c.key, href: '#/response/' + enc(latest.from)}, 'assessment')] : null] : h('span', {class: 'muted'}, ' no readings'),
      c.series.length > 1 ? h('span', {class: 'legend'}, c.series.map((s, i) => h('span', {class: 'key s' + i}, s.label))) : null,
      whole.converted.length ? h('span', {class: 'converted muted'}, ' · ' + whole.converted.map((x) => x.count + ' in ' + x.from).join(', ') + ' converted to ' + c.unitLabel) : null));
  if (n === 0) {
    fig.append(h('p', {class: 'muted empty'}, latest ? 'No readings in this range.' : 'No readings.'));
    return fig;
  }
  const label = (s, p) => s.label + ' ' + fmtValue(p.value, c.unitLabel) + ' on ' + fmtWhen(p.t);
  fig.append(lineChart({
    label: c.title + ': ' + n + ' reading' + (n === 1 ? '' : 's') + (latest ? ', latest ' + latest.text : ''),
    series: c.series, domain, bounds: c.bounds, href: (p) => obsRoute(p.id), describe: label,
    tip: (s, p) => [
      (c.series.length > 1 ? s.label + ' ' : '') + fmtValue(p.value, c.unitLabel),
      fmtWhen(p.t),
      p.recorded ? 'recorded as ' + data.fmtNumber(p.recorded.value) + ' ' + data.unitLabel(p.recorded.unit) : null,
      typeof p.low === 'number' || typeof p.high === 'number' ? 'reference ' + (typeof p.low === 'number' ? data.fmtNumber(p.low) : '') + '–' + (typeof p.high === 'number' ? data.fmtNumber(p.high) : '') : null,
    ].filter(Boolean),
  }));
  return fig;
}

// PRINT_ROWS is how many rows of the readings table are printed.
const PRINT_ROWS = 8;

// vitalsTable lists the readings of the range, one row per time, one
// column per chart, newest first.
function vitalsTable(charts) {
  const rows = new Map();
  for (const c of charts) {
    for (const s of c.series) {
      for (const p of s.points) {
        if (!rows.has(p.t)) rows.set(p.t, new Map());
        const cells = rows.get(p.t);
        if (!cells.has(c.key)) cells.set(c.key, []);
        cells.get(c.key).push({s, p});
      }
    }
  }
  const times = [...rows.keys()].sort((a, b) => b - a);
  const cell = (c, list) => {
    if (!list) return h('td', {class: 'num'});
    // Blood pressure: systolic/diastolic of each Observation at that time.
    const byObs = new Map();
    for (const {s, p} of list) {
      if (!byObs.has(p.id)) byObs.set(p.id, {});
      byObs.get(p.id)[s.key] = p;
    }
    return h('td', {class: 'num'}, [...byObs].map(([id, v], i) => [i ? ', ' : '',
      h('a', {href: obsRoute(id)}, c.series.map((s) => (v[s.key] ? data.fmtNumber(v[s.key].value) : '–')).join('/'))]));
  };
  return h('table', {class: 'vitals-table', id: 'vitals-table'},
    h('caption', {class: 'sr-only'}, 'Vital signs, one row per time of reading, newest first'),
    h('thead', null, h('tr', null, h('th', {scope: 'col'}, 'Date'), charts.map((c) => h('th', {scope: 'col', class: 'num', title: c.title},
      h('span', {'aria-hidden': 'true'}, c.short), h('span', {class: 'sr-only'}, c.title), h('br'), h('span', {class: 'muted'}, c.unitLabel))))),
    h('tbody', null, times.map((t, i) => h('tr', {class: i >= PRINT_ROWS ? 'older' : null},
      h('th', {scope: 'row'}, fmtWhen(t)), charts.map((c) => cell(c, rows.get(t).get(c.key)))))),
    times.length > PRINT_ROWS ? h('tfoot', {class: 'print-only'}, h('tr', null, h('td', {colspan: charts.length + 1, class: 'muted'},
      (times.length - PRINT_ROWS) + ' earlier rows are on screen only.'))) : null);
}

// otherVitals names the vital signs that have no chart here.
function otherVitals(other) {
  if (!other.size) return null;
  return h('p', {class: 'muted no-print', id: 'vitals-other'}, 'Other vital signs, not charted: ',
    [...other].sort((a, b) => b[1] - a[1]).map(([name, n]) => name + ' (' + n + ')').join(', '), '.');
}

// labsSection lists the latest result of each laboratory code with its
// date, its flag and a trend line.
export function labsSection(lab, error) {
  const box = h('section', {class: 'card labs', id: 'labs-card'}, h('h2', null, 'Laboratory results'));
  if (error) {
    box.append(h('p', {class: 'muted refused'}, 'Not shown: ' + error + '.'));
    return box;
  }
  if (!lab.groups.length) {
    box.append(h('p', {class: 'muted empty'}, 'No laboratory results recorded.'));
    return box;
  }
  const skipped = lab.groups.filter((g, i) => !printed(g, i)).length;
  box.append(h('div', {class: 'labs-box'}, h('table', {class: 'labs', id: 'labs'},
    h('thead', null, h('tr', null, h('th', {scope: 'col'}, 'Test'), h('th', {scope: 'col', class: 'num'}, 'Latest'), h('th', {scope: 'col'}, 'Flag'),
      h('th', {scope: 'col'}, 'Date'), h('th', {scope: 'col'}, 'Trend'), h('th', {scope: 'col', class: 'num'}, 'Results'))),
    h('tbody', null, lab.groups.map((g, i) => {
      const flag = g.flag && g.flag.kind !== 'normal' ? g.flag : null;
      const cls = [flag ? 'flag-' + flag.kind : '', printed(g, i) ? '' : 'print-skip'].filter(Boolean).join(' ');
      const trendLabel = g.trend.length ? g.trend.length + ' results from ' + data.fmtNumber(Math.min(...g.trend.map((p) => p.value))) +
        ' to ' + data.fmtNumber(Math.max(...g.trend.map((p) => p.value))) : 'no numeric results';
      return h('tr', {class: cls || null, dataset: {id: g.latest.id, code: g.code}},
        h('th', {scope: 'row'}, h('a', {href: obsRoute(g.latest.id)}, g.name)),
        h('td', {class: 'num value'}, g.value),
        h('td', {class: 'flag'}, flag ? h('span', {class: 'flag ' + flag.kind, title: flag.text + (flag.computed ? ' (from the reference range)' : '')}, flag.code) : ''),
        h('td', null, fmtDay(g.t)),
        h('td', {class: 'trend'}, g.trend.length > 1 ? sparkline(g.trend, 'Trend: ' + trendLabel) : ''),
        h('td', {class: 'num'}, String(g.count)));
    })),
    skipped ? h('tfoot', {class: 'print-only'}, h('tr', null, h('td', {colspan: 6, class: 'muted'},
      skipped + ' older results without a flag are on screen only.'))) : null)));
  return box;
}

// PRINT_LABS is how many laboratory codes are printed, besides the flagged ones.
const PRINT_LABS = 10;

// printed tells whether a laboratory row goes on paper: the newest codes and every flagged one.
const printed = (g, i) => i < PRINT_LABS || Boolean(g.flag && g.flag.kind !== 'normal');

// timelineSection puts the record on one zoomable time axis.
export function timelineSection(tl, sections) {
  const box = h('section', {class: 'card timeline-card', id: 'timeline-card'}, h('h2', null, 'Timeline'));
  const lanes = data.TIMELINE_LANES.map((l) => ({key: l.key, shape: l.shape, title: l.title + ' (' + tl.marks.filter((m) => m.lane === l.key).length + ')'}));
  const refusedLanes = data.TIMELINE_LANES.filter((l) => sections[l.key] && sections[l.key].error);
  const refusedNote = refusedLanes.length ? h('p', {class: 'muted refused'}, 'Not on the timeline (the token may not read them): ' + refusedLanes.map((l) => l.type).join(', ') + '.') : null;
  if (!tl.marks.length) {
    append(box, [h('p', {class: 'muted empty'}, 'Nothing dated to show.'), refusedNote]);
    return box;
  }
  const status = h('span', {class: 'muted', id: 'timeline-status', 'aria-live': 'polite'});
  const chart = timelineChart({
    id: 'timeline', lanes, marks: tl.marks, label: 'Timeline of encounters, condition onsets, procedures and immunizations',
    href: (m) => '#/r/' + enc(m.type) + '/' + enc(m.id),
    tip: (m) => [m.label, m.t1 > m.t0 ? fmtWhen(m.t0) + ' – ' + fmtWhen(m.t1) : fmtWhen(m.t0), m.type],
    onChange: (t0, t1, n) => clear(status, fmtDay(t0) + ' – ' + fmtDay(t1) + ' · ' + n + ' of ' + tl.marks.length + ' shown'),
  });
  const button = (id, label, title, fn) => h('button', {type: 'button', class: 'secondary', id, title, 'aria-label': title, onclick: fn}, label);
  const week = 7 * DAY;
  append(box, [
    h('div', {class: 'row no-print'},
      button('zoom-in', '+', 'Zoom in', () => chart.zoom(0.5)),
      button('zoom-out', '−', 'Zoom out', () => chart.zoom(2)),
      button('pan-earlier', '←', 'Earlier', () => { const [a, b] = chart.domain(); chart.pan(-Math.max((b - a) / 3, week)); }),
      button('pan-later', '→', 'Later', () => { const [a, b] = chart.domain(); chart.pan(Math.max((b - a) / 3, week)); }),
      button('zoom-reset', 'All', 'Show everything', () => chart.reset()),
      status, h('span', {class: 'muted hint'}, 'Ctrl + wheel zooms, dragging pans.')),
    h('div', {class: 'timeline-box'}, chart.el), refusedNote]);
  return box;
}
