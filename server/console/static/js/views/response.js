// Reading an assessment: a QuestionnaireResponse laid out as its form,
// questions and answers, with its status, author, date, form and history;
// once completed, "Add to the chart" runs $extract, lists what it would
// create and posts the transaction. Route: #/response/id
import {h, enc, message, clear, fmtDate} from '../dom.js';
import * as api from '../api.js';
import {can, errorBox} from '../app.js';
import {Form, answerText, itemControl, ext, EXT} from '../form.js';
import {unitText} from '../formview.js';
import {findForm, formTitle} from './assessment.js';
import {patientName} from './chart.js';
import * as data from '../chartdata.js';

export async function responseView(ctx) {
  const id = ctx.parts[0];
  const qr = await api.get('/QuestionnaireResponse/' + enc(id));
  const ref = (qr.subject && qr.subject.reference) || '';
  const [q, patient, hist, derived] = await Promise.all([
    findForm(qr.questionnaire).catch(() => null),
    /^Patient\/[^/]+$/.test(ref) ? api.get('/' + ref).catch(() => null) : null,
    api.get('/QuestionnaireResponse/' + enc(id) + '/_history?_count=20').catch(() => null),
    api.get('/Observation?derived-from=' + enc('QuestionnaireResponse/' + id) + '&_summary=count').catch(() => null),
  ]);
  const pid = patient ? patient.id : '';
  const title = q ? formTitle(q) : (qr.questionnaire || 'Assessment');
  const fact = (label, idAttr, ...value) => [h('dt', null, label), h('dd', {id: idAttr}, ...value)];
  const versions = hist ? (hist.entry || []).filter((e) => e.resource) : [];
  const added = derived && typeof derived.total === 'number' ? derived.total : 0;
  const extractBox = h('div', {id: 'extract-box', 'aria-live': 'polite'});
  const actions = h('div', {class: 'actions no-print'},
    qr.status === 'in-progress' && can('QuestionnaireResponse', 'u') ? h('a', {class: 'button', id: 'continue', href: '#/fill/' + enc(id)}, 'Continue filling') : null,
    qr.status === 'completed' && q ? h('button', {type: 'button', id: 'add-to-chart', onclick: () => extract(id, pid, extractBox)}, added ? 'Add to the chart again' : 'Add to the chart') : null,
    h('button', {type: 'button', class: 'secondary', id: 'response-print', onclick: () => window.print()}, 'Print'),
    h('a', {class: 'button secondary', href: '#/r/QuestionnaireResponse/' + enc(id)}, 'Resource (JSON)'));
  return h('section', {class: 'assessment response', id: 'response', dataset: {title: title + (patient ? ': ' + patientName(patient) : ''), status: qr.status}},
    h('header', {class: 'card assessment-head'},
      h('h1', null, h('span', {id: 'response-title'}, title), q && q.version ? h('span', {class: 'muted small', id: 'response-form-version'}, ' version ' + q.version) : null),
      h('dl', {class: 'facts'},
        fact('Patient', 'response-patient', patient ? h('a', {href: '#/chart/' + enc(pid)}, patientName(patient) || ref) : (qr.subject && (qr.subject.display || qr.subject.reference)) || '—'),
        fact('Status', 'response-status', h('span', {class: 'badge status-' + qr.status}, qr.status === 'in-progress' ? 'in progress' : qr.status)),
        fact('Author', 'response-author', qr.author ? (qr.author.display || qr.author.reference) : '—'),
        fact('Date', 'response-date', qr.authored ? fmtDate(qr.authored) : '—'),
        fact('Version', 'response-version', ((qr.meta && qr.meta.versionId) || '?') + (qr.meta && qr.meta.lastUpdated ? ', saved ' + fmtDate(qr.meta.lastUpdated) : '')),
        added ? fact('In the chart', 'response-added', added + ' observation' + (added === 1 ? '' : 's') + ' from this assessment', pid ? [' · ', h('a', {href: '#/chart/' + enc(pid)}, 'open the chart')] : null) : null),
      actions),
    extractBox,
    q ? null : message('info', 'The form ' + (qr.questionnaire || '') + ' is not on this server: the answers are shown as the response holds them.'),
    h('div', {class: 'card qread', id: 'response-items'}, q ? formAnswers(q, qr) : plainAnswers(qr.item || [], 2)),
    versions.length ? h('section', {class: 'card no-print', id: 'response-history'}, h('h2', null, 'History'),
      h('table', null, h('thead', null, h('tr', null, h('th', null, 'Version'), h('th', null, 'Saved'), h('th', null, 'Status'))),
        h('tbody', null, versions.map((e) => h('tr', null,
          h('td', null, h('a', {href: '#/r/QuestionnaireResponse/' + enc(id) + '/_history/' + enc(e.resource.meta.versionId)}, 'v' + e.resource.meta.versionId)),
          h('td', null, fmtDate(e.resource.meta.lastUpdated)), h('td', null, e.resource.status)))))) : null);
}

// formAnswers lays the answers out as the form: its groups and questions
// in its order; a question left unanswered is shown as such when it
// applied (its enableWhen holds).
function formAnswers(q, qr) {
  const form = new Form(q, qr);
  const walk = (node, depth) => node.kids.flatMap((s) => s.nodes.map((n) => {
    const qi = n.q;
    if (qi.type === 'display') {
      if (['help', 'flyover', 'legal'].includes(itemControl(qi)) || !n.enabled || ext(qi, EXT.enableWhenExpression)) return null;
      return h('p', {class: 'qdisplay muted'}, qi.text);
    }
    if (qi.type === 'group') {
      const kids = walk(n, depth + 1).filter(Boolean);
      if (!n.enabled || !kids.some((k) => k.classList.contains('answered') || k.querySelector('.answered'))) return null;
      return h('section', {class: 'qgroup depth' + depth}, h('h' + Math.min(depth + 1, 6), {class: 'qgroup-title'}, qi.prefix ? qi.prefix + ' ' : '', qi.text || qi.linkId), kids);
    }
    const unit = qi.type === 'decimal' || qi.type === 'integer' ? unitText(qi) : '';
    const answers = n.answers.map((a) => answerText(a)).filter((x) => x !== '').map((x) => x + (unit ? ' ' + unit : ''));
    const applies = n.enabled && !ext(qi, EXT.enableWhenExpression);
    if (!answers.length && !applies) return null;
    return h('div', {class: 'qrow' + (answers.length ? ' answered' : ''), dataset: {linkId: qi.linkId}},
      h('div', {class: 'qq'}, qi.prefix ? qi.prefix + ' ' : '', qi.text || qi.linkId),
      h('div', {class: 'qa'}, answers.length ? answers.join(', ') : h('span', {class: 'muted'}, 'not answered'),
        n.kids.length ? walk(n, depth + 1) : null));
  }));
  return walk(form.root, 2);
}

// plainAnswers lays out a response's own items when its form is missing.
function plainAnswers(items, depth) {
  return items.map((it) => it.item && !it.answer
    ? h('section', {class: 'qgroup'}, h('h' + Math.min(depth + 1, 6), null, it.text || it.linkId), plainAnswers(it.item, depth + 1))
    : h('div', {class: 'qrow answered'}, h('div', {class: 'qq'}, it.text || it.linkId), h('div', {class: 'qa'}, (it.answer || []).map(answerText).join(', '))));
}

// extract runs $extract and shows what it would create, to post on a click.
async function extract(id, pid, box) {
  clear(box, message('info', 'Working out what the assessment adds to the chart…'));
  let bundle;
  let issues = [];
  try {
    const out = (await api.fhir('POST', '/QuestionnaireResponse/' + enc(id) + '/$extract', {body: {resourceType: 'Parameters'}})).body;
    const param = (n) => ((out && out.parameter) || []).find((p) => p.name === n);
    bundle = (param('return') || {}).resource;
    issues = (((param('issues') || {}).resource || {}).issue) || [];
    if (!bundle && out && out.resourceType === 'Bundle') bundle = out;
  } catch (e) {
    clear(box, errorBox(e));
    return;
  }
  const entries = (bundle && bundle.entry) || [];
  if (!entries.length) {
    clear(box, message('info', 'This assessment adds nothing to the chart: its form extracts no answers.'));
    return;
  }
  const post = h('button', {type: 'button', id: 'confirm-extract', disabled: !can('*', 'c')}, 'Add ' + entries.length + ' to the chart');
  post.addEventListener('click', async () => {
    post.disabled = true;
    try {
      const res = (await api.fhir('POST', '', {body: bundle})).body;
      const made = ((res && res.entry) || []).filter((e) => /^20/.test((e.response && e.response.status) || '')).length;
      clear(box, message('ok', h('span', {id: 'extract-done'}, made + ' resource' + (made === 1 ? ' was' : 's were') + ' added to the chart. '),
        pid ? h('a', {id: 'extract-chart', href: '#/chart/' + enc(pid)}, 'Open the chart') : null));
    } catch (e) {
      post.disabled = false;
      box.append(errorBox(e));
    }
  });
  clear(box, h('div', {class: 'card extract', id: 'extract'},
    h('h2', null, 'This assessment adds to the chart'),
    h('ul', {class: 'items', id: 'extract-list'}, entries.map((e) => h('li', null, describe(e.resource || {})))),
    issues.length ? message('info', h('strong', null, 'Not extracted:'), h('ul', null, issues.map((i) => h('li', null, i.diagnostics || i.code)))) : null,
    h('div', {class: 'actions'}, post, h('button', {type: 'button', class: 'secondary', onclick: () => clear(box)}, 'Cancel'))));
}

// describe is a resource to be created, in a few words.
function describe(r) {
  if (r.resourceType === 'Observation') {
    // A panel (blood pressure) reads as its components' values.
    const v = data.valueText(r) || (r.component || []).map((c) => data.valueText(c)).filter(Boolean).join(' / ');
    return [h('strong', null, data.conceptText(r.code) || 'Observation'), v ? ': ' + v : '', h('span', {class: 'muted'}, ' · Observation' + (r.effectiveDateTime ? ', ' + fmtDate(r.effectiveDateTime) : ''))];
  }
  if (r.resourceType === 'RelatedPerson') {
    return [h('strong', null, patientName(r) || 'Related person'), r.relationship ? ': ' + r.relationship.map(data.conceptText).join(', ') : '', h('span', {class: 'muted'}, ' · RelatedPerson')];
  }
  return [h('strong', null, r.resourceType || 'Resource'), r.id ? ' ' + r.id : ''];
}
