// Assessments: a clinician picks one of the tenant's active forms for a
// patient, fills it pre-filled by $populate, and saves it as a
// QuestionnaireResponse (a draft, or completed). Routes:
//   #/assess/patientId              the forms, and the patient's assessments
//   #/assess/patientId/formId       a new assessment, pre-filled
//   #/fill/responseId               an assessment in progress, continued
// enableWhen is evaluated in the browser (form.js); the form's FHIRPath
// (calculatedExpression, enableWhenExpression, initialExpression) is
// evaluated by the console's API with the server's engine, the latest
// answers sent again whenever the previous evaluation comes back.
import {h, enc, message, clear, confirmDialog} from '../dom.js';
import * as api from '../api.js';
import {can, go, flash, errorBox, session, guardLeave, syncShown} from '../app.js';
import {Form} from '../form.js';
import {renderForm, showEnabled, setError, answersEqual} from '../formview.js';
import {patientName} from './chart.js';
import * as json from '../json.js';
import {sideBySide} from '../diff.js';

export async function assessView(ctx) {
  if (ctx.kind === 'fill') return continueView(ctx.parts[0]);
  const [pid, qid] = ctx.parts;
  if (!pid) return h('section', null, h('h1', null, 'Assessments'), message('info', 'Open a patient\'s chart first, then "New assessment".'));
  return qid ? newView(pid, qid) : pickView(pid, ctx.params.get('title') || '');
}

// canonicalOf is the canonical a response names its form by.
export const canonicalOf = (q) => (q.url ? q.url + (q.version ? '|' + q.version : '') : 'Questionnaire/' + q.id);

// formTitle is a Questionnaire's name for people.
export const formTitle = (q) => (q && (q.title || q.name)) || 'Untitled form';

// findForm reads the Questionnaire a response's canonical names: by url
// (and version), or a relative Questionnaire/id.
export async function findForm(canonical) {
  if (!canonical) return null;
  const m = /^Questionnaire\/([A-Za-z0-9\-.]{1,64})$/.exec(canonical);
  if (m) return api.get('/Questionnaire/' + enc(m[1]));
  const [url, version] = canonical.split('|');
  const b = await api.get('/Questionnaire?url=' + enc(url) + (version ? '&version=' + enc(version) : '') + '&_count=1');
  return ((b.entry || [])[0] || {}).resource || null;
}

// pickView lists the active forms (searched by title) and the patient's
// assessments.
async function pickView(pid, title) {
  const [patient, responses] = await Promise.all([
    api.get('/Patient/' + enc(pid)),
    api.get('/QuestionnaireResponse?subject=' + enc('Patient/' + pid) + '&_count=50&_sort=-authored').catch(() => null),
  ]);
  const name = patientName(patient) || 'Patient/' + pid;
  const list = h('ul', {class: 'forms', id: 'forms', 'aria-live': 'polite'});
  const search = h('input', {type: 'search', id: 'form-search', value: title, placeholder: 'e.g. visit', autocomplete: 'off'});
  let seq = 0;
  const load = async () => {
    const my = ++seq;
    const t = search.value.trim();
    let b;
    try {
      b = await api.get('/Questionnaire?status=active&_count=50' + (t ? '&title:contains=' + enc(t) : ''));
    } catch (e) {
      if (my === seq) clear(list, h('li', null, errorBox(e)));
      return;
    }
    if (my !== seq) return;
    const forms = (b.entry || []).map((e) => e.resource).filter(Boolean).sort((a, c) => formTitle(a).localeCompare(formTitle(c)));
    clear(list, forms.length ? forms.map((q) => h('li', {dataset: {id: q.id}},
      h('a', {class: 'form-link', href: '#/assess/' + enc(pid) + '/' + enc(q.id)}, formTitle(q)),
      q.version ? h('span', {class: 'muted'}, ' version ' + q.version) : null,
      q.publisher ? h('span', {class: 'muted'}, ' · ' + q.publisher) : null,
      q.description ? h('div', {class: 'muted small'}, q.description) : null))
      : h('li', {class: 'muted empty'}, t ? 'No active form has "' + t + '" in its title.' : 'This tenant has no active form.'));
  };
  let timer = 0;
  search.addEventListener('input', () => { clearTimeout(timer); timer = setTimeout(load, 150); });
  await load();
  const rs = responses ? (responses.entry || []).map((e) => e.resource).filter((r) => r && r.resourceType === 'QuestionnaireResponse') : [];
  const titles = await formTitles(rs);
  const row = (r) => h('li', {dataset: {id: r.id}},
    h('a', {href: r.status === 'in-progress' && can('QuestionnaireResponse', 'u') ? '#/fill/' + enc(r.id) : '#/response/' + enc(r.id)},
      r.status === 'in-progress' ? 'Continue: ' : '', titles.get((r.questionnaire || '').split('|')[0]) || formName(r)),
    h('span', {class: 'muted'}, ' · ' + r.status + (r.authored ? ' · ' + new Date(r.authored).toLocaleString() : '')));
  const open = rs.filter((r) => r.status === 'in-progress');
  const done = rs.filter((r) => r.status !== 'in-progress');
  return h('section', {class: 'assess-pick', id: 'assess-pick', dataset: {title: 'New assessment: ' + name}},
    h('h1', null, 'New assessment ', h('span', {class: 'muted'}, 'for '), h('a', {href: '#/chart/' + enc(pid)}, name)),
    open.length ? h('section', {class: 'card', id: 'in-progress'}, h('h2', null, 'In progress'), h('ul', {class: 'items'}, open.map(row))) : null,
    h('section', {class: 'card'}, h('h2', null, 'Forms'),
      h('div', {class: 'row'}, h('label', {for: 'form-search'}, 'Search by title'), search), list),
    done.length ? h('section', {class: 'card', id: 'completed'}, h('h2', null, 'Earlier assessments'), h('ul', {class: 'items'}, done.map(row))) : null);
}

// formTitles reads the titles of the forms of responses, in one search,
// by url; a form not found is named by its canonical.
async function formTitles(responses) {
  const urls = [...new Set(responses.map((r) => (r.questionnaire || '').split('|')[0]).filter((u) => /^https?:/.test(u)))].slice(0, 20);
  const out = new Map();
  if (!urls.length) return out;
  try {
    const b = await api.get('/Questionnaire?url=' + urls.map(enc).join(',') + '&_count=100&_elements=url,title,name');
    for (const e of b.entry || []) if (e.resource && e.resource.url) out.set(e.resource.url, formTitle(e.resource));
  } catch (e) { /* the canonicals name them */ }
  return out;
}

// formName is how a response names its form, for lists.
function formName(r) {
  const c = r.questionnaire || '';
  const ext = ((r._questionnaire || {}).extension || []).find((e) => e.url === 'http://hl7.org/fhir/StructureDefinition/display');
  if (ext && ext.valueString) return ext.valueString;
  return c.split('|')[0].split('/').pop() || 'Assessment';
}

// newView opens a form for a patient, pre-filled by $populate.
async function newView(pid, qid) {
  const [q, patient] = await Promise.all([api.get('/Questionnaire/' + enc(qid)), api.get('/Patient/' + enc(pid))]);
  const params = {resourceType: 'Parameters', parameter: [
    {name: 'subject', valueReference: {reference: 'Patient/' + pid}},
    {name: 'context', part: [{name: 'name', valueString: 'patient'}, {name: 'content', valueReference: {reference: 'Patient/' + pid}}]},
  ]};
  let populated = null;
  let note = null;
  try {
    const out = (await api.fhir('POST', '/Questionnaire/' + enc(qid) + '/$populate', {body: params})).body;
    const part = (n) => ((out && out.parameter) || []).find((p) => p.name === n);
    populated = (part('response') || {}).resource || null;
    const issues = (((part('issues') || {}).resource || {}).issue || []).filter((i) => i.severity !== 'information');
    if (issues.length) note = message('info', h('strong', null, 'Some answers could not be pre-filled:'), h('ul', null, issues.map((i) => h('li', null, i.diagnostics || i.code))));
  } catch (e) {
    note = message('info', 'The form could not be pre-filled from the chart (' + e.message + '); it starts empty.');
  }
  return fillView({q, patient, base: populated, id: '', version: '', note});
}

// continueView opens a saved response to go on filling it.
async function continueView(id) {
  const qr = await api.get('/QuestionnaireResponse/' + enc(id));
  const q = await findForm(qr.questionnaire);
  if (!q) return h('section', null, h('h1', null, 'Assessment'), message('error', 'The form of this response (' + (qr.questionnaire || 'none') + ') is not on this server.'));
  const ref = (qr.subject && qr.subject.reference) || '';
  const patient = /^Patient\//.test(ref) ? await api.get('/' + ref).catch(() => null) : null;
  return fillView({q, patient, base: qr, id: qr.id, version: (qr.meta && qr.meta.versionId) || '', note: null});
}

// fillView is the form being filled, with its Save draft and Complete.
function fillView(st) {
  const started = performance.now();
  const {q, patient} = st;
  const pid = patient ? patient.id : '';
  const name = patient ? patientName(patient) || 'Patient/' + pid : 'no patient';
  st.form = new Form(q, st.base);
  st.queries = {};
  st.asked = new Set();
  st.ev = {inflight: false, again: false, initial: false, count: 0};
  st.expand = new Map();
  st.live = h('p', {class: 'sr-only', id: 'form-live', 'aria-live': 'polite'});
  st.problems = h('div', {id: 'form-problems'});
  st.summary = h('div', {id: 'form-errors', tabindex: '-1'});
  st.status = h('p', {class: 'save-status', id: 'save-status', role: 'status'}, st.id ? 'Saved as version ' + st.version + '.' : 'Not saved yet.');
  st.conflictBox = h('div', {id: 'conflict-box'});
  const io = {
    changed: (n) => changed(st, n),
    expand: (url, filter) => expand(st, url, filter),
    searchReferences,
  };
  const formEl = renderForm(st.form, io);
  const form = h('form', {class: 'assessment-form', id: 'assessment-form', novalidate: true, 'aria-label': formTitle(q)}, formEl);
  form.addEventListener('submit', (ev) => ev.preventDefault());
  const saveDraft = h('button', {type: 'button', class: 'secondary', id: 'save-draft', onclick: () => save(st, 'in-progress')}, 'Save draft');
  const complete = h('button', {type: 'button', id: 'complete', onclick: () => save(st, 'completed')}, 'Complete');
  const writable = can('QuestionnaireResponse', st.id ? 'u' : 'c');
  saveDraft.disabled = complete.disabled = !writable;
  st.section = h('section', {class: 'assessment', id: 'assessment', dataset: {title: formTitle(q) + (patient ? ': ' + name : ''), state: 'loading'}},
    h('header', {class: 'card assessment-head'},
      h('h1', null, h('span', {id: 'form-title'}, formTitle(q)), q.version ? h('span', {class: 'muted small'}, ' version ' + q.version) : null),
      h('p', {class: 'who-for'}, patient ? ['For ', h('a', {id: 'form-patient', href: '#/chart/' + enc(pid)}, name),
        patient.birthDate ? h('span', {class: 'muted'}, ' · born ' + patient.birthDate) : null] : 'No patient',
      ' · ', h('span', {class: 'badge', id: 'form-status'}, !st.id ? 'new' : st.base.status === 'in-progress' ? 'in progress' : st.base.status),
      st.form.nodes().some((n) => n.q.required) ? h('span', {class: 'muted'}, ' · fields marked ', h('span', {class: 'req'}, '*'), ' are required') : null),
      q.description ? h('p', {class: 'muted'}, q.description) : null,
      h('div', {class: 'actions no-print'},
        hasInitial(q) ? h('button', {type: 'button', class: 'secondary', id: 'refill', onclick: () => evaluate(st, true)}, 'Fill empty answers from the chart') : null)),
    st.note, writable ? null : message('info', 'This token cannot save assessments; the form can be filled but not stored.'),
    st.problems, st.summary, form, st.conflictBox,
    h('div', {class: 'form-actions no-print'}, saveDraft, complete,
      h('a', {class: 'button secondary', href: pid ? '#/chart/' + enc(pid) : '#/'}, 'Close'), st.status),
    st.live);
  st.section.dataset.renderMs = (performance.now() - started).toFixed(1);
  // The first frame after the form is in the page: built, laid out, painted.
  requestAnimationFrame(() => setTimeout(() => { st.section.dataset.paintMs = (performance.now() - started).toFixed(1); }, 0));
  st.section.dataset.items = st.form.nodes().length;
  if (st.form.hasExpressions) evaluate(st, false);
  else st.section.dataset.state = 'ready';
  const guard = () => (!st.dirty ? Promise.resolve(true)
    : confirmDialog('Leave this assessment? The answers given since it was last saved will be lost.', 'Leave without saving'));
  guard.dirty = () => !!st.dirty;
  guardLeave(guard);
  return st.section;
}

const hasInitial = (q) => JSON.stringify(q.item || []).includes('sdc-questionnaire-initialExpression');

// changed follows an answer: enableWhen again, the form's expressions
// sent to the server, the node's old server message cleared.
function changed(st, n) {
  const t0 = performance.now();
  if (n) setError(n, '');
  st.form.recompute();
  showEnabled(st.form);
  st.dirty = true;
  st.status.textContent = 'Unsaved changes.';
  st.section.dataset.enableMs = (performance.now() - t0).toFixed(2);
  if (st.form.hasExpressions) evaluate(st, false, t0);
}

// evaluate asks the server for the form's expressions over the answers
// as they are; while one request is out, later changes wait for it and go
// in one more. initial asks for the initialExpressions, applied to the
// questions still unanswered.
async function evaluate(st, initial, t0 = performance.now()) {
  if (st.ev.inflight) {
    st.ev.again = true;
    st.ev.initial = st.ev.initial || initial; // asked for in the next request
    return;
  }
  st.ev.inflight = true;
  st.section.dataset.state = 'evaluating';
  const {item, paths} = st.form.evaluationTree();
  const body = {
    questionnaire: st.q,
    response: {resourceType: 'QuestionnaireResponse', status: 'in-progress', subject: st.patient ? {reference: 'Patient/' + st.patient.id} : undefined, item},
    context: st.patient ? {patient: st.patient} : {},
    queries: st.queries, initial,
  };
  try {
    const res = (await api.request('POST', '/console/api/expressions', {body: JSON.stringify(body), headers: {'Content-Type': 'application/json', Accept: 'application/json'}})).body;
    const fetched = await runQueries(st, res.queries || []);
    if (apply(st, res, paths, initial)) st.ev.again = true; // answers filled: calculate again
    st.ev.count++;
    st.section.dataset.evaluations = st.ev.count;
    st.section.dataset.reactMs = (performance.now() - t0).toFixed(1);
    st.section.dataset.serverMs = String(res.millis);
    if (fetched) { // the searches' answers feed variables: once more, as asked
      st.ev.again = true;
      st.ev.initial = st.ev.initial || initial;
    }
  } catch (e) {
    st.live.textContent = 'Calculated answers could not be updated: ' + e.message;
  } finally {
    st.ev.inflight = false;
    if (st.ev.again) {
      const next = st.ev.initial;
      st.ev.again = st.ev.initial = false;
      evaluate(st, next);
    } else {
      st.section.dataset.state = 'ready';
    }
  }
}

// runQueries runs, with the signed-in token, the form's x-fhir-query
// searches the server asked for (each once) and reports whether any ran.
async function runQueries(st, queries) {
  const todo = queries.filter((q) => !st.asked.has(q));
  for (const q of todo) st.asked.add(q);
  await Promise.all(todo.map(async (q) => {
    // A search of a type, as $populate runs them; a form cannot make the
    // browser call operations ($export...) or other paths with its token.
    if (!/^[A-Z][A-Za-z]+(\?[^#]*)?$/.test(q)) {
      st.live.textContent = 'The form\'s query ' + q + ' is not a search; it was not run.';
      return;
    }
    try {
      st.queries[q] = await api.get('/' + q);
    } catch (e) {
      st.live.textContent = 'A search of the form failed (' + q + '): ' + e.message;
    }
  }));
  return todo.length > 0;
}

// apply puts the server's answers on the form and reports whether it
// filled unanswered questions from their initialExpressions.
function apply(st, res, paths, initial) {
  const announce = [];
  for (const [p, answers] of Object.entries(res.calculated || {})) {
    const n = paths.get(p);
    if (!n || answersEqual(n.answers, answers)) continue;
    n.answers = answers;
    if (n.draw) n.draw();
    if (n.el) {
      n.el.classList.remove('updated');
      void n.el.offsetWidth; // restart the highlight
      n.el.classList.add('updated');
    }
    announce.push((n.q.text || n.q.linkId) + ': ' + (answers.length ? answers.map((a) => Object.values(a)[0]).map((v) => (v && typeof v === 'object' ? v.display || v.code || v.value : v)).join(', ') : 'no value'));
  }
  let filled = false;
  if (initial) {
    for (const [p, answers] of Object.entries(res.initial || {})) {
      const n = paths.get(p);
      if (!n || n.answers.some((a) => Object.keys(a).length) || !answers.length) continue;
      n.answers = answers;
      filled = true;
      if (n.draw) n.draw();
    }
  }
  for (const [p, on] of Object.entries(res.enabled || {})) {
    const n = paths.get(p);
    if (n) n.exprEnabled = on;
  }
  st.form.recompute();
  showEnabled(st.form);
  if (announce.length) st.live.textContent = announce.join('; ');
  const problems = res.problems || [];
  const shown = st.problems.dataset.text || '';
  if (problems.join('\n') !== shown) {
    st.problems.dataset.text = problems.join('\n');
    clear(st.problems, problems.length ? message('info', h('strong', null, 'Some of the form\'s calculations failed; the server checks the answers when they are saved:'),
      h('ul', null, problems.map((p) => h('li', null, p)))) : null);
  }
  return filled;
}

// expand lists a value set's codes through $expand (filtered by text),
// each expansion asked once.
async function expand(st, url, filter) {
  const key = url + '\n' + filter;
  if (!st.expand.has(key)) {
    st.expand.set(key, api.get('/ValueSet/$expand?url=' + enc(url) + '&count=50' + (filter ? '&filter=' + enc(filter) : '')).then((vs) => {
      const codings = [];
      const walk = (list) => {
        for (const c of list || []) {
          if (c.code && !c.abstract) codings.push({system: c.system, code: c.code, display: c.display});
          walk(c.contains);
        }
      };
      walk(vs.expansion && vs.expansion.contains);
      return {codings, total: (vs.expansion && vs.expansion.total) || codings.length};
    }));
  }
  try {
    return await st.expand.get(key);
  } catch (e) {
    st.expand.delete(key);
    throw e;
  }
}

// NAMED are the types searched by name in a reference picker; others by id.
const NAMED = new Set(['Patient', 'Practitioner', 'RelatedPerson', 'Organization', 'Location', 'HealthcareService', 'Group', 'Device']);

// searchReferences finds the resources a reference answer can point at.
async function searchReferences(types, text) {
  const lists = await Promise.all(types.slice(0, 3).map(async (t) => {
    const q = text ? (NAMED.has(t) ? '&name=' + enc(text) : '&_id=' + enc(text)) : '';
    try {
      const b = await api.get('/' + t + '?_count=10' + q);
      return (b.entry || []).map((e) => e.resource).filter(Boolean).map((r) => ({reference: t + '/' + r.id, display: displayOf(r)}));
    } catch (e) {
      return [];
    }
  }));
  return lists.flat();
}

// displayOf names a resource in a reference.
function displayOf(r) {
  if (Array.isArray(r.name) && r.name.length) return patientName(r);
  if (typeof r.name === 'string') return r.name;
  return r.resourceType + '/' + r.id;
}

// save stores the response as a draft or completed. The form keeps every
// answer whatever the server says.
async function save(st, status) {
  const {item, paths} = st.form.response();
  const base = st.base && st.base.resourceType === 'QuestionnaireResponse' ? st.base : {};
  const qr = {resourceType: 'QuestionnaireResponse'};
  if (st.id) qr.id = st.id;
  for (const k of ['identifier', 'basedOn', 'partOf', 'encounter', 'source']) if (base[k]) qr[k] = base[k];
  qr.questionnaire = canonicalOf(st.q);
  qr.status = status;
  if (st.patient) qr.subject = {reference: 'Patient/' + st.patient.id, display: patientName(st.patient) || undefined};
  else if (base.subject) qr.subject = base.subject;
  qr.authored = new Date().toISOString();
  qr.author = base.author || (session.overview && session.overview.subject ? {display: session.overview.subject} : undefined);
  if (!qr.author) delete qr.author;
  qr.item = item;
  if (!item.length) delete qr.item;
  const headers = {Prefer: 'return=representation'};
  if (st.id && st.version) headers['If-Match'] = 'W/"' + st.version + '"';
  for (const n of st.form.nodes()) setError(n, '');
  clear(st.summary);
  clear(st.conflictBox);
  st.status.textContent = status === 'completed' ? 'Completing…' : 'Saving…';
  let saved;
  try {
    saved = st.id
      ? (await api.fhir('PUT', '/QuestionnaireResponse/' + enc(st.id), {body: qr, headers})).body
      : (await api.fhir('POST', '/QuestionnaireResponse', {body: qr, headers})).body;
  } catch (e) {
    st.status.textContent = status === 'completed' ? 'Not completed.' : 'Not saved.';
    if (e.status === 412 || e.status === 409) return conflict(st, qr, e, status);
    if (e.body && Array.isArray(e.body.issue)) return showIssues(st, e, paths);
    clear(st.summary, errorBox(e));
    return;
  }
  st.id = saved.id;
  st.version = (saved.meta && saved.meta.versionId) || '';
  st.base = saved;
  st.dirty = false;
  if (status === 'completed') {
    flash('ok', 'The assessment is complete (version ' + st.version + ').');
    go('#/response/' + enc(saved.id));
    return;
  }
  history.replaceState(null, '', '#/fill/' + enc(saved.id));
  syncShown();
  document.getElementById('form-status').textContent = 'in progress';
  st.status.textContent = 'Draft saved, version ' + st.version + ', at ' + new Date().toLocaleTimeString() + '.';
}

// showIssues puts each of the server's issues beside the item its
// expression names, lists them on top and moves to the first.
function showIssues(st, e, paths) {
  const issues = e.body.issue;
  const placed = [];
  const loose = [];
  for (const is of issues) {
    const n = nodeAt(paths, (is.expression || [])[0] || '');
    const text = (is.severity && is.severity !== 'error' && is.severity !== 'fatal' ? is.severity + ': ' : '') + (is.diagnostics || is.code || 'invalid');
    if (n) {
      const prev = n.errorEl ? n.errorEl.textContent : '';
      setError(n, prev ? prev + ' ' + text : text);
      placed.push({n, text});
    } else {
      loose.push(text);
    }
  }
  const goTo = (n) => {
    n.el.scrollIntoView({block: 'center'});
    const c = n.el.querySelector('input:not([type=hidden]), select, textarea, button');
    if (c) c.focus({preventScroll: true});
  };
  clear(st.summary, message('error',
    h('strong', null, 'The server did not accept the assessment (' + e.status + '): ' + issues.length + ' problem' + (issues.length === 1 ? '' : 's') + '.'),
    ' Your answers are kept; each problem is shown at its question.',
    h('ul', {class: 'issues'}, placed.map((p) => h('li', null, h('button', {type: 'button', class: 'link goto', onclick: () => goTo(p.n)}, p.n.q.text || p.n.q.linkId), ': ' + p.text)),
      loose.map((t) => h('li', null, t)))));
  if (placed.length) goTo(placed[0].n);
  else st.summary.focus();
}

// nodeAt is the node of the longest prefix of an expression
// (QuestionnaireResponse.item[1].item[3].answer[0].valueInteger) that
// names an item of the response sent.
function nodeAt(paths, expr) {
  let p = expr;
  while (p) {
    if (paths.has(p)) return paths.get(p);
    const cut = p.lastIndexOf('.');
    if (cut < 0) return null;
    p = p.slice(0, cut);
  }
  return null;
}

// conflict shows the version saved meanwhile beside the user's answers,
// as the resource editor does; the form keeps the user's answers.
async function conflict(st, mine, err, status) {
  let theirs;
  try {
    theirs = await api.get('/QuestionnaireResponse/' + enc(st.id));
  } catch (e) {
    clear(st.conflictBox, errorBox(err), errorBox(e));
    return;
  }
  const v = (theirs.meta && theirs.meta.versionId) || '?';
  const strip = (r) => {
    const c = structuredClone(r);
    delete c.meta;
    delete c.text;
    return json.pretty(c);
  };
  clear(st.conflictBox, h('div', {class: 'conflict', id: 'conflict'},
    message('error', h('strong', null, 'Someone else saved version ' + v + ' of this assessment while you were filling version ' + st.version + '.'),
      ' Your answers are still in the form. Compare, then open theirs or save yours over it.'),
    h('details', null, h('summary', null, 'Compare the two'), sideBySide(strip(theirs), strip(mine), 'saved v' + v + ' (theirs)', 'your answers')),
    h('div', {class: 'actions'},
      h('a', {class: 'button secondary', id: 'take-theirs', href: '#/response/' + enc(st.id)}, 'Open their version'),
      h('button', {type: 'button', class: 'danger', id: 'keep-mine', onclick: () => { st.version = v; save(st, status); }}, 'Save mine over v' + v))));
  st.conflictBox.scrollIntoView({block: 'center'});
}
