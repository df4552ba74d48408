// Line diff (longest common subsequence) for the side-by-side views.
import {h} from './dom.js';

const MAX_CELLS = 4e6;

// diffLines pairs the lines of a and b: rows of {a, b, kind} where kind is
// same, del (only in a), add (only in b) or chg (a replaced by b).
export function diffLines(a, b) {
  const n = a.length, m = b.length;
  if (n * m > MAX_CELLS) return a.map((x, i) => ({a: x, b: b[i], kind: x === b[i] ? 'same' : 'chg'}));
  const w = m + 1;
  const t = new Uint32Array((n + 1) * w);
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      t[i * w + j] = a[i] === b[j] ? t[(i + 1) * w + j + 1] + 1 : Math.max(t[(i + 1) * w + j], t[i * w + j + 1]);
    }
  }
  const ops = [];
  let i = 0, j = 0;
  while (i < n && j < m) {
    if (a[i] === b[j]) ops.push({a: a[i++], b: b[j++], kind: 'same'});
    else if (t[(i + 1) * w + j] >= t[i * w + j + 1]) ops.push({a: a[i++], kind: 'del'});
    else ops.push({b: b[j++], kind: 'add'});
  }
  while (i < n) ops.push({a: a[i++], kind: 'del'});
  while (j < m) ops.push({b: b[j++], kind: 'add'});
  return pair(ops);
}

// pair lines up each run of deletions with the additions that follow it.
function pair(ops) {
  const rows = [];
  for (let k = 0; k < ops.length;) {
    if (ops[k].kind === 'same') { rows.push(ops[k++]); continue; }
    const dels = [], adds = [];
    while (k < ops.length && ops[k].kind !== 'same') {
      if (ops[k].kind === 'del') dels.push(ops[k].a); else adds.push(ops[k].b);
      k++;
    }
    for (let x = 0; x < Math.max(dels.length, adds.length); x++) {
      const kind = x < dels.length && x < adds.length ? 'chg' : (x < dels.length ? 'del' : 'add');
      rows.push({a: dels[x], b: adds[x], kind});
    }
  }
  return rows;
}

// sideBySide renders two texts as a two-column table of their line diff.
export function sideBySide(aText, bText, aTitle, bTitle) {
  const rows = diffLines(aText.split('\n'), bText.split('\n'));
  const body = h('tbody');
  let changed = 0;
  for (const r of rows) {
    if (r.kind !== 'same') changed++;
    body.append(h('tr', {class: r.kind},
      h('td', {class: 'a'}, r.a === undefined ? '' : r.a),
      h('td', {class: 'b'}, r.b === undefined ? '' : r.b)));
  }
  return h('div', {class: 'diff'},
    h('p', {class: 'muted'}, changed === 0 ? 'No differences.' : changed + ' changed line(s).'),
    h('table', {class: 'diff-table'},
      h('thead', null, h('tr', null, h('th', null, aTitle), h('th', null, bTitle))),
      body));
}
