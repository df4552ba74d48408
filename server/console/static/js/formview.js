// The form renderer: draws a Form (form.js) as HTML form controls, one
// labelled control per answer, and keeps the nodes' answers as the user
// types. Every control has a label bound to it; help texts and messages
// are tied to it with aria-describedby.
import {h, clear, append} from './dom.js';
import {EXT, extValue, itemControl, valueKey, valueOf, checkAnswer, optionText} from './form.js';

// Up to RADIO_MAX options are radio buttons, up to
// SELECT_MAX a drop-down, more a drop-down searched as one types.
const RADIO_MAX = 5;
const SELECT_MAX = 40;

// renderForm draws a form. io gives what the renderer needs from outside:
//   changed(node)             an answer changed (after node.answers is set)
//   expand(url, filter)       the codings of a value set (a Promise)
//   searchReferences(types, text)  [{reference, display}] (a Promise)
export function renderForm(form, io) {
  const el = h('div', {class: 'qform', id: 'qform'}, form.root.kids.map((s) => slotView(s, form, io, 2)));
  showEnabled(form);
  return el;
}

// showEnabled hides the nodes that are not enabled.
export function showEnabled(form) {
  for (const n of form.nodes()) if (n.el) n.el.hidden = !n.enabled;
}

// slotView draws the instances of one item of the form, with add and
// remove buttons when it repeats.
function slotView(slot, form, io, depth) {
  const q = slot.q;
  if (extValue(q, EXT.hidden) === true) return null;
  if (isHelp(q)) return null; // drawn with its parent
  const box = h('div', {class: 'qslot', dataset: {linkId: q.linkId}});
  const draw = slot.draw = () => {
    clear(box, slot.nodes.map((n, i) => nodeView(n, form, io, depth, slot, i)));
    if (q.type === 'group' && q.repeats && !q.readOnly) {
      box.append(h('button', {type: 'button', class: 'secondary add', dataset: {add: q.linkId}, onclick: () => {
        form.addInstance(slot);
        draw();
        io.changed(null);
        const last = slot.nodes[slot.nodes.length - 1];
        const first = last.el && last.el.querySelector('input, select, textarea');
        if (first) first.focus();
      }}, '+ Add ' + (q.text || q.linkId).toLowerCase().replace(/s$/, '')));
    }
    showEnabled(form);
  };
  draw();
  return box;
}

// isHelp tells the display items shown as their parent's help text.
const isHelp = (q) => q.type === 'display' && ['help', 'flyover', 'legal'].includes(itemControl(q));

// labelOf is an item's prefix and text.
function labelOf(q) {
  return [q.prefix ? h('span', {class: 'prefix'}, q.prefix + ' ') : null, q.text || q.linkId];
}

// helpOf is the help text of an item (its help display children).
function helpOf(q, id) {
  const help = (q.item || []).filter(isHelp).map((x) => x.text).filter(Boolean);
  const format = extValue(q, EXT.entryFormat);
  if (!help.length && !format) return null;
  return h('p', {class: 'qhelp', id}, help.join(' '), format ? h('span', {class: 'format'}, (help.length ? ' ' : '') + 'Format: ' + format) : null);
}

function nodeView(n, form, io, depth, slot, index) {
  const q = n.q;
  const req = q.required ? [h('span', {class: 'req', 'aria-hidden': 'true'}, ' *'), h('span', {class: 'sr-only'}, ' (required)')] : null;
  const removable = slot.nodes.length > 1 && (q.repeats || slot.nodes.length > 1) && !q.readOnly;
  const remove = removable ? h('button', {type: 'button', class: 'link remove', 'aria-label': 'Remove ' + (q.text || q.linkId) + ' ' + (index + 1), onclick: () => {
    form.removeInstance(slot, n);
    slot.draw();
    io.changed(null);
  }}, 'Remove') : null;
  if (q.type === 'group') {
    const heading = h('h' + Math.min(depth + 1, 6), {class: 'qgroup-title', id: n.uid + '-title'}, labelOf(q), req,
      slot.nodes.length > 1 ? h('span', {class: 'muted'}, ' ' + (index + 1)) : null);
    n.el = h('section', {class: 'qgroup depth' + depth, id: n.uid, 'aria-labelledby': n.uid + '-title', dataset: {linkId: q.linkId}},
      h('div', {class: 'qgroup-head'}, heading, remove), helpOf(q, n.uid + '-help'),
      n.errorEl = h('p', {class: 'qerror', id: n.uid + '-error', hidden: true}),
      n.kids.map((s) => slotView(s, form, io, depth + 1)));
    return n.el;
  }
  if (q.type === 'display') {
    n.el = h('p', {class: 'qdisplay', id: n.uid, dataset: {linkId: q.linkId}}, labelOf(q));
    return n.el;
  }
  const help = helpOf(q, n.uid + '-help');
  n.errorEl = h('p', {class: 'qerror', id: n.uid + '-error', hidden: true});
  n.hintEl = h('p', {class: 'qhint', id: n.uid + '-hint', hidden: true});
  const body = h('div', {class: 'qcontrols'});
  const describedBy = [help ? n.uid + '-help' : null, n.uid + '-hint', n.uid + '-error'].filter(Boolean).join(' ');
  const label = h('label', {class: 'qlabel', id: n.uid + '-label', for: n.uid + '-0'}, labelOf(q), req,
    n.calculated ? h('span', {class: 'badge calc', title: 'calculated from other answers'}, 'calculated') : null);
  n.draw = () => {
    clear(body, controls(n, io, describedBy));
    // The question labels its one field; a set of options is labelled by
    // it through aria-labelledby (a click on the question picks nothing).
    const first = body.querySelector('#' + n.uid + '-0');
    if (first && first.type !== 'radio' && first.type !== 'checkbox') label.htmlFor = first.id;
    else label.removeAttribute('for');
  };
  n.draw();
  n.el = h('div', {class: 'qitem' + (n.readOnly ? ' readonly' : ''), id: n.uid, dataset: {linkId: q.linkId, type: q.type}},
    label, help, body, n.hintEl, n.errorEl);
  append(n.el, n.kids.map((s) => slotView(s, form, io, depth + 1))); // items nested under the question
  return n.el;
}

// setError shows (or, with '', clears) a server's message at a node.
export function setError(n, msg) {
  if (!n.errorEl) return;
  n.errorEl.textContent = msg;
  n.errorEl.hidden = !msg;
  if (n.el) n.el.classList.toggle('invalid', !!msg);
  for (const c of n.el ? n.el.querySelectorAll('input, select, textarea') : []) {
    if (msg) c.setAttribute('aria-invalid', 'true');
    else c.removeAttribute('aria-invalid');
  }
}

// hint shows what is wrong with an answer as typed (or clears it).
function hint(n) {
  const msg = n.answers.map((a) => checkAnswer(n.q, a)).find(Boolean) || '';
  n.hintEl.textContent = msg;
  n.hintEl.hidden = !msg;
}

// controls are the inputs of a question: one per answer (with add and
// remove when it repeats), or one set of options.
function controls(n, io, describedBy) {
  const q = n.q;
  const type = q.type;
  const set = (i, value) => { // value: the answer's value, or null to clear it
    // An emptied answer stays in its place (the inputs are bound by
    // index); it is left out of the response.
    n.answers[i] = value === null || value === undefined || value === '' ? {} : {[valueKey(type)]: value};
    hint(n);
    io.changed(n);
  };
  const common = (i) => ({id: n.uid + '-' + i, 'aria-describedby': describedBy, 'aria-required': q.required ? 'true' : null, readonly: n.readOnly && !['boolean', 'choice', 'open-choice', 'attachment', 'reference'].includes(type) ? true : null, disabled: n.readOnly && ['boolean', 'choice', 'open-choice', 'attachment', 'reference'].includes(type) ? true : null});
  if (type === 'choice' || type === 'open-choice') return choice(n, io, common(0), describedBy);
  if (type === 'boolean') return booleanControl(n, set, common(0));
  const count = Math.max(1, n.answers.length);
  const out = [];
  for (let i = 0; i < count; i++) {
    const c = single(n, i, set, common(i), io);
    if (q.repeats && !n.readOnly && count > 1) {
      out.push(h('div', {class: 'qrepeat'}, c, h('button', {type: 'button', class: 'link remove', 'aria-label': 'Remove answer ' + (i + 1), onclick: () => { n.answers.splice(i, 1); n.draw(); io.changed(n); }}, 'Remove')));
    } else {
      out.push(c);
    }
  }
  if (q.repeats && !n.readOnly) {
    out.push(h('button', {type: 'button', class: 'secondary add', onclick: () => { n.answers.push({}); n.draw(); io.changed(n); const x = document.getElementById(n.uid + '-' + (n.answers.length - 1)); if (x) x.focus(); }}, '+ Add another'));
  }
  return out;
}

// unitText is the unit shown after a number.
export function unitText(q) {
  const u = extValue(q, EXT.unit);
  // A UCUM code read as people write it (mm[Hg] as mmHg); an annotation
  // ({score}) is no unit to show.
  const text = u ? (u.display || (u.code || '').replace(/\[([^\]]+)\]/g, '$1')) : '';
  return /^\{.*\}$/.test(text) ? '' : text;
}

// bound is a minValue or maxValue as an input attribute.
function bound(q, url) {
  const v = extValue(q, url);
  return typeof v === 'number' || typeof v === 'string' ? v : null;
}

// localDateTime turns a FHIR dateTime into a datetime-local value, and back.
const toLocal = (s) => (s ? String(s).slice(0, 16) : '');
function fromLocal(s) {
  if (!s) return null;
  const off = -new Date(s).getTimezoneOffset();
  const pad = (x) => String(Math.floor(Math.abs(x))).padStart(2, '0');
  return s + ':00' + (off >= 0 ? '+' : '-') + pad(off / 60) + ':' + pad(off % 60);
}

// single is the control of one answer of a question that is not a choice.
function single(n, i, set, attrs, io) {
  const q = n.q;
  const [, v] = valueOf(n.answers[i] || {});
  const ctl = itemControl(q);
  const num = (integer) => {
    const input = h('input', {...attrs, type: ctl === 'slider' ? 'range' : 'number', inputmode: integer ? 'numeric' : 'decimal',
      step: integer ? (extValue(q, EXT.sliderStep) || 1) : 'any', min: bound(q, EXT.minValue), max: bound(q, EXT.maxValue),
      value: v !== undefined && v !== null ? String(v) : '', placeholder: extValue(q, EXT.entryFormat) || null});
    const out = ctl === 'slider' ? h('output', {for: attrs.id, class: 'slider-value'}, v !== undefined ? String(v) : '–') : null;
    input.addEventListener('input', () => {
      const x = input.value === '' ? null : Number(input.value);
      if (out) out.textContent = input.value || '–';
      set(i, x === null || isNaN(x) ? (input.value === '' ? null : input.value) : (integer ? Math.trunc(x) : x));
    });
    return h('span', {class: 'qnumber'}, input, out, unitText(q) ? h('span', {class: 'unit'}, unitText(q)) : null);
  };
  const text = (type, conv = (x) => x, back = (x) => x) => {
    const input = h('input', {...attrs, type, value: v !== undefined && v !== null ? conv(v) : '', maxlength: q.maxLength || null,
      placeholder: extValue(q, EXT.entryFormat) || null, autocomplete: 'off'});
    input.addEventListener('input', () => set(i, input.value === '' ? null : back(input.value)));
    return input;
  };
  switch (q.type) {
    case 'integer': return num(true);
    case 'decimal': return num(false);
    case 'date': return text('date');
    case 'dateTime': return text('datetime-local', toLocal, fromLocal);
    case 'time': return text('time', (x) => String(x).slice(0, 5), (x) => (x.length === 5 ? x + ':00' : x));
    case 'url': return text('url');
    case 'string': return text(/phone/i.test(q.linkId + ' ' + (q.text || '')) ? 'tel' : 'text');
    case 'text': {
      const area = h('textarea', {...attrs, rows: 3, maxlength: q.maxLength || null, placeholder: extValue(q, EXT.entryFormat) || null});
      area.value = v || '';
      area.addEventListener('input', () => set(i, area.value === '' ? null : area.value));
      return area;
    }
    case 'quantity': return quantity(n, i, set, attrs, v);
    case 'attachment': return attachment(n, i, set, attrs, v);
    case 'reference': return reference(n, i, set, attrs, v, io);
  }
  return text('text');
}

// quantity is a number with its unit: a choice of the form's unit options,
// or its one unit.
function quantity(n, i, set, attrs, v) {
  const q = n.q;
  const options = (q.extension || []).filter((e) => e.url === EXT.unitOption).map((e) => e.valueCoding).filter(Boolean);
  const fixed = extValue(q, EXT.unit);
  const units = options.length ? options : fixed ? [fixed] : [];
  const input = h('input', {...attrs, type: 'number', step: 'any', inputmode: 'decimal', value: v && v.value !== undefined ? String(v.value) : ''});
  const sel = units.length > 1 ? h('select', {'aria-label': 'unit of ' + (q.text || q.linkId), id: attrs.id + '-unit'},
    units.map((u, k) => h('option', {value: String(k), selected: v && v.code === u.code}, u.display || u.code))) : null;
  const update = () => {
    if (input.value === '') return set(i, null);
    const u = units[sel ? Number(sel.value) : 0];
    const val = {value: Number(input.value)};
    if (u) Object.assign(val, {unit: u.display || u.code, system: u.system, code: u.code});
    set(i, val);
  };
  input.addEventListener('input', update);
  if (sel) sel.addEventListener('change', update);
  return h('span', {class: 'qnumber'}, input, sel || (units[0] ? h('span', {class: 'unit'}, units[0].display || units[0].code) : null));
}

// attachment is a file chooser; the file is kept as base64 data.
function attachment(n, i, set, attrs, v) {
  const input = h('input', {...attrs, type: 'file'});
  const name = h('span', {class: 'muted'}, v ? ' ' + (v.title || 'attached') + (v.size ? ' (' + v.size + ' bytes)' : '') : '');
  input.addEventListener('change', () => {
    const f = input.files && input.files[0];
    if (!f) return set(i, null);
    const reader = new FileReader();
    reader.onload = () => {
      const data = String(reader.result).replace(/^data:[^,]*,/, '');
      set(i, {contentType: f.type || 'application/octet-stream', data, title: f.name, size: f.size});
      name.textContent = ' ' + f.name + ' (' + f.size + ' bytes)';
    };
    reader.readAsDataURL(f);
  });
  return h('span', null, input, name);
}

// reference is a search picker over the types the form allows.
function reference(n, i, set, attrs, v, io) {
  const types = (n.q.extension || []).filter((e) => e.url === EXT.referenceResource).map((e) => e.valueCode).filter(Boolean);
  return combo({
    attrs, label: (n.q.text || n.q.linkId),
    current: v ? (v.display || v.reference) : '',
    search: async (text) => (await io.searchReferences(types.length ? types : ['Patient', 'Practitioner', 'RelatedPerson'], text))
      .map((r) => ({text: r.display + ' (' + r.reference + ')', value: r})),
    pick: (value) => set(i, value),
  });
}

// booleanControl is Yes/No radio buttons with a Clear button (a check box
// with itemControl check-box).
function booleanControl(n, set, attrs) {
  const v = valueOf(n.answers[0] || {})[1];
  if (itemControl(n.q) === 'check-box') {
    const box = h('input', {...attrs, type: 'checkbox', checked: v === true});
    box.addEventListener('change', () => set(0, box.checked));
    return h('span', {class: 'qcheck'}, box, h('label', {for: attrs.id}, 'Yes'));
  }
  const name = n.uid + '-bool';
  const clearButton = n.readOnly ? null : h('button', {type: 'button', class: 'link clear', hidden: v === undefined, 'aria-label': 'Clear the answer',
    onclick: () => { set(0, null); n.draw(); }}, 'Clear');
  const radio = (val, text, k) => {
    const r = h('input', {type: 'radio', name, id: n.uid + '-' + k, value: String(val), checked: v === val, disabled: attrs.disabled,
      'aria-describedby': attrs['aria-describedby']});
    r.addEventListener('change', () => {
      if (!r.checked) return;
      set(0, val);
      if (clearButton) clearButton.hidden = false;
    });
    return h('span', {class: 'qradio'}, r, h('label', {for: n.uid + '-' + k}, text));
  };
  return h('div', {class: 'qoptions inline', role: 'radiogroup', 'aria-labelledby': n.uid + '-label', 'aria-required': attrs['aria-required']},
    radio(true, 'Yes', 0), radio(false, 'No', 1), clearButton);
}

// choice draws a choice or open-choice question: radio buttons, check
// boxes, a drop-down, or a drop-down searched as one types, by its
// itemControl and the number of options.
function choice(n, io, attrs, describedBy) {
  const q = n.q;
  const box = h('div', {class: 'qchoice'});
  const draw = (options, total) => {
    const ctl = itemControl(q);
    const many = total > SELECT_MAX;
    let el;
    if (ctl === 'autocomplete' || (many && ctl !== 'check-box' && ctl !== 'radio-button')) el = searchable(n, io, attrs, options);
    else if (ctl === 'check-box' || (q.repeats && ctl !== 'drop-down')) el = checks(n, io, attrs, options, 'checkbox');
    else if (ctl === 'radio-button' || (!ctl && options.length <= RADIO_MAX)) el = checks(n, io, attrs, options, 'radio');
    else el = dropDown(n, io, attrs, options);
    clear(box, el, q.type === 'open-choice' ? other(n, io, describedBy) : null);
    // Options that came later (a value set's): the question labels a field.
    const label = box.closest('.qitem') ? box.closest('.qitem').querySelector('.qlabel') : null;
    const first = box.querySelector('#' + n.uid + '-0');
    if (label && first && first.type !== 'radio' && first.type !== 'checkbox') label.htmlFor = first.id;
  };
  if (q.answerValueSet) {
    box.append(h('span', {class: 'muted'}, 'Loading the answers…'));
    io.expand(q.answerValueSet, '').then((x) => draw(x.codings.map((c) => ({valueCoding: c})), x.total))
      .catch((e) => clear(box, h('span', {class: 'qerror'}, 'The answers could not be loaded: ' + e.message)));
  } else {
    draw(q.answerOption || [], (q.answerOption || []).length);
  }
  return box;
}

// sameOption tells whether an answer is an option.
function sameOption(a, o) {
  const [t, v] = valueOf(a);
  const [ot, ov] = valueOf(o);
  if (t !== ot) return false;
  if (t === 'Coding') return v.code === ov.code && (!v.system || !ov.system || v.system === ov.system);
  if (t === 'Reference') return v.reference === ov.reference;
  return v === ov;
}

const asAnswer = (o) => { const [t, v] = valueOf(o); return {['value' + t]: v}; };

// checks is radio buttons or check boxes, one per option.
function checks(n, io, attrs, options, kind) {
  const name = n.uid + '-opt';
  const group = h('div', {class: 'qoptions' + (options.length <= 3 ? ' inline' : ''), role: kind === 'radio' ? 'radiogroup' : 'group',
    'aria-labelledby': n.uid + '-label', 'aria-required': attrs['aria-required']});
  options.forEach((o, k) => {
    const id = n.uid + '-' + k;
    const input = h('input', {type: kind, name, id, checked: n.answers.some((a) => sameOption(a, o)), disabled: attrs.disabled, 'aria-describedby': attrs['aria-describedby']});
    input.addEventListener('change', () => {
      if (kind === 'radio') n.answers = [asAnswer(o)];
      else if (input.checked) n.answers.push(asAnswer(o));
      else n.answers = n.answers.filter((a) => !sameOption(a, o));
      io.changed(n);
    });
    group.append(h('span', {class: kind === 'radio' ? 'qradio' : 'qcheck'}, input, h('label', {for: id}, optionText(o))));
  });
  if (kind === 'radio' && !n.readOnly) {
    group.append(h('button', {type: 'button', class: 'link clear', 'aria-label': 'Clear the answer', onclick: () => { n.answers = []; n.draw(); io.changed(n); }}, 'Clear'));
  }
  return group;
}

// dropDown is a select of the options.
function dropDown(n, io, attrs, options) {
  const sel = h('select', {...attrs, readonly: null}, h('option', {value: ''}, '—'),
    options.map((o, k) => h('option', {value: String(k), selected: n.answers.some((a) => sameOption(a, o))}, optionText(o))));
  sel.addEventListener('change', () => {
    n.answers = sel.value === '' ? [] : [asAnswer(options[Number(sel.value)])];
    io.changed(n);
  });
  return sel;
}

// searchable is a drop-down searched as one types: the form's options
// filtered here, a value set's through $expand with a filter.
function searchable(n, io, attrs, options) {
  const current = n.answers.map((a) => optionText(a)).join(', ');
  return combo({
    attrs, label: n.q.text || n.q.linkId, current,
    search: async (text) => {
      let list = options;
      if (n.q.answerValueSet) list = (await io.expand(n.q.answerValueSet, text)).codings.map((c) => ({valueCoding: c}));
      else if (text) list = options.filter((o) => optionText(o).toLowerCase().includes(text.toLowerCase()));
      return list.slice(0, 50).map((o) => ({text: optionText(o), value: o}));
    },
    pick: (o) => {
      if (o === null) n.answers = [];
      else if (n.q.repeats) n.answers.push(asAnswer(o));
      else n.answers = [asAnswer(o)];
      io.changed(n);
    },
  });
}

// other is the free-text answer of an open-choice question.
function other(n, io, describedBy) {
  const id = n.uid + '-other';
  const given = n.answers.find((a) => valueOf(a)[0] === 'String');
  const input = h('input', {type: 'text', id, value: given ? given.valueString : '', 'aria-describedby': describedBy, readonly: n.readOnly || null});
  input.addEventListener('input', () => {
    n.answers = n.answers.filter((a) => valueOf(a)[0] !== 'String');
    if (input.value) {
      if (!n.q.repeats) n.answers = [];
      n.answers.push({valueString: input.value});
    }
    io.changed(n);
  });
  return h('div', {class: 'qother'}, h('label', {for: id}, 'Other: '), input);
}

let comboSeq = 0;

// combo is an ARIA combobox: a text box whose list of matches follows
// what is typed; arrows move, Enter picks, Escape closes.
function combo({attrs, label, current, search, pick}) {
  const listId = 'combo-' + (++comboSeq);
  const input = h('input', {...attrs, type: 'search', role: 'combobox', 'aria-autocomplete': 'list', 'aria-expanded': 'false',
    'aria-controls': listId, autocomplete: 'off', value: current || '', placeholder: 'Type to search'});
  const list = h('ul', {class: 'combo-list', id: listId, role: 'listbox', 'aria-label': label, hidden: true});
  let items = [];
  let active = -1;
  let seq = 0;
  let timer = 0;
  const close = () => { list.hidden = true; input.setAttribute('aria-expanded', 'false'); input.removeAttribute('aria-activedescendant'); active = -1; };
  const highlight = (k) => {
    active = k;
    [...list.children].forEach((li, j) => li.setAttribute('aria-selected', String(j === k)));
    if (k >= 0 && list.children[k]) { input.setAttribute('aria-activedescendant', list.children[k].id); list.children[k].scrollIntoView({block: 'nearest'}); }
  };
  const choose = (k) => {
    const it = items[k];
    if (!it) return;
    input.value = it.text;
    close();
    pick(it.value);
  };
  const run = async () => {
    const my = ++seq;
    let found;
    try {
      found = await search(input.value.trim());
    } catch (e) {
      found = [];
    }
    if (my !== seq) return;
    items = found;
    clear(list, items.length ? items.map((it, k) => h('li', {role: 'option', id: listId + '-' + k, 'aria-selected': 'false',
      onmousedown: (ev) => { ev.preventDefault(); choose(k); }}, it.text)) : h('li', {class: 'muted', role: 'option', 'aria-disabled': 'true'}, 'No match'));
    list.hidden = false;
    input.setAttribute('aria-expanded', 'true');
    active = -1;
  };
  input.addEventListener('input', () => {
    if (input.value === '') pick(null);
    clearTimeout(timer);
    timer = setTimeout(run, 120);
  });
  input.addEventListener('focus', () => { if (!input.readOnly && list.hidden) run(); });
  input.addEventListener('blur', () => setTimeout(close, 150));
  input.addEventListener('keydown', (ev) => {
    if (ev.key === 'ArrowDown') { ev.preventDefault(); if (list.hidden) run(); else highlight(Math.min(items.length - 1, active + 1)); }
    else if (ev.key === 'ArrowUp') { ev.preventDefault(); highlight(Math.max(0, active - 1)); }
    else if (ev.key === 'Enter' && !list.hidden && active >= 0) { ev.preventDefault(); choose(active); }
    else if (ev.key === 'Escape' && !list.hidden) { ev.preventDefault(); close(); }
  });
  return h('div', {class: 'combo'}, input, list);
}

// answersEqual tells whether two answer lists hold the same values.
export function answersEqual(a, b) {
  return JSON.stringify(a.map((x) => valueOf(x))) === JSON.stringify(b.map((x) => valueOf(x)));
}
