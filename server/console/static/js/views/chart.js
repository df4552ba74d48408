// Chart: a clinician's one-page view of a patient. The header, the lists
// (problems, medications, allergies, immunizations, care plans and goals,
// encounters), vital-sign trends, the latest laboratory results and a
// timeline, all from one batch request made with the signed-in token, so
// the token's scopes decide what shows; a part it may not read is left
// out with a note.
import {h, enc, message} from '../dom.js';
import * as api from '../api.js';
import * as data from '../chartdata.js';
import {fmtDay, fmtWhen, fmtTime} from '../svg.js';
import {vitalsSection, labsSection, timelineSection} from './chartviz.js';
import {can} from '../app.js';

// SEARCHES are the searches of a chart, sent in one batch Bundle after
// the read of the Patient. Vital signs and laboratory results come from
// $lastn: every vital sign (up to 1,000 of each code) and the 50 latest
// results of each laboratory code.
const SEARCHES = [
  {key: 'conditions', type: 'Condition', query: (id) => 'Condition?patient=' + id + '&_count=100'},
  {key: 'medications', type: 'MedicationRequest', query: (id) => 'MedicationRequest?patient=' + id + '&status=active&_count=100'},
  {key: 'allergies', type: 'AllergyIntolerance', query: (id) => 'AllergyIntolerance?patient=' + id + '&_count=100'},
  {key: 'immunizations', type: 'Immunization', query: (id) => 'Immunization?patient=' + id + '&_count=100'},
  {key: 'careplans', type: 'CarePlan', query: (id) => 'CarePlan?patient=' + id + '&_count=100'},
  {key: 'goals', type: 'Goal', query: (id) => 'Goal?patient=' + id + '&_count=100'},
  {key: 'encounters', type: 'Encounter', query: (id) => 'Encounter?patient=' + id + '&_count=100&_sort=-date'},
  {key: 'procedures', type: 'Procedure', query: (id) => 'Procedure?patient=' + id + '&_count=100'},
  {key: 'vitals', type: 'Observation', query: (id) => 'Observation/$lastn?patient=' + id + '&category=vital-signs&max=1000'},
  {key: 'labs', type: 'Observation', query: (id) => 'Observation/$lastn?patient=' + id + '&category=laboratory&max=50'},
  {key: 'assessments', type: 'QuestionnaireResponse', query: (id) => 'QuestionnaireResponse?subject=Patient/' + id + '&status=in-progress&_count=20&_elements=status,authored,questionnaire'},
];

// QUIET are the searches a chart can do without: a token that may not run
// them gets no note about it.
const QUIET = new Set(['assessments']);

// MAX_PAGES bounds the pages of 100 read of one search.
const MAX_PAGES = 10;

// LABELS name each search in notes.
const LABELS = {
  conditions: 'Problems', medications: 'Medications', allergies: 'Allergies', immunizations: 'Immunizations',
  careplans: 'Care plans', goals: 'Goals', encounters: 'Encounters', procedures: 'Procedures', vitals: 'Vital signs', labs: 'Laboratory results',
  assessments: 'Assessments in progress',
};

export async function chartView(ctx) {
  const id = ctx.parts[0];
  if (!id) return h('section', null, h('h1', null, 'Chart'), message('info', 'Open a patient first, then its chart.'));
  const started = performance.now();
  const loaded = await load(id);
  if (loaded.refused) return refused(id, loaded.refused);
  const drawn = performance.now();
  const section = render(loaded);
  section.dataset.requests = loaded.requests;
  section.dataset.loadMs = Math.round(drawn - started);
  section.dataset.renderMs = Math.round(performance.now() - drawn);
  section.dataset.state = 'ready';
  return section;
}

// status reads the code of a batch entry's response ("200 OK").
const status = (e) => parseInt(((e && e.response && e.response.status) || '0'), 10);

// reason is a failed entry's outcome in words.
function reason(e) {
  const oo = e && e.response && e.response.outcome;
  const text = oo && Array.isArray(oo.issue) ? oo.issue.map((i) => i.diagnostics || i.code).filter(Boolean).join('; ') : '';
  return 'the server answered ' + ((e && e.response && e.response.status) || 'nothing') + (text ? ': ' + text : '');
}

// batch sends GET entries in one batch Bundle and returns the response entries.
async function batch(urls) {
  const body = {resourceType: 'Bundle', type: 'batch', entry: urls.map((url) => ({request: {method: 'GET', url}}))};
  const b = (await api.fhir('POST', '', {body})).body;
  return (b && b.entry) || [];
}

// load reads the patient and every search of the chart: one batch, then
// the next pages of any search with more than 100 matches, then, when
// resources refer to encounters the search did not return, one batch that
// asks for those (deleted? not readable?).
async function load(id) {
  const q = enc(id);
  let requests = 1;
  const entries = await batch(['Patient/' + q, ...SEARCHES.map((x) => x.query(q))]);
  const pe = entries[0];
  if (status(pe) !== 200 || !pe.resource) return {refused: {status: status(pe), text: reason(pe)}};
  const sections = {};
  await Promise.all(SEARCHES.map(async (x, i) => {
    const e = entries[i + 1];
    if (status(e) !== 200 || !e.resource) {
      sections[x.key] = {resources: [], error: reason(e), type: x.type};
      return;
    }
    const out = {resources: [], type: x.type};
    let b = e.resource;
    for (let page = 1; ; page++) {
      for (const be of b.entry || []) {
        if (be.resource && be.resource.resourceType === x.type && (!be.search || be.search.mode !== 'include')) out.resources.push(be.resource);
      }
      const next = (b.link || []).find((l) => l.relation === 'next');
      if (!next) break;
      if (page >= MAX_PAGES) { out.truncated = true; break; }
      requests++;
      try {
        b = await api.follow(next.url);
      } catch (e) { // what was read is shown; the rest is noted
        out.truncated = true;
        out.cut = e.message;
        break;
      }
    }
    sections[x.key] = out;
  }));
  const missing = missingEncounters(sections);
  const gone = [];
  if (missing.size) {
    requests++;
    const ids = [...missing.keys()].slice(0, 50);
    let answers = [];
    try {
      answers = await batch(ids.map((eid) => 'Encounter/' + enc(eid)));
    } catch (e) { /* each is reported below as not answered */ }
    ids.forEach((eid, i) => {
      const code = status(answers[i]);
      if (code === 200) return; // it exists: beyond the pages read
      gone.push({id: eid, refs: missing.get(eid), why: code === 410 ? 'deleted' : code === 404 ? 'not found' : code === 403 ? 'not readable with this token' : reason(answers[i])});
    });
  }
  return {patient: pe.resource, sections, gone, requests};
}

// encounterId is the id of an Encounter reference, or ''.
function encounterId(ref) {
  const m = /(?:^|\/)Encounter\/([A-Za-z0-9\-.]{1,64})$/.exec((ref && ref.reference) || '');
  return m ? m[1] : '';
}

// missingEncounters counts, per encounter id, the resources of the chart
// that refer to an encounter the encounter search did not return.
function missingEncounters(sections) {
  const out = new Map();
  if (sections.encounters.error || sections.encounters.truncated) return out;
  const have = new Set(sections.encounters.resources.map((r) => r.id));
  for (const [key, sec] of Object.entries(sections)) {
    if (key === 'encounters') continue;
    for (const r of sec.resources) {
      const eid = encounterId(r.encounter || (r.context && !Array.isArray(r.context) ? r.context : null));
      if (eid && !have.has(eid)) out.set(eid, (out.get(eid) || 0) + 1);
    }
  }
  return out;
}

// refused is the page of a patient the token may not read, or that is not there.
function refused(id, why) {
  const text = why.status === 410 ? 'Patient/' + id + ' was deleted.'
    : why.status === 404 ? 'There is no Patient/' + id + '.'
      : 'This token cannot open the chart of Patient/' + id + ': ' + why.text + '.';
  return h('section', {class: 'chart', id: 'chart', dataset: {title: 'Chart', state: 'refused'}},
    h('h1', null, 'Chart'), message('error', h('span', {id: 'chart-refused'}, text)),
    why.status === 410 ? h('p', null, h('a', {href: '#/r/Patient/' + enc(id)}, 'See its history')) : null);
}

// render builds the page from what load read.
function render(d) {
  const p = d.patient;
  const sec = d.sections;
  const notes = [];
  for (const [key, s] of Object.entries(sec)) {
    if (QUIET.has(key)) continue;
    if (s.error) notes.push(h('li', {class: 'refused', dataset: {section: key}}, LABELS[key] + ' (' + s.type + ') are not shown: ' + s.error + '.'));
    else if (s.truncated) notes.push(h('li', null, LABELS[key] + ': only the first ' + s.resources.length.toLocaleString() + ' are shown' + (s.cut ? ' (the next page failed: ' + s.cut + ')' : '') + '.'));
  }
  for (const g of d.gone) {
    notes.push(h('li', {class: 'gone', dataset: {id: g.id}}, h('a', {href: '#/r/Encounter/' + enc(g.id)}, 'Encounter/' + g.id),
      ' is ' + g.why + '; ' + g.refs + ' resource' + (g.refs === 1 ? '' : 's') + ' of this chart refer' + (g.refs === 1 ? 's' : '') + ' to it.'));
  }
  const vitals = data.vitalSigns(sec.vitals.resources);
  const lab = data.labs(sec.labs.resources);
  const tl = data.timeline({encounters: sec.encounters.resources, conditions: sec.conditions.resources,
    procedures: sec.procedures.resources, immunizations: sec.immunizations.resources});
  const leftOut = [...vitals.leftOut, ...lab.leftOut, ...tl.leftOut];
  const name = patientName(p) || 'Patient/' + p.id;
  return h('section', {class: 'chart', id: 'chart', dataset: {title: 'Chart: ' + name, patient: p.id}},
    header(p, name, sec.assessments),
    notesBox(notes, leftOut, vitals),
    h('div', {class: 'chart-body'},
      h('div', {class: 'chart-lists'},
          listCard('problems', 'Active problems', sec.conditions, problems(sec.conditions.resources)),
        listCard('medications', 'Active medications', sec.medications, medications(sec.medications.resources)),
        listCard('allergies', 'Allergies', sec.allergies, allergies(sec.allergies.resources)),
        listCard('immunizations', 'Immunizations', sec.immunizations, immunizations(sec.immunizations.resources), 6, 4),
        listCard('careplans', 'Care plans and goals', sec.careplans, carePlans(sec.careplans.resources, sec.goals), 6, 4),
        listCard('encounters', 'Recent encounters', sec.encounters, encounters(sec.encounters.resources), 5, 3)),
      h('div', {class: 'chart-main'}, vitalsSection(vitals, sec.vitals.error), labsSection(lab, sec.labs.error))),
    timelineSection(tl, sec));
}

// humanName is a HumanName in words.
function humanName(n) {
  if (!n) return '';
  if (n.text) return n.text;
  return [(n.prefix || []).join(' '), (n.given || []).join(' '), n.family || '', (n.suffix || []).join(' ')].filter(Boolean).join(' ');
}

export function patientName(p) {
  const names = p.name || [];
  return humanName(names.find((n) => n.use === 'official') || names.find((n) => n.use !== 'old') || names[0]);
}

// age is the whole years from a birth date to another date.
function age(birth, at) {
  const b = new Date(data.parseTime(birth));
  if (isNaN(b)) return null;
  let years = at.getUTCFullYear() - b.getUTCFullYear();
  if (at.getUTCMonth() < b.getUTCMonth() || (at.getUTCMonth() === b.getUTCMonth() && at.getUTCDate() < b.getUTCDate())) years--;
  return years;
}

// ref is a Reference as a link when it names a resource on this server.
function ref(r, fallback) {
  if (!r) return fallback || '';
  const m = /(?:^|\/)([A-Z][A-Za-z]+)\/([A-Za-z0-9\-.]{1,64})$/.exec(r.reference || '');
  const text = r.display || r.reference || (r.identifier && r.identifier.value) || fallback || '';
  return m ? h('a', {href: '#/r/' + enc(m[1]) + '/' + enc(m[2])}, text) : text;
}

// day is a FHIR date or dateTime as a day to read (the raw value when it is not one).
function day(s) {
  const t = data.parseTime(s);
  return isNaN(t) ? (s || '') : (/^\d{4}$/.test(s) ? s : fmtDay(t));
}

function header(p, name, assessments) {
  const dead = p.deceasedDateTime ? new Date(data.parseTime(p.deceasedDateTime)) : null;
  const years = p.birthDate ? age(p.birthDate, dead && !isNaN(dead) ? dead : new Date()) : null;
  const born = p.birthDate ? day(p.birthDate) + (years !== null ? ' (' + (dead ? 'died aged ' : 'age ') + years + ')' : '') : 'unknown';
  const fact = (label, id, ...value) => [h('dt', {id: id + '-label'}, label), h('dd', {id}, ...value)];
  const ids = (p.identifier || []).filter((i) => i && i.value).map((i) =>
    h('li', null, h('span', {class: 'muted'}, (i.type && data.conceptText(i.type)) || i.system || 'Identifier', ': '), i.value));
  const phones = (p.telecom || []).filter((t) => t && t.system === 'phone' && t.value).map((t) => t.value + (t.use ? ' (' + t.use + ')' : ''));
  const addresses = (p.address || []).map((a) => a.text || [...(a.line || []), [a.postalCode, a.city].filter(Boolean).join(' '), a.state, a.country].filter(Boolean).join(', '));
  const gps = (p.generalPractitioner || []).map((g) => ref(g));
  return h('header', {class: 'card chart-head', id: 'chart-header'},
    h('div', {class: 'chart-title'},
      h('h1', null, h('span', {id: 'chart-name'}, name), ' ', p.gender ? h('span', {class: 'badge', id: 'chart-gender'}, p.gender) : null,
        dead ? h('span', {class: 'badge deceased'}, 'deceased ' + day(p.deceasedDateTime)) : null),
      h('div', {class: 'actions no-print'},
        can('QuestionnaireResponse', 'c') ? h('a', {class: 'button', id: 'chart-assess', href: '#/assess/' + enc(p.id)}, 'New assessment') : null,
        h('a', {class: 'button secondary', id: 'chart-resource', href: '#/r/Patient/' + enc(p.id)}, 'Patient resource'),
        h('button', {type: 'button', class: 'secondary', id: 'chart-print', onclick: () => window.print()}, 'Print'))),
    inProgress(p, assessments),
    h('dl', {class: 'facts'},
      fact('Born', 'chart-born', born),
      fact('Gender', 'chart-gender-text', p.gender || 'unknown'),
      fact('Phone', 'chart-phone', phones.join(', ') || '—'),
      fact('Address', 'chart-address', addresses.join(' · ') || '—'),
      fact('General practitioner', 'chart-gp', gps.length ? gps.map((g, i) => [i ? ', ' : '', g]) : 'none recorded'),
      fact('Identifiers', 'chart-identifiers', ids.length ? h('ul', {class: 'plain ids'}, ids) : '—')));
}

// inProgress says how many assessments of the patient are still being
// filled, linking to where they are continued.
function inProgress(p, assessments) {
  const n = assessments && !assessments.error ? assessments.resources.length : 0;
  if (!n) return null;
  return h('p', {class: 'chart-in-progress no-print', id: 'chart-in-progress'},
    h('a', {href: '#/assess/' + enc(p.id)}, n + (assessments.truncated ? '+' : '') + ' assessment' + (n === 1 ? '' : 's') + ' in progress'));
}

// NOTE_LIMIT is how many left-out readings are listed one by one.
const NOTE_LIMIT = 25;

// notesBox says what the chart does not show, and why.
function notesBox(notes, leftOut, vitals) {
  const items = notes.slice();
  for (const c of vitals.charts) {
    for (const cv of c.converted) {
      items.push(h('li', {class: 'converted'}, c.title + ': ' + cv.count + ' reading' + (cv.count === 1 ? '' : 's') + ' in ' + cv.from + ' converted to ' + c.unitLabel + ' for the chart.'));
    }
  }
  if (leftOut.length) {
    const list = h('ul', {id: 'chart-left-out'}, leftOut.slice(0, NOTE_LIMIT).map((x) => {
      const [type, id] = x.ref.split('/');
      return h('li', {dataset: {ref: x.ref}}, h('a', {href: '#/r/' + enc(type) + '/' + enc(id)}, x.ref), ' (' + x.what + '): ' + x.why + '.');
    }), leftOut.length > NOTE_LIMIT ? h('li', null, 'and ' + (leftOut.length - NOTE_LIMIT) + ' more.') : null);
    items.push(h('li', null, 'Left out of the charts and the timeline (' + leftOut.length + '):', list));
  }
  if (!items.length) return h('div', {id: 'chart-notes', class: 'chart-notes empty'});
  return h('div', {id: 'chart-notes', class: 'msg info chart-notes', role: 'status'}, h('strong', null, 'Not everything is shown'), h('ul', null, items));
}

// listCard is a section of resources: its items, or why it is empty.
// Problems, medications and allergies are listed in full; the longer
// histories show their newest shown items, and fewer on paper.
function listCard(id, title, section, items, shown = Infinity, printed = Infinity) {
  const body = section.error
    ? h('p', {class: 'muted refused'}, 'Not shown: ' + section.error + '.')
    : items.length ? capped(items, shown, printed) : h('p', {class: 'muted empty'}, 'None recorded.');
  return h('section', {class: 'card chart-list', id},
    h('h2', null, title, section.error ? null : h('span', {class: 'count'}, ' ' + items.length)), body);
}

// capped lists the first n items and the rest behind a toggle; only the
// first printed items go on paper.
function capped(items, n, printed) {
  items.slice(printed).forEach((li) => li.classList.add('print-skip'));
  const list = h('ul', {class: 'items'}, items.slice(0, n),
    items.length > printed ? h('li', {class: 'print-only muted'}, 'and ' + (items.length - printed) + ' more') : null);
  if (items.length <= n) return list;
  return h('div', null, list, h('details', {class: 'more'}, h('summary', null, (items.length - n) + ' more'), h('ul', {class: 'items'}, items.slice(n))));
}

// item is one resource of a list: its name linking to it, then details.
function item(r, text, ...details) {
  return h('li', {dataset: {id: r.id}}, h('a', {href: '#/r/' + enc(r.resourceType) + '/' + enc(r.id)}, text || r.resourceType),
    details.filter(Boolean).length ? h('span', {class: 'muted'}, ' · ', details.filter(Boolean).map((d, i) => [i ? ' · ' : '', d])) : null);
}

const byTimeDesc = (f) => (a, b) => (data.parseTime(f(b)) || 0) - (data.parseTime(f(a)) || 0);

// ACTIVE are the clinical statuses of a problem still going on.
const ACTIVE = new Set(['active', 'recurrence', 'relapse']);

function problems(conditions) {
  const onset = (c) => c.onsetDateTime || (c.onsetPeriod && c.onsetPeriod.start) || c.recordedDate || '';
  return conditions.filter((c) => ((c.clinicalStatus && c.clinicalStatus.coding) || []).some((x) => ACTIVE.has(x.code)))
    .sort(byTimeDesc(onset))
    .map((c) => item(c, data.conceptText(c.code), onset(c) ? 'since ' + day(onset(c)) : (c.onsetString || null)));
}

// dosage is a Dosage in words: its text, or its dose and timing.
function dosage(d) {
  if (!d) return '';
  if (d.text) return d.text;
  const parts = [];
  const dr = (d.doseAndRate || [])[0];
  if (dr && dr.doseQuantity) parts.push(data.fmtNumber(dr.doseQuantity.value) + (dr.doseQuantity.unit ? ' ' + dr.doseQuantity.unit : ''));
  const rep = d.timing && d.timing.repeat;
  if (rep && rep.frequency) parts.push(rep.frequency + '× per ' + (rep.period && rep.period !== 1 ? rep.period + ' ' : '') + (UNITS_OF_TIME[rep.periodUnit] || rep.periodUnit || ''));
  if (d.asNeededBoolean) parts.push('as needed');
  return parts.join(', ');
}

const UNITS_OF_TIME = {s: 'second', min: 'minute', h: 'hour', d: 'day', wk: 'week', mo: 'month', a: 'year'};

function medications(requests) {
  return requests.slice().sort(byTimeDesc((m) => m.authoredOn)).map((m) => item(m,
    data.conceptText(m.medicationCodeableConcept) || (m.medicationReference && m.medicationReference.display) || 'Medication',
    (m.dosageInstruction || []).map(dosage).filter(Boolean).join('; '), m.authoredOn ? 'since ' + day(m.authoredOn) : null));
}

function allergies(list) {
  return list.map((a) => item(a, data.conceptText(a.code) || 'Allergy',
    data.conceptText(a.clinicalStatus), a.criticality ? 'criticality ' + a.criticality : null,
    (a.reaction || []).flatMap((r) => (r.manifestation || []).map(data.conceptText)).filter(Boolean).join(', ') || null));
}

function immunizations(list) {
  return list.slice().sort(byTimeDesc((i) => i.occurrenceDateTime))
    .map((i) => item(i, data.conceptText(i.vaccineCode) || 'Immunization', i.occurrenceDateTime ? day(i.occurrenceDateTime) : i.occurrenceString, i.status !== 'completed' ? i.status : null));
}

// carePlans lists the care plans (active first) and then the goals.
function carePlans(plans, goals) {
  const rank = (s) => (s === 'active' ? 0 : s === 'draft' || s === 'on-hold' ? 1 : 2);
  const ps = plans.slice().sort((a, b) => rank(a.status) - rank(b.status) || (data.parseTime((b.period || {}).start) || 0) - (data.parseTime((a.period || {}).start) || 0))
    .map((c) => item(c, c.title || data.conceptText((c.category || []).slice(-1)) || 'Care plan', c.status, c.period && c.period.start ? 'from ' + day(c.period.start) : null));
  if (goals.error) return [...ps, h('li', {class: 'muted refused'}, 'Goals are not shown: ' + goals.error + '.')];
  const gs = goals.resources.map((g) => item(g, 'Goal: ' + (data.conceptText(g.description) || 'unnamed'), g.lifecycleStatus,
    ((g.target || [])[0] || {}).dueDate ? 'due ' + day(g.target[0].dueDate) : null));
  return [...ps, ...gs];
}

// period is a Period to read: one day, or from–to.
function period(pd) {
  if (!pd) return '';
  const a = data.parseTime(pd.start), b = data.parseTime(pd.end);
  if (isNaN(a)) return isNaN(b) ? '' : 'until ' + fmtWhen(b);
  if (isNaN(b)) return fmtWhen(a) + ' – ongoing';
  if (fmtDay(a) === fmtDay(b)) return fmtWhen(a) + ' – ' + fmtTime(b);
  return fmtWhen(a) + ' – ' + fmtWhen(b);
}

function encounters(list) {
  return list.slice().sort(byTimeDesc((e) => (e.period || {}).start)).map((e) => {
    const who = (e.participant || []).filter((x) => x.individual).map((x) => ref(x.individual));
    const where = (e.location || []).filter((x) => x.location).map((x) => ref(x.location));
    return h('li', {dataset: {id: e.id}},
      h('a', {href: '#/r/Encounter/' + enc(e.id)}, data.conceptText(e.type) || (e.class && (e.class.display || e.class.code)) || 'Encounter'),
      h('div', {class: 'muted'}, period(e.period) || 'no date',
        who.length ? [' · ', who.map((w, i) => [i ? ', ' : '', w])] : null,
        where.length ? [' · ', where.map((w, i) => [i ? ', ' : '', w])] : null));
  });
}
