// Home: the tenant's types with their counts, the latest changes and the
// server facts.
import {h, enc, fmtDate, clear, message} from '../dom.js';
import * as api from '../api.js';
import {session, can} from '../app.js';

// homeView shows the overview the router has just loaded, with the
// latest changes.
export async function homeView() {
  const ov = session.overview;
  return h('section', {class: 'home', dataset: {title: 'Home'}},
    h('h1', null, 'Tenant ', h('span', {class: 'tenant-name'}, ov.tenant)),
    h('div', {class: 'grid'},
      h('div', {class: 'card'}, h('h2', null, 'Resources'), typesTable(ov.types)),
      h('div', {class: 'card'}, h('h2', null, 'Latest changes'), latestChanges()),
      h('div', {class: 'card'}, h('h2', null, 'Server'), facts(ov))));
}

function typesTable(types) {
  const counted = types.filter((t) => t.count > 0).sort((a, b) => b.count - a.count || a.type.localeCompare(b.type));
  const total = counted.reduce((n, t) => n + t.count, 0);
  if (!types.some((t) => t.count !== undefined)) {
    return h('p', {class: 'muted'}, 'Your token reaches only part of the tenant, so no totals are shown. Use Search.');
  }
  if (counted.length === 0) {
    return h('div', null, h('p', {class: 'muted'}, 'No resources yet.'),
      can('*', 'c') ? h('p', null, h('a', {href: '#/new/Patient'}, 'Create one'), ' or ', h('a', {href: '#/upload'}, 'upload a bundle'), '.') : null);
  }
  return h('table', {class: 'counts', id: 'counts'},
    h('thead', null, h('tr', null, h('th', null, 'Type'), h('th', {class: 'num'}, 'Count'))),
    h('tbody', null, counted.map((t) => h('tr', {dataset: {type: t.type}},
      h('td', null, t.access.includes('s') ? h('a', {href: '#/search/' + enc(t.type)}, t.type) : t.type),
      h('td', {class: 'num'}, t.count.toLocaleString())))),
    h('tfoot', null, h('tr', null, h('th', null, 'Total'), h('th', {class: 'num'}, total.toLocaleString()))));
}

// latestChanges fills in once the server has merged the type histories,
// after the counts are on screen.
function latestChanges() {
  const box = h('div', {id: 'changes'}, h('p', {class: 'muted'}, 'Loading…'));
  api.consoleApi('changes').then((r) => {
    const note = r.hidden.length ? h('p', {class: 'muted'}, 'Not shown: ' + r.hidden.join(', ') + ' (written by every request).') : null;
    if (r.changes.length === 0) {
      clear(box, h('p', {class: 'muted'}, 'Nothing has changed yet.'), note);
      return;
    }
    clear(box, h('table', {class: 'changes'},
      h('thead', null, h('tr', null, h('th', null, 'When'), h('th', null, 'What'), h('th', null, 'Change'))),
      h('tbody', null, r.changes.map(changeRow))), note);
  }).catch((e) => clear(box, message('info', 'History unavailable: ' + e.message)));
  return box;
}

const VERBS = {POST: 'created', PUT: 'updated', DELETE: 'deleted', PATCH: 'patched'};

function changeRow(c) {
  const label = c.type + '/' + c.id;
  const verb = c.deleted ? 'deleted' : (VERBS[c.method] || String(c.method || '').toLowerCase());
  return h('tr', null,
    h('td', null, fmtDate(c.lastUpdated)),
    h('td', null, c.deleted ? label : h('a', {href: '#/r/' + enc(c.type) + '/' + enc(c.id)}, label)),
    h('td', null, verb + ' (v' + c.version + ')'));
}

function facts(ov) {
  const s = ov.server;
  const row = (k, v, id) => h('tr', null, h('th', null, k), h('td', {id}, v));
  return h('table', {class: 'facts', id: 'facts'}, h('tbody', null,
    row('Version', s.version, 'fact-version'),
    row('Database engine', s.engine, 'fact-engine'),
    row('FHIR version', s.fhirVersion),
    row('Up since', fmtDate(s.started)),
    row('Uptime', uptime(s.uptimeSeconds), 'fact-uptime'),
    row('Signed in as', ov.subject || ov.clientId || '(unnamed)'),
    row('Scopes', ov.scopes.join(' '))));
}

function uptime(sec) {
  const d = Math.floor(sec / 86400), hr = Math.floor(sec % 86400 / 3600), m = Math.floor(sec % 3600 / 60);
  return (d ? d + ' d ' : '') + (d || hr ? hr + ' h ' : '') + m + ' min';
}

