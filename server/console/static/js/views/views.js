// SQL on FHIR views: pick a stored ViewDefinition or paste one, run it
// with $viewdefinition-run, see the first rows as a table, download the
// rows as CSV or Parquet.
import {h, message} from '../dom.js';
import * as api from '../api.js';
import {errorBox} from '../app.js';

// previewRows is how many rows the table shows.
const previewRows = 100;

// sample is the view the text area starts with.
const sample = JSON.stringify({
  resourceType: 'ViewDefinition', name: 'patient_names', status: 'active', resource: 'Patient',
  select: [{column: [
    {name: 'id', path: 'getResourceKey()'},
    {name: 'family', path: "name.where(use = 'official').family.first()"},
    {name: 'birth_date', path: 'birthDate', type: 'date'}]}],
}, null, 2);

export async function viewsView() {
  const stored = h('select', {id: 'views-stored'}, h('option', {value: ''}, '— paste a view below —'));
  try {
    const b = await api.get('/ViewDefinition?_count=100&_sort=name');
    for (const e of (b && b.entry) || []) {
      const r = e.resource || {};
      stored.append(h('option', {value: r.id}, (r.title || r.name || r.id) + ' (' + (r.resource || '?') + ')'));
    }
  } catch (e) {
    // no stored views to offer (or no read on ViewDefinition): pasting still works
  }
  const text = h('textarea', {id: 'views-json', rows: '14', spellcheck: 'false'});
  text.value = sample;
  const out = h('div', {id: 'views-out', 'aria-live': 'polite'});
  const run = h('button', {type: 'submit', id: 'views-run'}, 'Run');
  const csv = h('button', {type: 'button', id: 'views-csv', onclick: () => download(stored, text, 'csv', out)}, 'Download CSV');
  const parquet = h('button', {type: 'button', id: 'views-parquet', onclick: () => download(stored, text, 'parquet', out)}, 'Download Parquet');
  const form = h('form', {class: 'card', id: 'views-form'},
    h('label', {for: 'views-stored'}, 'Stored ViewDefinition'), stored,
    h('label', {for: 'views-json'}, 'or a ViewDefinition (JSON)'), text,
    h('div', {class: 'actions'}, run, csv, parquet));
  stored.addEventListener('change', () => { text.disabled = stored.value !== ''; });
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    out.replaceChildren(h('p', null, 'Running…'));
    try {
      const res = await api.request('POST', runPath(stored, 'json', previewRows), {body: body(stored, text), headers: {Accept: 'application/json'}});
      out.replaceChildren(table(res.body || []));
    } catch (e) {
      out.replaceChildren(errorBox(e));
    }
  });
  return h('section', {class: 'views', dataset: {title: 'Views'}}, h('h1', null, 'SQL on FHIR views'), form, out);
}

// runPath is the $viewdefinition-run URL of the stored view or of the
// pasted one (in the body).
function runPath(stored, format, limit) {
  const q = new URLSearchParams({_format: format});
  if (limit) q.set('_limit', String(limit));
  const at = stored.value ? '/ViewDefinition/' + encodeURIComponent(stored.value) : '/ViewDefinition';
  return api.BASE + at + '/$viewdefinition-run?' + q;
}

// body is the Parameters of a run: the pasted view inline, or nothing.
function body(stored, text) {
  if (stored.value) return {resourceType: 'Parameters', parameter: []};
  let view;
  try {
    view = JSON.parse(text.value);
  } catch (e) {
    throw new Error('the ViewDefinition is not valid JSON: ' + e.message);
  }
  return {resourceType: 'Parameters', parameter: [{name: 'viewResource', resource: view}]};
}

// table shows rows as a table, columns in the order of the first row.
function table(rows) {
  if (!rows.length) return message('info', 'The view gave no rows.');
  const cols = Object.keys(rows[0]);
  const cell = (v) => (v === null || v === undefined ? '' : typeof v === 'object' ? JSON.stringify(v) : String(v));
  return h('div', null,
    h('p', {id: 'views-count'}, rows.length + (rows.length === previewRows ? ' rows (the first ' + previewRows + ')' : ' rows')),
    h('table', {class: 'results', id: 'views-table'},
      h('thead', null, h('tr', null, cols.map((c) => h('th', null, c)))),
      h('tbody', null, rows.map((r) => h('tr', null, cols.map((c) => h('td', null, cell(r[c]))))))));
}

// download runs the view in format and saves the rows from memory.
async function download(stored, text, format, out) {
  let payload;
  try {
    payload = JSON.stringify(body(stored, text));
  } catch (e) {
    out.replaceChildren(errorBox(e));
    return;
  }
  const res = await fetch(runPath(stored, format, 0), {method: 'POST', body: payload, credentials: 'omit',
    headers: {Authorization: 'Bearer ' + api.token(), 'Content-Type': 'application/fhir+json'}});
  if (!res.ok) {
    let parsed = null;
    try { parsed = await res.json(); } catch (e) { parsed = null; }
    out.replaceChildren(errorBox(new api.ApiError(res.status, parsed, res.headers)));
    return;
  }
  const url = URL.createObjectURL(await res.blob());
  const a = h('a', {download: 'view.' + format});
  a.href = url; // a blob: URL of our own making
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}
