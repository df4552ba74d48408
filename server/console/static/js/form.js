// A Questionnaire being filled: its items as a tree of nodes that the
// renderer draws and the QuestionnaireResponse is read from. enableWhen is
// evaluated here, as the server's validator does; FHIRPath expressions
// (calculatedExpression, enableWhenExpression) are the server's to
// evaluate (see assessment.js).

export const EXT = {
  itemControl: 'http://hl7.org/fhir/StructureDefinition/questionnaire-itemControl',
  unit: 'http://hl7.org/fhir/StructureDefinition/questionnaire-unit',
  unitOption: 'http://hl7.org/fhir/StructureDefinition/questionnaire-unitOption',
  minValue: 'http://hl7.org/fhir/StructureDefinition/minValue',
  maxValue: 'http://hl7.org/fhir/StructureDefinition/maxValue',
  maxDecimalPlaces: 'http://hl7.org/fhir/StructureDefinition/maxDecimalPlaces',
  minLength: 'http://hl7.org/fhir/StructureDefinition/minLength',
  regex: 'http://hl7.org/fhir/StructureDefinition/regex',
  entryFormat: 'http://hl7.org/fhir/StructureDefinition/entryFormat',
  sliderStep: 'http://hl7.org/fhir/StructureDefinition/questionnaire-sliderStepValue',
  referenceResource: 'http://hl7.org/fhir/StructureDefinition/questionnaire-referenceResource',
  hidden: 'http://hl7.org/fhir/StructureDefinition/questionnaire-hidden',
  calculated: 'http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-calculatedExpression',
  enableWhenExpression: 'http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-enableWhenExpression',
  initialExpression: 'http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-initialExpression',
  launchContext: 'http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-launchContext',
  variable: 'http://hl7.org/fhir/StructureDefinition/variable',
};

// ext is the first extension of el with url, or null.
export function ext(el, url) {
  return ((el && el.extension) || []).find((e) => e.url === url) || null;
}

// extValue is the value[x] of an extension (of any type), or undefined.
export function extValue(el, url) {
  const e = ext(el, url);
  if (!e) return undefined;
  const k = Object.keys(e).find((x) => x.startsWith('value'));
  return k ? e[k] : undefined;
}

// itemControl is the code of an item's questionnaire-itemControl, or ''.
export function itemControl(q) {
  const v = extValue(q, EXT.itemControl);
  return (v && v.coding && v.coding[0] && v.coding[0].code) || '';
}

// VALUE_KEYS are the answer value[x] of each item type.
const VALUE_KEYS = {
  boolean: 'valueBoolean', decimal: 'valueDecimal', integer: 'valueInteger', date: 'valueDate', dateTime: 'valueDateTime',
  time: 'valueTime', string: 'valueString', text: 'valueString', url: 'valueUri', choice: 'valueCoding', 'open-choice': 'valueCoding',
  attachment: 'valueAttachment', reference: 'valueReference', quantity: 'valueQuantity',
};
export const valueKey = (type) => VALUE_KEYS[type] || 'valueString';

// valueOf is the [key, value] of an answer (or an answerOption, or an
// enableWhen's answer[x] with prefix "answer").
export function valueOf(a, prefix = 'value') {
  const k = Object.keys(a || {}).find((x) => x.startsWith(prefix) && x.length > prefix.length);
  return k ? [k.slice(prefix.length), a[k]] : [null, undefined];
}

let uid = 0;

// Node is an item of the form where it stands: a group instance, a
// question with its answers, or a display text. kids are the slots of its
// child items, one per child of the form, each holding its instances.
export class Node {
  constructor(q, parent) {
    this.q = q;
    this.parent = parent;
    this.kids = [];
    this.answers = [];
    this.enabled = true;
    this.exprEnabled = null; // the server's answer to enableWhenExpression
    this.uid = 'q' + (++uid);
  }

  get type() { return this.q ? this.q.type : 'group'; }
  get calculated() { return !!ext(this.q, EXT.calculated); }
  get readOnly() { return !!(this.q && this.q.readOnly) || this.calculated; }
}

// Form is a Questionnaire and the answers given so far.
export class Form {
  // response, when given, holds the answers to start from (a $populate
  // result or a saved response); without one the form's initial values apply.
  constructor(questionnaire, response) {
    this.q = questionnaire;
    this.root = new Node(null, null);
    this.root.kids = slots(this.root, questionnaire.item || [], response ? response.item || [] : null);
    this.hasExpressions = this.nodes().some((n) => ext(n.q, EXT.calculated) || ext(n.q, EXT.enableWhenExpression));
    this.recompute();
  }

  // nodes lists every node, depth first in form order.
  nodes(from = this.root, out = []) {
    for (const s of from.kids) for (const n of s.nodes) { out.push(n); this.nodes(n, out); }
    return out;
  }

  // addInstance adds an instance to a repeating group's slot.
  addInstance(slot) {
    const n = newNode(slot.q, slot.parent, null);
    slot.nodes.push(n);
    this.recompute();
    return n;
  }

  // removeInstance removes an instance of a repeating group or item.
  removeInstance(slot, node) {
    const i = slot.nodes.indexOf(node);
    if (i >= 0) slot.nodes.splice(i, 1);
    this.recompute();
  }

  // recompute sets each node's enabled from its enableWhen, its
  // enableWhenExpression's last answer and its parent; conditions on items
  // later in the form need a second pass.
  recompute() {
    const all = this.nodes();
    for (let pass = 0; pass < 4; pass++) {
      let changed = false;
      for (const n of all) {
        const on = (n.parent === this.root || n.parent.enabled) && n.exprEnabled !== false && enableWhen(n);
        if (on !== n.enabled) { n.enabled = on; changed = true; }
      }
      if (!changed) return;
    }
  }

  // response builds the QuestionnaireResponse items of what is enabled
  // and answered; paths maps each item's FHIRPath location
  // (QuestionnaireResponse.item[1].item[3]) to its node.
  response() {
    const paths = new Map();
    const item = responseItems(this.root, 'QuestionnaireResponse', paths);
    return {item, paths};
  }

  // evaluationTree is the response the server evaluates expressions over:
  // every node, display items and unanswered ones too, the answers of
  // disabled ones left out; paths maps item[0].item[2] to nodes.
  evaluationTree() {
    const paths = new Map();
    const walk = (node, at) => {
      const out = [];
      for (const s of node.kids) {
        for (const n of s.nodes) {
          const p = at + 'item[' + out.length + ']';
          paths.set(p, n);
          const it = {linkId: n.q.linkId};
          if (n.enabled && n.answers.length) it.answer = n.answers.map(clean).filter(Boolean);
          const kids = walk(n, p + '.');
          if (kids.length) it.item = kids;
          out.push(it);
        }
      }
      return out;
    };
    return {item: walk(this.root, ''), paths};
  }
}

// slots builds the slots of a node's child items from the response items
// given (null for a new form: initial values apply).
function slots(parent, qitems, ritems) {
  return qitems.map((q) => {
    const slot = {q, parent, nodes: []};
    const mine = ritems ? ritems.filter((r) => r.linkId === q.linkId) : [];
    if (q.type === 'group' && q.repeats && mine.length > 1) {
      for (const r of mine) slot.nodes.push(newNode(q, parent, [r]));
    } else {
      slot.nodes.push(newNode(q, parent, ritems ? mine : null));
    }
    return slot;
  });
}

// newNode is a node of form item q built from its response items (null:
// the form's initial values).
function newNode(q, parent, ritems) {
  const n = new Node(q, parent);
  if (q.type === 'group') {
    const items = ritems ? ritems.flatMap((r) => r.item || []) : null;
    n.kids = slots(n, q.item || [], items);
    return n;
  }
  if (q.type === 'display') {
    n.kids = slots(n, q.item || [], null);
    return n;
  }
  if (ritems) {
    n.answers = ritems.flatMap((r) => r.answer || []).map((a) => { const c = {...a}; delete c.item; return c; });
  } else {
    n.answers = (q.initial || []).map((i) => { const [t, v] = valueOf(i); return t ? {['value' + t]: v} : null; }).filter(Boolean);
    if (!n.answers.length) {
      n.answers = (q.answerOption || []).filter((o) => o.initialSelected).map((o) => { const [t, v] = valueOf(o); return {['value' + t]: v}; });
    }
  }
  const nested = ritems ? ritems.flatMap((r) => (r.answer || []).flatMap((a) => a.item || [])) : null;
  n.kids = slots(n, q.item || [], nested);
  return n;
}

// clean is an answer as it is sent, or null when it holds no value.
function clean(a) {
  const [t, v] = valueOf(a);
  if (!t || v === undefined || v === null || v === '') return null;
  return {['value' + t]: v};
}

// responseItems are the response items under node (at path).
function responseItems(node, at, paths) {
  const out = [];
  for (const s of node.kids) {
    for (const n of s.nodes) {
      if (!n.enabled || n.type === 'display') continue;
      const p = at + '.item[' + out.length + ']';
      const it = {linkId: n.q.linkId};
      if (n.q.text) it.text = n.q.text;
      if (n.type === 'group') {
        const kids = responseItems(n, p, paths);
        if (!kids.length) continue;
        it.item = kids;
      } else {
        const answers = n.answers.map(clean).filter(Boolean);
        if (!answers.length) continue;
        it.answer = answers;
        const kids = responseItems(n, p + '.answer[0]', paths);
        if (kids.length) it.answer[0].item = kids;
      }
      paths.set(p, n);
      out.push(it);
    }
  }
  return out;
}

// enableWhen evaluates a node's enableWhen conditions.
function enableWhen(n) {
  const conds = (n.q && n.q.enableWhen) || [];
  if (!conds.length) return true;
  const any = n.q.enableBehavior === 'any';
  for (const c of conds) {
    const ok = condition(c, n);
    if (any && ok) return true;
    if (!any && !ok) return false;
  }
  return !any;
}

// condition evaluates one enableWhen against the answers of its question,
// found in the nearest enclosing group that has it.
function condition(c, n) {
  const [typ, want] = valueOf(c, 'answer');
  if (!typ) return false;
  const target = find(n, c.question);
  const answers = target && target.enabled ? target.answers.map(clean).filter(Boolean) : [];
  if (c.operator === 'exists') return (answers.length > 0) === (want === true);
  for (const a of answers) {
    const [at, got] = valueOf(a);
    if (c.operator === '!=') {
      if (!(at === typ && same(typ, got, want))) return true;
      continue;
    }
    if (c.operator === '=') {
      if (same(typ, got, want) && (at === typ || (NUMERIC.has(at) && NUMERIC.has(typ)))) return true;
      continue;
    }
    const d = compare(got, want);
    if (d === null) continue;
    if ((c.operator === '>' && d > 0) || (c.operator === '<' && d < 0) || (c.operator === '>=' && d >= 0) || (c.operator === '<=' && d <= 0)) return true;
  }
  return false;
}

const NUMERIC = new Set(['Integer', 'Decimal']);

// same compares two values of an answer type.
function same(typ, a, b) {
  if (typ === 'Coding') return !!a && !!b && a.code === b.code && (!a.system || !b.system || a.system === b.system);
  if (typ === 'Quantity') return !!a && !!b && Number(a.value) === Number(b.value) && (a.code || a.unit) === (b.code || b.unit);
  if (typ === 'Reference') return !!a && !!b && a.reference === b.reference;
  if (typeof a === 'number' || typeof b === 'number') return Number(a) === Number(b);
  return a === b;
}

// compare orders two values (numbers, quantities, dates and strings);
// null when they do not compare.
function compare(a, b) {
  if (a && typeof a === 'object' && 'value' in a) a = a.value;
  if (b && typeof b === 'object' && 'value' in b) b = b.value;
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  if (typeof a === 'string' && typeof b === 'string') return a < b ? -1 : a > b ? 1 : 0;
  return null;
}

// find is the node of linkId nearest to n: in the closest enclosing node
// that has it, else anywhere.
function find(n, linkId) {
  for (let p = n.parent; p; p = p.parent) {
    const hit = descendant(p, linkId, n);
    if (hit) return hit;
  }
  return null;
}

function descendant(node, linkId, skip) {
  for (const s of node.kids) {
    for (const k of s.nodes) {
      if (k === skip) continue;
      if (k.q.linkId === linkId) return k;
      const hit = descendant(k, linkId, skip);
      if (hit) return hit;
    }
  }
  return null;
}

// checkAnswer is what is wrong with an answer as typed, in words, or ''.
// The server checks again on save; this is to help while typing.
export function checkAnswer(q, a) {
  const [t, v] = valueOf(a);
  if (!t || v === undefined || v === '') return '';
  if (t === 'Decimal' || t === 'Integer' || t === 'Quantity') {
    const x = t === 'Quantity' ? v.value : v;
    if (typeof x !== 'number' || isNaN(x)) return 'Enter a number.';
    const min = extValue(q, EXT.minValue), max = extValue(q, EXT.maxValue);
    const lo = typeof min === 'object' && min ? min.value : min;
    const hi = typeof max === 'object' && max ? max.value : max;
    if (typeof lo === 'number' && x < lo) return 'The lowest value allowed is ' + lo + '.';
    if (typeof hi === 'number' && x > hi) return 'The highest value allowed is ' + hi + '.';
    const places = extValue(q, EXT.maxDecimalPlaces);
    if (typeof places === 'number' && (String(x).split('.')[1] || '').length > places) return 'At most ' + places + ' decimal place' + (places === 1 ? '' : 's') + '.';
  }
  if (typeof v === 'string' && (t === 'String' || t === 'Uri')) {
    if (q.maxLength && v.length > q.maxLength) return 'At most ' + q.maxLength + ' characters.';
    const re = extValue(q, EXT.regex);
    if (typeof re === 'string') {
      try {
        if (!new RegExp('^(?:' + re + ')$', 'u').test(v)) return 'This does not have the expected form' + (extValue(q, EXT.entryFormat) ? ' (' + extValue(q, EXT.entryFormat) + ')' : '') + '.';
      } catch (e) { /* a pattern JavaScript does not read: the server checks it */ }
    }
  }
  return '';
}

// answerText is an answer in words.
export function answerText(a) {
  const [t, v] = valueOf(a);
  if (v === undefined || v === null) return '';
  switch (t) {
    case 'Boolean': return v ? 'Yes' : 'No';
    case 'Coding': return v.display || v.code || '';
    case 'Quantity': return (v.value !== undefined ? v.value : '') + (v.unit || v.code ? ' ' + (v.unit || v.code) : '');
    case 'Reference': return v.display || v.reference || '';
    case 'Attachment': return (v.title || 'attachment') + (v.contentType ? ' (' + v.contentType + ')' : '');
    default: return String(v);
  }
}

// optionText is an answerOption or a value set's coding in words.
export function optionText(o) {
  return answerText(o.valueCoding || o.system || o.code ? {valueCoding: o.valueCoding || o} : o);
}
