// Create and edit as JSON. Updates carry If-Match with the version being
// edited; a conflict shows the newer version beside the user's. Every
// OperationOutcome issue is shown under the element its expression names.
import {h, enc, message} from '../dom.js';
import * as api from '../api.js';
import {can, go, flash, errorBox} from '../app.js';
import * as json from '../json.js';
import {sideBySide} from '../diff.js';

export async function editView(ctx) {
  const editing = ctx.kind === 'edit';
  const [type, id] = ctx.parts;
  let base = '';
  let text;
  if (editing) {
    const res = await api.fhir('GET', '/' + enc(type) + '/' + enc(id));
    base = (res.body.meta && res.body.meta.versionId) || '';
    text = json.pretty(res.body);
  } else {
    text = json.pretty({resourceType: type || 'Patient'});
  }
  const area = h('textarea', {id: 'editor', class: 'editor', rows: 24, spellcheck: 'false', 'aria-label': 'resource JSON'});
  area.value = text;
  const feedback = h('div', {id: 'feedback', 'aria-live': 'polite'});
  const baseLabel = h('span', {id: 'base-version'}, base ? 'editing v' + base : 'new resource');
  const state = {base};
  const save = h('button', {type: 'submit', id: 'save'}, editing ? 'Save' : 'Create');
  const form = h('form', {class: 'card edit-form', id: 'edit-form'},
    h('div', {class: 'row'}, h('strong', null, editing ? type + '/' + id : 'New resource'), ' ', baseLabel),
    area, h('div', {class: 'actions'}, save,
      h('a', {class: 'button secondary', href: editing ? '#/r/' + enc(type) + '/' + enc(id) : '#/'}, 'Cancel')));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    await submit({editing, type, id, area, feedback, state, baseLabel, force: false});
  });
  const title = editing ? 'Edit ' + type + '/' + id : 'Create';
  const body = [h('h1', null, title)];
  if (!editing) body.push(typePicker(type));
  return h('section', {class: 'edit', dataset: {title}}, body, form, feedback);
}

function typePicker(current) {
  const sel = h('select', {id: 'new-type'});
  api.metadata().then((cs) => {
    for (const r of cs.rest[0].resource) {
      if (can(r.type, 'c')) sel.append(h('option', {value: r.type, selected: r.type === (current || 'Patient')}, r.type));
    }
  });
  sel.addEventListener('change', () => go('#/new/' + enc(sel.value)));
  return h('div', {class: 'row'}, h('label', {for: 'new-type'}, 'Type'), sel);
}

async function submit(s) {
  let doc;
  try {
    doc = JSON.parse(s.area.value);
  } catch (e) {
    s.feedback.replaceChildren(message('error', 'This is not valid JSON: ' + e.message));
    return;
  }
  const type = (doc && doc.resourceType) || s.type;
  const headers = {};
  if (s.editing && s.state.base) headers['If-Match'] = 'W/"' + s.state.base + '"';
  headers.Prefer = 'return=representation';
  try {
    const res = s.editing
      ? await api.fhir('PUT', '/' + enc(s.type) + '/' + enc(s.id), {body: s.area.value, headers})
      : await api.fhir('POST', '/' + enc(type), {body: s.area.value, headers});
    const saved = res.body || {};
    flash('ok', (s.editing ? 'Saved' : 'Created') + ' version ' + ((saved.meta && saved.meta.versionId) || '?') + '.');
    go('#/r/' + enc(saved.resourceType || type) + '/' + enc(saved.id || s.id));
  } catch (e) {
    if (e.status === 412 || e.status === 409) {
      await conflict(s, doc, e);
      return;
    }
    if (e.body && e.body.resourceType === 'OperationOutcome') {
      showIssues(s.feedback, doc, type, e);
      return;
    }
    s.feedback.replaceChildren(errorBox(e));
  }
}

// showIssues renders the submitted document with each issue under its element.
function showIssues(box, doc, type, e) {
  const view = json.render(doc, type, {links: false});
  view.id = 'annotated';
  const loose = json.annotate(view, e.body.issue);
  box.replaceChildren(...[
    message('error', h('strong', null, 'The server refused the resource (' + e.status + ').'),
      ' Each problem is shown under the element it names; fix them in the editor above and save again.'),
    loose.length ? h('ul', {class: 'issues'}, loose.map((i) => h('li', null, (i.severity || 'error') + ': ' + (i.diagnostics || i.code)))) : null,
    view].filter(Boolean));
}

// conflict shows the version saved meanwhile beside the user's edit.
async function conflict(s, mine, err) {
  let theirs;
  try {
    theirs = (await api.fhir('GET', '/' + enc(s.type) + '/' + enc(s.id))).body;
  } catch (e) {
    s.feedback.replaceChildren(errorBox(err), errorBox(e));
    return;
  }
  const v = (theirs.meta && theirs.meta.versionId) || '?';
  const strip = (r) => {
    const c = structuredClone(r);
    if (c.meta) {
      delete c.meta.versionId;
      delete c.meta.lastUpdated;
      if (Object.keys(c.meta).length === 0) delete c.meta;
    }
    return json.pretty(c);
  };
  s.feedback.replaceChildren(h('div', {class: 'conflict', id: 'conflict'},
    message('error', h('strong', null, 'Someone else saved version ' + v + ' while you were editing v' + s.state.base + '.'),
      ' Compare, then keep theirs or save yours over it.'),
    sideBySide(strip(theirs), strip(mine), 'saved v' + v + ' (theirs)', 'your edit'),
    h('div', {class: 'actions'},
      h('button', {type: 'button', id: 'take-theirs', onclick: () => {
        s.area.value = json.pretty(theirs);
        s.state.base = v;
        s.baseLabel.textContent = 'editing v' + v;
        s.feedback.replaceChildren(message('info', 'The editor now holds version ' + v + '.'));
      }}, 'Load theirs into the editor'),
      h('button', {type: 'button', id: 'keep-mine', class: 'danger', onclick: async () => {
        s.state.base = v;
        s.baseLabel.textContent = 'editing v' + v;
        await submit(s);
      }}, 'Save mine over v' + v))));
}
