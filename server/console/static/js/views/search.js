// Search: a form built from the CapabilityStatement's search parameters of
// the chosen type, the raw query, a results table and paging by the
// server's links.
import {h, enc, message} from '../dom.js';
import * as api from '../api.js';
import {can, session, go, errorBox} from '../app.js';
import {columnsFor} from '../columns.js';

// MODIFIERS are the modifiers the server understands, by parameter type.
const MODIFIERS = {
  string: ['exact', 'contains', 'missing'], token: ['not', 'text', 'of-type', 'missing'],
  reference: ['identifier', 'missing'], uri: ['below', 'above', 'missing'],
  date: ['missing'], number: ['missing'], quantity: ['missing'], composite: ['missing'], special: [],
};
// PREFIXES are the comparison prefixes of ordered types.
const PREFIXES = ['eq', 'ne', 'gt', 'lt', 'ge', 'le', 'sa', 'eb', 'ap'];
const ORDERED = new Set(['date', 'number', 'quantity']);
// RESULT_PARAMS are set by their own form fields, not as conditions.
const RESULT_PARAMS = new Set(['_sort', '_count', '_include', '_revinclude', '_cursor', '_total', '_summary', '_elements', '_format']);
// COMMON are the parameters every type has (FHIR Resource level).
const COMMON = [{name: '_id', type: 'token'}, {name: '_lastUpdated', type: 'date'}, {name: '_tag', type: 'token'},
  {name: '_profile', type: 'uri'}, {name: '_security', type: 'token'}, {name: '_text', type: 'string'}, {name: '_content', type: 'string'}];

// searchable lists the types the statement lets the caller search, with their parameters.
async function searchable() {
  const cs = await api.metadata();
  const out = new Map();
  for (const r of (cs.rest && cs.rest[0] && cs.rest[0].resource) || []) {
    if (!(r.interaction || []).some((i) => i.code === 'search-type')) continue;
    if (!can(r.type, 's')) continue;
    out.set(r.type, r.searchParam || []);
  }
  return out;
}

export async function searchView(ctx) {
  const types = await searchable();
  const type = ctx.parts[0] || defaultType(types);
  if (!types.has(type)) {
    return h('section', null, h('h1', null, 'Search'), message('error', 'You cannot search ' + (type || 'any type') + ' with this token.'));
  }
  const params = types.get(type).filter((p) => !COMMON.some((c) => c.name === p.name)).concat(COMMON)
    .sort((a, b) => a.name.localeCompare(b.name));
  const results = h('div', {id: 'results'});
  const form = await buildForm(type, types, params, ctx.params);
  const section = h('section', {class: 'search', dataset: {title: 'Search ' + type}},
    h('h1', null, 'Search ', type), form, results);
  if (ctx.query) runSearch(type, ctx.query, results);
  else results.append(h('p', {class: 'muted'}, 'Add conditions (or none) and press Search.'));
  return section;
}

function defaultType(types) {
  const counted = (session.overview.types || []).filter((t) => t.count > 0 && types.has(t.type)).sort((a, b) => b.count - a.count);
  if (counted.length) return counted[0].type;
  return types.has('Patient') ? 'Patient' : types.keys().next().value;
}

// buildForm makes the form and fills it from the current query.
async function buildForm(type, types, params, query) {
  const byName = new Map(params.map((p) => [p.name, p]));
  const typeSel = h('select', {id: 'search-type', name: 'type'}, [...types.keys()].map((t) => h('option', {value: t, selected: t === type}, t)));
  typeSel.addEventListener('change', () => go('#/search/' + enc(typeSel.value)));
  const rows = h('div', {class: 'conditions', id: 'conditions'});
  const addRow = (name, value) => rows.append(conditionRow(params, byName, name, value));
  for (const [k, v] of query) {
    const name = k.split(':')[0];
    if (RESULT_PARAMS.has(name)) continue;
    addRow(k, v);
  }
  if (!rows.children.length) addRow('', '');
  const sortOpts = [h('option', {value: ''}, '(default: last updated)')];
  for (const p of params) {
    if (['string', 'token', 'date', 'number', 'quantity', 'uri', 'reference'].includes(p.type)) {
      sortOpts.push(h('option', {value: p.name}, p.name + ' ascending'), h('option', {value: '-' + p.name}, p.name + ' descending'));
    }
  }
  const sort = h('select', {id: 'search-sort', name: '_sort'}, sortOpts);
  sort.value = query.get('_sort') || '';
  const count = h('input', {id: 'search-count', name: '_count', type: 'number', min: 1, max: 100, value: query.get('_count') || '20'});
  const includes = params.filter((p) => p.type === 'reference').map((p) => type + ':' + p.name);
  const chosenInc = new Set(query.getAll('_include'));
  const incBox = h('div', {class: 'checks', id: 'search-include'}, includes.length ? includes.map((v) =>
    h('label', null, h('input', {type: 'checkbox', name: '_include', value: v, checked: chosenInc.has(v)}), ' ', v)) : h('span', {class: 'muted'}, 'none'));
  const revList = h('datalist', {id: 'revinclude-options'});
  api.consoleApi('references/' + enc(type)).then((r) => revList.append(...r.revinclude.map((v) => h('option', {value: v})))).catch(() => {});
  const rev = h('input', {id: 'search-revinclude', name: '_revinclude', list: 'revinclude-options', placeholder: 'e.g. Observation:subject', value: query.getAll('_revinclude').join(' ')});
  const form = h('form', {class: 'card search-form', id: 'search-form'},
    h('div', {class: 'row'}, h('label', {for: 'search-type'}, 'Type'), typeSel),
    h('fieldset', null, h('legend', null, 'Conditions (all must match)'), rows,
      h('button', {type: 'button', id: 'add-condition', onclick: () => addRow('', '')}, '+ condition')),
    h('div', {class: 'row'}, h('label', {for: 'search-sort'}, 'Sort'), sort, h('label', {for: 'search-count'}, 'Per page'), count),
    h('fieldset', null, h('legend', null, 'Include the resources these references point at (_include)'), incBox),
    h('div', {class: 'row'}, h('label', {for: 'search-revinclude'}, 'Include resources pointing here (_revinclude)'), rev, revList),
    h('div', {class: 'actions'}, h('button', {type: 'submit', id: 'search-submit'}, 'Search')));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    go('#/search/' + enc(type) + '?' + formQuery(form).toString());
  });
  return form;
}

// conditionRow is one parameter, modifier, prefix and value.
function conditionRow(params, byName, key, value) {
  const [name, modifier = ''] = key.split(':');
  const param = h('select', {class: 'cond-param', 'aria-label': 'parameter'},
    h('option', {value: ''}, '(parameter)'),
    params.map((p) => h('option', {value: p.name, title: p.documentation || '', dataset: {type: p.type}}, p.name + ' (' + p.type + ')')));
  param.value = byName.has(name) ? name : '';
  const mod = h('select', {class: 'cond-mod', 'aria-label': 'modifier'});
  const prefix = h('select', {class: 'cond-prefix', 'aria-label': 'prefix'});
  const input = h('input', {class: 'cond-value', 'aria-label': 'value', value: ''});
  const refresh = () => {
    const p = byName.get(param.value);
    const t = p ? p.type : '';
    mod.replaceChildren(h('option', {value: ''}, '(no modifier)'), ...(MODIFIERS[t] || []).map((m) => h('option', {value: m}, ':' + m)));
    prefix.replaceChildren(h('option', {value: ''}, '(equal)'), ...PREFIXES.map((x) => h('option', {value: x}, x)));
    prefix.hidden = !ORDERED.has(t);
    input.placeholder = placeholder(t);
  };
  param.addEventListener('change', refresh);
  refresh();
  mod.value = [...mod.options].some((o) => o.value === modifier) ? modifier : '';
  let v = value;
  const p = byName.get(name);
  if (p && ORDERED.has(p.type)) {
    const m = /^(eq|ne|gt|lt|ge|le|sa|eb|ap)(.*)$/.exec(v);
    if (m) { prefix.value = m[1]; v = m[2]; }
  }
  input.value = v;
  const row = h('div', {class: 'cond'}, param, mod, prefix, input,
    h('button', {type: 'button', class: 'link', 'aria-label': 'remove condition', onclick: () => row.remove()}, '×'));
  if (!byName.has(name) && name) {
    // A parameter this type does not list: keep it as typed.
    param.append(h('option', {value: name}, name));
    param.value = name;
  }
  return row;
}

function placeholder(t) {
  return {date: '2024-01-31', number: '42', quantity: '5.4|http://unitsofmeasure.org|mg', token: 'system|code or code',
    reference: 'Patient/123', string: 'text', uri: 'http://…'}[t] || 'value';
}

// formQuery turns the form into search parameters.
function formQuery(form) {
  const q = new URLSearchParams();
  for (const row of form.querySelectorAll('.cond')) {
    const name = row.querySelector('.cond-param').value;
    const value = row.querySelector('.cond-value').value.trim();
    const mod = row.querySelector('.cond-mod').value;
    const prefix = row.querySelector('.cond-prefix');
    if (!name || (value === '' && mod !== 'missing')) continue;
    q.append(name + (mod ? ':' + mod : ''), (!prefix.hidden && prefix.value ? prefix.value : '') + value);
  }
  const sort = form.querySelector('#search-sort').value;
  if (sort) q.set('_sort', sort);
  const count = form.querySelector('#search-count').value;
  if (count) q.set('_count', count);
  for (const c of form.querySelectorAll('input[name=_include]:checked')) q.append('_include', c.value);
  for (const v of form.querySelector('#search-revinclude').value.split(/[\s,]+/).filter(Boolean)) q.append('_revinclude', v);
  return q;
}

// runSearch fetches one page and shows it with its raw query.
async function runSearch(type, query, box) {
  const path = api.BASE + '/' + enc(type) + '?' + query;
  const raw = location.origin + path;
  box.replaceChildren(rawQuery(raw), h('p', {class: 'muted'}, 'Searching…'));
  const started = performance.now();
  try {
    const b = (await api.request('GET', path)).body;
    box.replaceChildren(rawQuery(raw), resultsTable(type, b, performance.now() - started), pager(type, b));
  } catch (e) {
    box.replaceChildren(rawQuery(raw), errorBox(e));
  }
}

function rawQuery(url) {
  const curl = "curl -H 'Authorization: Bearer $TOKEN' -H 'Accept: application/fhir+json' '" + url.replace(/'/g, "'\\''") + "'";
  return h('div', {class: 'raw card'},
    h('div', null, h('strong', null, 'GET '), h('code', {id: 'raw-query'}, url)),
    h('details', null, h('summary', null, 'as curl'), h('pre', {id: 'raw-curl'}, curl)));
}

function resultsTable(type, b, ms) {
  const entries = b.entry || [];
  const matches = entries.filter((e) => !e.search || e.search.mode !== 'include');
  const included = entries.filter((e) => e.search && e.search.mode === 'include');
  const summary = h('p', {class: 'muted', id: 'result-summary'},
    (b.total !== undefined ? b.total + ' match(es)' : matches.length + ' on this page') + ' · ' + Math.round(ms) + ' ms');
  if (matches.length === 0) return h('div', null, summary, h('p', {id: 'no-results'}, 'No matches.'));
  const cols = columnsFor(type);
  const table = h('table', {class: 'results', id: 'results-table'},
    h('thead', null, h('tr', null, h('th', null, 'id'), cols.map((c) => h('th', null, c.title)), h('th', null, 'Updated'))),
    h('tbody', null, matches.map((e) => resultRow(e.resource, cols))));
  const inc = included.length ? h('div', null, h('h3', null, 'Included (' + included.length + ')'),
    h('ul', {class: 'included', id: 'included'}, included.map((e) => h('li', null,
      h('a', {href: '#/r/' + enc(e.resource.resourceType) + '/' + enc(e.resource.id)}, e.resource.resourceType + '/' + e.resource.id),
      ' ', summaryText(e.resource))))) : null;
  return h('div', null, summary, table, inc);
}

function resultRow(r, cols) {
  return h('tr', {dataset: {id: r.id}},
    h('td', null, h('a', {href: '#/r/' + enc(r.resourceType) + '/' + enc(r.id)}, r.id),
      r.resourceType === 'Patient' ? h('a', {class: 'chart-link', href: '#/chart/' + enc(r.id)}, 'chart') : null),
    cols.map((c) => h('td', null, c.value(r))),
    h('td', null, r.meta && r.meta.lastUpdated ? new Date(r.meta.lastUpdated).toLocaleString() : ''));
}

function summaryText(r) {
  const c = columnsFor(r.resourceType);
  return c.map((x) => x.value(r)).filter((v) => v && typeof v === 'string').join(' · ');
}

// pager links to the server's previous and next pages.
function pager(type, b) {
  const nav = h('nav', {class: 'pager', id: 'pager'});
  for (const rel of ['first', 'previous', 'next', 'last']) {
    const l = (b.link || []).find((x) => x.relation === rel || (rel === 'previous' && x.relation === 'prev'));
    if (!l) continue;
    let route;
    try {
      const p = api.samePath(l.url);
      route = '#/search/' + enc(type) + '?' + new URL(p, location.href).search.slice(1);
    } catch (e) {
      continue;
    }
    nav.append(h('a', {href: route, id: 'page-' + rel, class: 'button'}, {first: '« First', previous: '‹ Previous', next: 'Next ›', last: 'Last »'}[rel]));
  }
  return nav;
}
