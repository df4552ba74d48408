// Upload a Bundle (batch or transaction) and show each entry's outcome.
import {h, message} from '../dom.js';
import * as api from '../api.js';
import {errorBox} from '../app.js';
import {refRoute} from '../json.js';

export async function uploadView() {
  const file = h('input', {type: 'file', id: 'bundle-file', accept: '.json,application/json,application/fhir+json'});
  const area = h('textarea', {id: 'bundle-text', rows: 10, spellcheck: 'false', placeholder: '{"resourceType": "Bundle", "type": "transaction", "entry": [...]}'});
  const out = h('div', {id: 'upload-result', 'aria-live': 'polite'});
  file.addEventListener('change', async () => {
    if (file.files.length) area.value = await file.files[0].text();
  });
  const form = h('form', {class: 'card', id: 'upload-form'},
    h('p', {class: 'muted'}, 'A transaction is all or nothing; a batch runs each entry on its own.'),
    h('label', {for: 'bundle-file'}, 'Bundle file'), file,
    h('label', {for: 'bundle-text'}, 'or paste it'), area,
    h('div', {class: 'actions'}, h('button', {type: 'submit', id: 'upload-submit'}, 'Upload')));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    await upload(area.value, out);
  });
  return h('section', {class: 'upload', dataset: {title: 'Upload'}}, h('h1', null, 'Upload a bundle'), form, out);
}

async function upload(text, out) {
  let bundle;
  try {
    bundle = JSON.parse(text);
  } catch (e) {
    out.replaceChildren(message('error', 'This is not valid JSON: ' + e.message));
    return;
  }
  if (!bundle || bundle.resourceType !== 'Bundle' || !['batch', 'transaction'].includes(bundle.type)) {
    out.replaceChildren(message('error', 'Upload a Bundle of type batch or transaction.'));
    return;
  }
  out.replaceChildren(h('p', {class: 'muted'}, 'Uploading ' + (bundle.entry || []).length + ' entries…'));
  try {
    const res = await api.fhir('POST', '', {body: text});
    out.replaceChildren(outcomes(bundle, res.body));
  } catch (e) {
    out.replaceChildren(message('error', bundle.type === 'transaction' ? 'The transaction failed; nothing was stored.' : 'The batch failed.'), errorBox(e));
  }
}

function outcomes(sent, reply) {
  const entries = reply.entry || [];
  let ok = 0;
  const rows = entries.map((e, i) => {
    const req = (sent.entry || [])[i] && sent.entry[i].request;
    const resp = e.response || {};
    const status = resp.status || '';
    const good = /^2/.test(status);
    if (good) ok++;
    const loc = resp.location || '';
    const route = refRoute(loc.replace(/^.*?\/fhir\/r4\//, ''));
    const issues = resp.outcome && resp.outcome.issue ? resp.outcome.issue : [];
    return h('tr', {class: good ? 'ok' : 'bad'},
      h('td', null, String(i)),
      h('td', null, req ? req.method + ' ' + req.url : ''),
      h('td', {class: 'status'}, status),
      h('td', null, route ? h('a', {href: route}, loc) : loc),
      h('td', null, issues.map((x) => h('div', null, (x.severity || '') + ': ' + (x.diagnostics || x.code || ''), x.expression ? h('code', null, ' ' + x.expression.join(', ')) : null))));
  });
  return h('div', null,
    message(ok === entries.length ? 'ok' : 'error', h('span', {id: 'upload-summary'}, reply.type + ': ' + ok + ' of ' + entries.length + ' entries succeeded')),
    h('table', {class: 'outcomes', id: 'outcomes'},
      h('thead', null, h('tr', null, h('th', null, '#'), h('th', null, 'Request'), h('th', null, 'Status'), h('th', null, 'Location'), h('th', null, 'Outcome'))),
      h('tbody', null, rows)));
}
