// JSON rendering: one row per line of the pretty-printed document, each
// row tagged with the FHIRPath of its element (Patient.name[0].given[1]),
// so that OperationOutcome issues can be shown next to what they name.
import {h, enc} from './dom.js';

const REF = /^([A-Z][A-Za-z]+)\/([A-Za-z0-9\-.]{1,64})(\/_history\/([A-Za-z0-9\-.]{1,64}))?$/;

// refRoute turns a FHIR reference into a console route, or '' when it
// names nothing on this server.
export function refRoute(ref) {
  if (typeof ref !== 'string') return '';
  let r = ref;
  const base = location.origin + '/fhir/r4/';
  if (r.startsWith(base)) r = r.slice(base.length);
  const m = REF.exec(r);
  if (!m) return '';
  return '#/r/' + enc(m[1]) + '/' + enc(m[2]) + (m[4] ? '/_history/' + enc(m[4]) : '');
}

// chartRoute is the console route of the chart of a Patient reference,
// or '' when the reference names no Patient on this server.
export function chartRoute(ref) {
  const route = refRoute(ref);
  const m = /^#\/r\/Patient\/([^/]+)$/.exec(route.replace(/\/_history\/[^/]+$/, ''));
  return m ? '#/chart/' + m[1] : '';
}

// lines flattens a value into printable lines.
export function lines(value, path) {
  const out = [];
  walk(value, path, 0, null, false, out);
  return out;
}

function walk(v, path, depth, key, comma, out) {
  const isArr = Array.isArray(v);
  if (v !== null && typeof v === 'object') {
    const entries = isArr ? v.map((x, i) => [i, x]) : Object.entries(v);
    const open = isArr ? '[' : '{';
    const close = isArr ? ']' : '}';
    if (entries.length === 0) {
      out.push({depth, path, key, text: open + close, comma});
      return;
    }
    out.push({depth, path, key, text: open, comma: false});
    entries.forEach(([k, x], i) => {
      const p = isArr ? path + '[' + k + ']' : path + '.' + k;
      walk(x, p, depth + 1, isArr ? null : k, i < entries.length - 1, out);
    });
    out.push({depth, path, key: null, text: close, comma, closing: true});
    return;
  }
  out.push({depth, path, key, value: v, comma});
}

// render builds the rows; references become links when links is set.
export function render(value, root, {links = true} = {}) {
  const box = h('div', {class: 'json', role: 'document'});
  for (const l of lines(value, root)) {
    const row = h('div', {class: 'ln'});
    if (!l.closing) row.dataset.path = l.path;
    row.append('  '.repeat(l.depth));
    if (l.key !== null && l.key !== undefined) row.append(h('span', {class: 'k'}, JSON.stringify(l.key)), ': ');
    if ('text' in l) row.append(l.text);
    else row.append(scalar(l, links));
    if (l.comma) row.append(',');
    box.append(row);
  }
  return box;
}

function scalar(l, links) {
  const v = l.value;
  const text = JSON.stringify(v);
  const cls = v === null ? 'null' : typeof v;
  if (links && typeof v === 'string' && (l.key === 'reference' || l.key === 'fullUrl')) {
    const route = refRoute(v);
    const chart = chartRoute(v);
    if (route && chart) return h('span', null, h('a', {class: 'ref', href: route}, text), ' ', h('a', {class: 'chart-link', href: chart}, 'chart'));
    if (route) return h('a', {class: 'ref', href: route}, text);
  }
  return h('span', {class: cls}, text);
}

// findRow finds the row of an expression, or of its nearest ancestor.
export function findRow(box, expr) {
  let p = String(expr).replace(/\.ofType\([^)]*\)/g, '').replace(/\.where\([^)]*\)/g, '');
  while (p) {
    for (const row of box.querySelectorAll('.ln')) {
      if (row.dataset.path === p) return row;
    }
    const cut = Math.max(p.lastIndexOf('.'), p.lastIndexOf('['));
    if (cut <= 0) break;
    p = p.slice(0, cut);
  }
  return box.querySelector('.ln');
}

// annotate puts each issue under the row its expression names and returns
// the issues that name no element.
export function annotate(box, issues) {
  const loose = [];
  for (const is of issues || []) {
    const exprs = is.expression || is.location || [];
    if (exprs.length === 0) { loose.push(is); continue; }
    for (const ex of exprs) {
      const row = findRow(box, ex);
      row.classList.add('has-issue');
      const note = h('div', {class: 'issue ' + (is.severity || 'error'), role: 'note', dataset: {expression: ex}},
        h('strong', null, is.severity || 'error'), ' ', h('code', null, ex), ': ', is.diagnostics || is.code || '');
      let after = row;
      while (after.nextElementSibling && after.nextElementSibling.classList.contains('issue')) after = after.nextElementSibling;
      after.after(note);
    }
  }
  return loose;
}

// pretty is the canonical two-space rendering used by editors and diffs.
export function pretty(v) { return JSON.stringify(v, null, 2); }
