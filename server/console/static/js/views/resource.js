// A resource: formatted JSON with links, XML, the sanitised narrative, the
// history with a side-by-side diff, and the resources pointing at it.
import {h, enc, fmtDate, confirmDialog} from '../dom.js';
import * as api from '../api.js';
import {can, go, flash, errorBox} from '../app.js';
import * as json from '../json.js';
import {narrative} from '../narrative.js';
import {sideBySide} from '../diff.js';

const TABS = [['json', 'JSON'], ['xml', 'XML'], ['narrative', 'Narrative'], ['history', 'History'], ['refs', 'Referenced by']];

export async function resourceView(ctx) {
  const [type, id, hist, vid] = ctx.parts;
  const versioned = hist === '_history' && vid;
  const path = '/' + enc(type) + '/' + enc(id) + (versioned ? '/_history/' + enc(vid) : '');
  let r;
  try {
    r = await api.get(path);
  } catch (e) {
    if (e.status === 410 && !versioned) return deletedView(type, id);
    throw e;
  }
  const tab = ctx.params.get('tab') || 'json';
  const base = '#/r/' + enc(type) + '/' + enc(id) + (versioned ? '/_history/' + enc(vid) : '');
  const panel = h('div', {class: 'panel', id: 'panel-' + tab});
  const section = h('section', {class: 'resource', dataset: {title: type + '/' + id}},
    h('h1', null, h('a', {href: '#/search/' + enc(type)}, type), ' / ', h('span', {id: 'resource-id'}, id),
      ' ', h('span', {class: 'badge', id: 'resource-version'}, 'v' + ((r.meta && r.meta.versionId) || '?'))),
    h('p', {class: 'muted'}, 'Last updated ', fmtDate(r.meta && r.meta.lastUpdated), versioned ? ' · an old version; ' : '',
      versioned ? h('a', {href: '#/r/' + enc(type) + '/' + enc(id)}, 'see the current one') : null),
    actions(type, id, versioned, r),
    h('nav', {class: 'tabs', role: 'tablist'}, TABS.map(([k, label]) =>
      h('a', {href: base + '?tab=' + k, id: 'tab-' + k, role: 'tab', class: k === tab ? 'active' : '', 'aria-selected': String(k === tab)}, label))),
    panel);
  await fillTab(tab, panel, r, type, id, path);
  return section;
}

// restoreButton writes an old version's content as the newest version
// (a PUT: it brings a deleted resource back too).
function restoreButton(type, id, old) {
  const v = (old.meta && old.meta.versionId) || '?';
  return h('button', {type: 'button', id: 'restore', onclick: async (ev) => {
    if (!(await confirmDialog('Write version ' + v + ' of ' + type + '/' + id + ' as its newest version?', 'Restore'))) return;
    const body = structuredClone(old);
    delete body.meta;
    try {
      const res = await api.fhir('PUT', '/' + enc(type) + '/' + enc(id), {body: JSON.stringify(body), headers: {Prefer: 'return=representation'}});
      flash('ok', 'Restored version ' + v + ' as version ' + ((res.body && res.body.meta && res.body.meta.versionId) || '?') + '.');
      go('#/r/' + enc(type) + '/' + enc(id));
    } catch (e) {
      ev.target.closest('section').append(errorBox(e));
    }
  }}, 'Restore this version');
}

// deletedView is the page of a deleted resource: its history stays.
async function deletedView(type, id) {
  return h('section', {class: 'resource', dataset: {title: type + '/' + id}},
    h('h1', null, h('a', {href: '#/search/' + enc(type)}, type), ' / ', h('span', {id: 'resource-id'}, id),
      ' ', h('span', {class: 'badge', id: 'resource-version'}, 'deleted')),
    h('p', {class: 'muted'}, 'This resource was deleted. Its versions are kept; open one to see it.'),
    h('div', {class: 'panel', id: 'panel-history'}, await history(type, id)));
}

function actions(type, id, versioned, r) {
  if (versioned) return can(type, 'u') ? h('div', {class: 'actions', id: 'resource-actions'}, restoreButton(type, id, r)) : null;
  const box = h('div', {class: 'actions', id: 'resource-actions'});
  if (type === 'Patient') box.append(h('a', {class: 'button secondary', id: 'open-chart', href: '#/chart/' + enc(id)}, 'Chart'));
  if (can(type, 'u')) box.append(h('a', {class: 'button', id: 'edit', href: '#/edit/' + enc(type) + '/' + enc(id)}, 'Edit'));
  if (can(type, 'd')) {
    box.append(h('button', {type: 'button', class: 'danger', id: 'delete', onclick: async () => {
      if (!(await confirmDialog('Delete ' + type + '/' + id + '? Its history is kept.', 'Delete'))) return;
      try {
        await api.fhir('DELETE', '/' + enc(type) + '/' + enc(id));
        flash('ok', 'Deleted ' + type + '/' + id + '; its history is kept.');
        go('#/search/' + enc(type));
      } catch (e) {
        box.after(errorBox(e));
      }
    }}, 'Delete'));
  }
  return box;
}

async function fillTab(tab, panel, r, type, id, path) {
  switch (tab) {
    case 'xml': {
      const res = await api.fhir('GET', path, {headers: {Accept: 'application/fhir+xml'}});
      panel.append(h('pre', {class: 'xml', id: 'xml'}, res.text));
      return;
    }
    case 'narrative':
      panel.append(narrative(r));
      return;
    case 'history':
      panel.append(await history(type, id));
      return;
    case 'refs':
      panel.append(await referencedBy(type, id));
      return;
    default:
      panel.append(json.render(r, type));
  }
}

// history lists the versions; two can be compared side by side.
async function history(type, id) {
  const b = await api.get('/' + enc(type) + '/' + enc(id) + '/_history?_count=100');
  const versions = (b.entry || []).map((e) => ({
    vid: e.resource ? e.resource.meta.versionId : ((e.response && e.response.etag) || '').replace(/\D/g, ''),
    resource: e.resource, method: e.request ? e.request.method : '',
    when: (e.resource && e.resource.meta.lastUpdated) || (e.response && e.response.lastModified),
  }));
  const diffBox = h('div', {id: 'diff'});
  const radio = (name, v, checked) => h('input', {type: 'radio', name, value: v.vid, checked, 'aria-label': name + ' v' + v.vid});
  const table = h('table', {class: 'history', id: 'history'},
    h('thead', null, h('tr', null, h('th', null, 'A'), h('th', null, 'B'), h('th', null, 'Version'), h('th', null, 'When'), h('th', null, 'Change'))),
    h('tbody', null, versions.map((v, i) => h('tr', null,
      h('td', null, radio('a', v, i === 1 || versions.length === 1)), h('td', null, radio('b', v, i === 0)),
      h('td', null, v.resource ? h('a', {href: '#/r/' + enc(type) + '/' + enc(id) + '/_history/' + enc(v.vid)}, 'v' + v.vid) : 'v' + v.vid),
      h('td', null, fmtDate(v.when)), h('td', null, v.method === 'DELETE' || !v.resource ? 'deleted' : v.method)))));
  const compare = () => {
    const pick = (n) => versions.find((v) => v.vid === table.querySelector('input[name=' + n + ']:checked').value);
    const a = pick('a'), bb = pick('b');
    const text = (v) => v.resource ? json.pretty(v.resource) : '(deleted)';
    diffBox.replaceChildren(sideBySide(text(a), text(bb), 'v' + a.vid, 'v' + bb.vid));
  };
  table.addEventListener('change', compare);
  if (versions.length) compare();
  return h('div', null, table, h('h3', null, 'Differences between A and B'), diffBox);
}

// LIST_LIMIT is how many referring resources are listed one by one; past
// it the counts link to searches instead.
const LIST_LIMIT = 50;

// referencedBy counts, per reference parameter, the resources pointing at
// this one, and lists them with _revinclude when they are few.
async function referencedBy(type, id) {
  const target = type + '/' + id;
  let rows;
  try {
    rows = (await api.consoleApi('referrers/' + enc(type) + '/' + enc(id))).referrers;
  } catch (e) {
    return errorBox(e);
  }
  rows.sort((a, b) => b.count - a.count || a.type.localeCompare(b.type) || a.param.localeCompare(b.param));
  if (rows.length === 0) return h('p', {class: 'muted', id: 'refs-none'}, 'Nothing on this server refers to ' + target + '.');
  const table = h('table', {class: 'refcounts', id: 'refcounts'},
    h('thead', null, h('tr', null, h('th', null, 'Type'), h('th', null, 'Through'), h('th', {class: 'num'}, 'Resources'))),
    h('tbody', null, rows.map((r) => h('tr', null, h('td', null, r.type), h('td', null, r.param),
      h('td', {class: 'num'}, h('a', {href: '#/search/' + enc(r.type) + '?' + new URLSearchParams({[r.param]: target})}, String(r.count)))))));
  const sum = rows.reduce((n, r) => n + r.count, 0);
  if (sum > LIST_LIMIT) return h('div', null, table, h('p', {class: 'muted'}, sum + ' references; open a count to page through them.'));
  const q = new URLSearchParams({_id: id});
  for (const r of rows) q.append('_revinclude', r.type + ':' + r.param);
  const b = await api.get('/' + enc(type) + '?' + q);
  const found = new Map();
  for (const e of b.entry || []) {
    if (e.search && e.search.mode === 'include') found.set(e.resource.resourceType + '/' + e.resource.id, e.resource);
  }
  return h('div', null, table, h('ul', {class: 'refs', id: 'refs'}, [...found.values()].map((r) =>
    h('li', null, h('a', {href: '#/r/' + enc(r.resourceType) + '/' + enc(r.id)}, r.resourceType + '/' + r.id)))));
}
