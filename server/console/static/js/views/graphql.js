// GraphQL: write a query (and its variables), run it with $graphql, see
// the answer as JSON with references as links. Offered when the
// CapabilityStatement lists the graphql operation.
import {h, message} from '../dom.js';
import * as api from '../api.js';
import {render} from '../json.js';

// examples are queries to start from; PATIENT stands for a patient's id.
const examples = [
  {name: 'Patients and their active conditions', query: `{
  PatientList(_count: 5) {
    id
    name { given family }
    birthDate
    ConditionList(_reference: patient, clinical_status: "active") {
      code { text coding { code display } }
      onsetDateTime
    }
  }
}`},
  {name: 'One patient\'s latest vital signs', query: `query vitals($id: String) {
  ObservationList(subject: $id, category: "vital-signs", _sort: "-date", _count: 10) {
    code { text }
    effectiveDateTime
    valueQuantity { value unit }
  }
}`, variables: '{"id": "Patient/PATIENT"}'},
  {name: 'Encounters, page by page', query: `{
  EncounterConnection(_count: 5) {
    count offset pagesize next
    edges { mode resource { id status period { start end } } }
  }
}`},
];

export async function graphqlView() {
  const title = h('h1', null, 'GraphQL');
  const ops = await api.metadata().then((cs) => (cs.rest && cs.rest[0] && cs.rest[0].operation) || []).catch(() => []);
  if (!ops.some((o) => o.name === 'graphql')) {
    return h('section', null, title, message('info', 'This server does not offer $graphql.'));
  }
  const pick = h('select', {id: 'graphql-example'}, examples.map((ex, i) => h('option', {value: String(i)}, ex.name)));
  const query = h('textarea', {id: 'graphql-query', rows: '14', spellcheck: 'false'});
  const vars = h('textarea', {id: 'graphql-variables', rows: '3', spellcheck: 'false', placeholder: '{"id": "Patient/123"}'});
  const use = (i) => { query.value = examples[i].query; vars.value = examples[i].variables || ''; };
  use(0);
  pick.addEventListener('change', () => use(Number(pick.value)));
  const out = h('div', {id: 'graphql-out', 'aria-live': 'polite'});
  const form = h('form', {class: 'card', id: 'graphql-form'},
    h('label', {for: 'graphql-example'}, 'Start from'), pick,
    h('label', {for: 'graphql-query'}, 'Query'), query,
    h('label', {for: 'graphql-variables'}, 'Variables (JSON)'), vars,
    h('div', {class: 'actions'}, h('button', {type: 'submit', id: 'graphql-run'}, 'Run')));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    out.replaceChildren(run(query.value, vars.value));
  });
  return h('section', {class: 'graphql', dataset: {title: 'GraphQL'}}, title,
    h('p', {class: 'muted'}, 'Queries read with your token\'s rights, as REST does. Searches take the REST parameters (dashes as underscores).'),
    form, out);
}

// run posts the query and renders the answer: data, or errors with
// their line and column.
function run(query, variables) {
  const box = h('div', null, h('p', null, 'Running…'));
  let v;
  try {
    v = variables.trim() ? JSON.parse(variables) : undefined;
  } catch (e) {
    box.replaceChildren(message('error', 'The variables are not JSON: ' + e.message));
    return box;
  }
  api.fhir('POST', '/$graphql', {body: {query, variables: v}, headers: {'Content-Type': 'application/json', Accept: 'application/json'}})
    .then((res) => box.replaceChildren(render(res.body, 'data')))
    .catch((e) => {
      const errs = (e.body && e.body.errors) || [];
      if (!errs.length) {
        box.replaceChildren(message('error', e.message));
        return;
      }
      box.replaceChildren(h('ul', {class: 'graphql-errors'}, errs.map((er) => h('li', {class: 'msg error'},
        (er.locations && er.locations[0] ? 'line ' + er.locations[0].line + ', column ' + er.locations[0].column + ': ' : '') + er.message))));
    });
  return box;
}
