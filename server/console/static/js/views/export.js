// Bulk Data export: kick off $export, poll its status, download the files.
// Offered only when the CapabilityStatement lists the export operation.
import {h, message} from '../dom.js';
import * as api from '../api.js';
import {can, errorBox} from '../app.js';

// exportAvailable tells whether the server advertises system-level $export
// and the caller may read some type (the export holds the readable ones).
export async function exportAvailable() {
  try {
    const cs = await api.metadata();
    const ops = (cs.rest && cs.rest[0] && cs.rest[0].operation) || [];
    return ops.some((o) => o.name === 'export') && can('*', 'r'); // the server exports the readable types
  } catch (e) {
    return false;
  }
}

export async function exportView() {
  if (!(await exportAvailable())) {
    return h('section', null, h('h1', null, 'Export'), message('info', 'This server does not offer a Bulk Data export to this token.'));
  }
  const types = h('input', {id: 'export-types', placeholder: 'all types, or e.g. Patient,Observation'});
  const since = h('input', {id: 'export-since', type: 'datetime-local'});
  const out = h('div', {id: 'export-status', 'aria-live': 'polite'});
  const form = h('form', {class: 'card', id: 'export-form'},
    h('label', {for: 'export-types'}, 'Types (_type)'), types,
    h('label', {for: 'export-since'}, 'Changed since (_since)'), since,
    h('div', {class: 'actions'}, h('button', {type: 'submit', id: 'export-start'}, 'Start export')));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const q = new URLSearchParams();
    if (types.value.trim()) q.set('_type', types.value.replace(/\s+/g, ''));
    if (since.value) q.set('_since', new Date(since.value).toISOString());
    await run(q, out);
  });
  return h('section', {class: 'export', dataset: {title: 'Export'}}, h('h1', null, 'Bulk export'), form, out);
}

async function run(q, out) {
  let status;
  try {
    const res = await api.fhir('GET', '/$export' + (q.toString() ? '?' + q : ''), {headers: {Prefer: 'respond-async'}});
    status = api.samePath(res.headers.get('Content-Location'));
  } catch (e) {
    out.replaceChildren(errorBox(e));
    return;
  }
  const progress = h('p', {id: 'export-progress'}, 'Export started…');
  out.replaceChildren(progress);
  for (;;) {
    let res;
    try {
      res = await api.request('GET', status);
    } catch (e) {
      if (e.status !== 429) {
        out.replaceChildren(errorBox(e));
        return;
      }
      res = {status: 429, headers: e.headers};
    }
    if (res.status === 200) {
      out.replaceChildren(manifest(res.body));
      return;
    }
    if (res.status === 202) progress.textContent = 'Running: ' + (res.headers.get('X-Progress') || 'in progress');
    const wait = Number(res.headers.get('Retry-After')) || 1;
    await new Promise((r) => setTimeout(r, Math.min(wait, 10) * 1000));
  }
}

function manifest(m) {
  const files = m.output || [];
  if (!files.length) return message('info', 'The export finished with no resources.');
  return h('div', null, message('ok', 'Export finished: ' + files.length + ' file(s).'),
    h('ul', {id: 'export-files'}, files.map((f) => h('li', null, f.type + (f.count !== undefined ? ' (' + f.count + ')' : '') + ' ',
      h('button', {type: 'button', onclick: () => download(f)}, 'Download')))));
}

// download fetches a file with the token and saves it from memory.
async function download(f) {
  const res = await fetch(api.samePath(f.url), {headers: {Authorization: 'Bearer ' + api.token(), Accept: 'application/fhir+ndjson'}, credentials: 'omit'});
  if (!res.ok) return;
  const url = URL.createObjectURL(await res.blob());
  const a = h('a', {download: f.type + '.ndjson'});
  a.href = url; // a blob: URL of our own making
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}
