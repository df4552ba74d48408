// Result columns per resource type; every value is plain text (or a
// console link built here), never markup from the resource.
import {h} from './dom.js';
import {refRoute, chartRoute} from './json.js';

function humanName(n) {
  if (!n) return '';
  if (n.text) return n.text;
  return [(n.given || []).join(' '), n.family || ''].filter(Boolean).join(' ');
}
const name = (r) => humanName((r.name || []).find((n) => n.use === 'official') || (r.name || [])[0]);
const plainName = (r) => typeof r.name === 'string' ? r.name : name(r);

function concept(c) {
  if (!c) return '';
  if (Array.isArray(c)) return c.map(concept).filter(Boolean).join(', ');
  if (c.text) return c.text;
  const cd = (c.coding || [])[0];
  return cd ? (cd.display || cd.code || '') : '';
}

function quantity(q) {
  if (!q || q.value === undefined) return '';
  return String(q.value) + (q.unit || q.code ? ' ' + (q.unit || q.code) : '');
}

function period(p) {
  if (!p) return '';
  return [p.start, p.end].filter(Boolean).join(' – ');
}

// value[x] of an Observation or a component.
function valueX(r) {
  if (r.valueQuantity) return quantity(r.valueQuantity);
  if (r.valueCodeableConcept) return concept(r.valueCodeableConcept);
  for (const k of ['valueString', 'valueBoolean', 'valueInteger', 'valueDateTime', 'valueTime']) {
    if (r[k] !== undefined) return String(r[k]);
  }
  if (r.component) return r.component.map((c) => concept(c.code) + ' ' + valueX(c)).join('; ');
  return '';
}

const effective = (r) => r.effectiveDateTime || r.effectiveInstant || period(r.effectivePeriod) || r.issued || '';

// ref renders a Reference as a link to its target when it is on this server.
function ref(x) {
  if (!x) return '';
  const route = refRoute(x.reference);
  const text = x.display || x.reference || (x.identifier && x.identifier.value) || '';
  if (!route) return text;
  const chart = chartRoute(x.reference);
  return chart ? h('span', null, h('a', {href: route}, text), h('a', {class: 'chart-link', href: chart}, 'chart')) : h('a', {href: route}, text);
}

const col = (title, value) => ({title, value});
const status = col('Status', (r) => r.status || '');

const TABLE = {
  Patient: [col('Name', name), col('Birth date', (r) => r.birthDate || ''), col('Gender', (r) => r.gender || '')],
  Practitioner: [col('Name', name), col('Gender', (r) => r.gender || ''), col('Active', (r) => r.active === undefined ? '' : String(r.active))],
  RelatedPerson: [col('Name', name), col('Relationship', (r) => concept(r.relationship)), col('Patient', (r) => ref(r.patient))],
  Organization: [col('Name', plainName), col('Type', (r) => concept(r.type)), col('Active', (r) => r.active === undefined ? '' : String(r.active))],
  Location: [col('Name', plainName), status, col('Address', (r) => r.address ? (r.address.text || [r.address.city, r.address.state].filter(Boolean).join(', ')) : '')],
  Observation: [col('Code', (r) => concept(r.code)), col('Value', valueX), col('Date', effective), col('Subject', (r) => ref(r.subject))],
  Condition: [col('Code', (r) => concept(r.code)), col('Clinical status', (r) => concept(r.clinicalStatus)), col('Onset', (r) => r.onsetDateTime || period(r.onsetPeriod) || ''), col('Subject', (r) => ref(r.subject))],
  Encounter: [status, col('Class', (r) => r.class ? (r.class.display || r.class.code || '') : ''), col('Period', (r) => period(r.period)), col('Subject', (r) => ref(r.subject))],
  Procedure: [col('Code', (r) => concept(r.code)), status, col('Performed', (r) => r.performedDateTime || period(r.performedPeriod) || ''), col('Subject', (r) => ref(r.subject))],
  MedicationRequest: [col('Medication', (r) => concept(r.medicationCodeableConcept) || ref(r.medicationReference)), status, col('Authored', (r) => r.authoredOn || ''), col('Subject', (r) => ref(r.subject))],
  AllergyIntolerance: [col('Code', (r) => concept(r.code)), col('Criticality', (r) => r.criticality || ''), col('Patient', (r) => ref(r.patient))],
  Immunization: [col('Vaccine', (r) => concept(r.vaccineCode)), status, col('Date', (r) => r.occurrenceDateTime || ''), col('Patient', (r) => ref(r.patient))],
  DiagnosticReport: [col('Code', (r) => concept(r.code)), status, col('Date', effective), col('Subject', (r) => ref(r.subject))],
  CarePlan: [col('Title', (r) => r.title || concept(r.category)), status, col('Period', (r) => period(r.period)), col('Subject', (r) => ref(r.subject))],
};

// summary is the fallback: the first human-meaningful fields of a resource.
function summary(r) {
  const parts = [];
  if (r.name) parts.push(plainName(r));
  if (r.title) parts.push(r.title);
  if (r.code) parts.push(concept(r.code));
  if (r.type && !Array.isArray(r.type) && typeof r.type === 'object') parts.push(concept(r.type));
  if (r.description && typeof r.description === 'string') parts.push(r.description.slice(0, 80));
  if (r.subject) parts.push('→ ' + (r.subject.display || r.subject.reference || ''));
  if (r.patient && r.patient.reference) parts.push('→ ' + (r.patient.display || r.patient.reference));
  return parts.filter(Boolean).join(' · ');
}

// columnsFor returns the columns of a type's results.
export function columnsFor(type) {
  return TABLE[type] || [status, col('Summary', summary)];
}
