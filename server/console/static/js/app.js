// The console: a hash router over a handful of views. Routes:
//   #/  #/signin  #/search/Type?query  #/r/Type/id[?tab=]  #/r/Type/id/_history/v
//   #/new/Type  #/edit/Type/id  #/upload  #/export  #/chart/patientId  #/views
//   #/assess/patientId[/formId]  #/fill/responseId  #/response/responseId  #/subscriptions  #/graphql
import {h, clear, message, enc} from './dom.js';
import * as api from './api.js';
import {signinView} from './views/signin.js';
import {homeView} from './views/home.js';
import {searchView} from './views/search.js';
import {resourceView} from './views/resource.js';
import {editView} from './views/edit.js';
import {uploadView} from './views/upload.js';
import {exportView, exportAvailable} from './views/export.js';
import {chartView} from './views/chart.js';
import {viewsView} from './views/views.js';
import {assessView} from './views/assessment.js';
import {responseView} from './views/response.js';
import {subscriptionsView} from './views/subscriptions.js';
import {graphqlView} from './views/graphql.js';

// session is what the server said about the signed-in caller (overview).
export const session = {overview: null, access: new Map(), loadedAt: 0};

// can tells whether the caller's scopes allow interaction letter (c r u d
// s) on type; '*' asks whether any type allows it.
export function can(type, letter) {
  if (!session.overview) return false;
  if (type === '*') return session.overview.types.some((t) => t.access.includes(letter));
  return (session.access.get(type) || '').includes(letter);
}

// loadSession asks the server who the token belongs to (and what the
// tenant holds), and keeps the answer for reloads of this tab.
export async function loadSession() {
  const ov = await api.consoleApi('overview');
  useSession(ov);
  session.loadedAt = Date.now();
  api.remember('overview', ov);
  return ov;
}

function useSession(ov) {
  session.overview = ov;
  session.access = new Map(ov.types.map((t) => [t.type, t.access]));
}

// resumeSession takes the overview kept by an earlier page of this tab;
// the server still checks the token on every request.
function resumeSession() {
  const ov = api.recall('overview');
  if (ov && ov.types) useSession(ov);
}

const views = {
  '': homeView, signin: signinView, search: searchView, r: resourceView,
  new: editView, edit: editView, upload: uploadView, export: exportView, chart: chartView, views: viewsView,
  assess: assessView, fill: assessView, response: responseView, subscriptions: subscriptionsView, graphql: graphqlView,
};

// parseHash splits the location hash into path parts and query.
export function parseHash() {
  const raw = location.hash.replace(/^#\/?/, '');
  const q = raw.indexOf('?');
  const path = q < 0 ? raw : raw.slice(0, q);
  const query = q < 0 ? '' : raw.slice(q + 1);
  return {parts: path.split('/').filter(Boolean).map(decodeURIComponent), query, params: new URLSearchParams(query)};
}

let flashed = null;
// flash shows a message at the top of the next page rendered.
export function flash(kind, text) { flashed = {kind, text}; }

// go navigates to a console route.
export function go(route) {
  if (location.hash === route) route_();
  else location.hash = route;
}

function renderWho() {
  const who = document.getElementById('who');
  const nav = document.getElementById('nav');
  const ov = session.overview;
  if (!ov) { clear(who); nav.hidden = true; return; }
  nav.hidden = false;
  for (const a of nav.querySelectorAll('[data-needs]')) {
    a.hidden = ![...a.dataset.needs].every((l) => can('*', l));
  }
  clear(who,
    h('span', {class: 'tenant', id: 'tenant', title: 'tenant'}, ov.tenant),
    h('span', {class: 'scopes', id: 'scopes', title: 'scopes of the token'}, ov.scopes.join(' ') || '(no scopes)'),
    ov.patient ? h('a', {class: 'scopes', id: 'my-chart', href: '#/chart/' + enc(ov.patient), title: 'the chart of the token\'s patient'}, 'patient ' + ov.patient) : null,
    h('button', {type: 'button', id: 'signout', onclick: () => { api.signOut(); session.overview = null; renderWho(); go('#/signin'); }}, 'Sign out'));
}

// leaveGuard, set by a view with unsaved work (guardLeave), is asked
// before another route replaces the view; it resolves to whether to go.
let leaveGuard = null;
let shown = location.hash;

// guardLeave sets the question asked before leaving the current view.
export function guardLeave(fn) { leaveGuard = fn; }

// syncShown tells the router that the view changed its own route
// (history.replaceState), which is no navigation away from it.
export function syncShown() { shown = location.hash; }

window.addEventListener('beforeunload', (ev) => {
  if (leaveGuard && leaveGuard.dirty && leaveGuard.dirty()) ev.preventDefault();
});

let seq = 0;
// route_ renders the view of the current hash.
async function route_() {
  if (leaveGuard && location.hash !== shown) {
    const target = location.hash;
    history.replaceState(null, '', shown); // stay until the user answers
    if (!(await leaveGuard())) return;
    history.replaceState(null, '', target);
  }
  leaveGuard = null;
  shown = location.hash;
  const my = ++seq;
  const main = document.getElementById('main');
  const {parts, query, params} = parseHash();
  let name = parts[0] || '';
  if (!api.token() && name !== 'signin') {
    // Straight to the sign-in form, without a second navigation.
    history.replaceState(null, '', '#/signin');
    name = 'signin';
  }
  try {
    if (api.token() && name === '') await loadSession(); // the home page shows fresh counts
    if (api.token() && !session.overview) resumeSession();
    if (api.token() && !session.overview) await loadSession();
    renderWho();
    if (session.overview) exportAvailable().then((ok) => { document.getElementById('nav-export').hidden = !ok; });
    const view = views[name] || notFound;
    const node = await view({parts: parts.slice(1), query, params, kind: name});
    if (my !== seq) return; // a newer navigation won
    const note = flashed ? message(flashed.kind, h('span', {id: 'flash'}, flashed.text)) : null;
    flashed = null;
    clear(main, note, node);
    main.dataset.view = name || 'home';
    document.title = (node.dataset && node.dataset.title ? node.dataset.title + ' · ' : '') + 'fhirstore console';
  } catch (e) {
    if (my !== seq) return;
    if (e instanceof api.ApiError && e.status === 401) {
      api.signOut();
      session.overview = null;
      renderWho();
      clear(main, await signinView({parts: [], params: new URLSearchParams(), expired: true}));
      main.dataset.view = 'signin';
      return;
    }
    clear(main, errorBox(e));
    main.dataset.view = 'error';
  }
}

// errorBox shows an error with its OperationOutcome issues.
export function errorBox(e) {
  const issues = e && e.body && Array.isArray(e.body.issue) ? e.body.issue : [];
  return message('error', h('strong', null, e.status ? 'The server answered ' + e.status : 'Something went wrong'),
    issues.length ? h('ul', null, issues.map((i) => h('li', null, (i.severity || '') + ' ' + (i.code || '') + ': ' + (i.diagnostics || ''),
      i.expression ? h('code', null, ' ' + i.expression.join(', ')) : null))) : h('p', null, e.message || String(e)));
}

function notFound() {
  return h('section', null, h('h1', null, 'Not found'), h('p', null, 'The console has no such page. ', h('a', {href: '#/'}, 'Home')));
}

window.addEventListener('hashchange', route_);
if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', route_);
else route_();
