// DOM helpers. Every value reaches the page as a text node or an attribute
// set through the DOM; nothing is ever parsed as HTML.

// h builds an element: h('a', {href: '#/', class: 'x', onclick: fn}, 'text', child...).
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k === 'value' || k === 'checked' || k === 'selected') el[k] = v;
    else if (k === 'href') el.setAttribute('href', safeHref(v));
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

// append adds children (nodes, strings, numbers, arrays; null skipped).
export function append(el, children) {
  for (const c of [children].flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// clear empties an element and fills it with children.
export function clear(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

// safeHref lets through console routes, same-origin paths and http(s)
// links; anything else (javascript:, data:, vbscript:...) becomes "#".
export function safeHref(v) {
  const s = String(v).trim();
  if (s.startsWith('#') || (s.startsWith('/') && !s.startsWith('//'))) return s;
  try {
    const u = new URL(s, location.href);
    if (u.protocol === 'http:' || u.protocol === 'https:') return u.href;
  } catch (e) { /* not a URL */ }
  return '#';
}

// enc encodes one path segment or query value of a console route.
export const enc = encodeURIComponent;

// fmtDate renders an instant in the browser's locale, the raw value as title.
export function fmtDate(s) {
  if (!s) return '';
  const d = new Date(s);
  return isNaN(d) ? String(s) : d.toLocaleString();
}

// message is a notice box: kind is "error", "ok" or "info".
export function message(kind, ...children) {
  return h('div', {class: 'msg ' + kind, role: kind === 'error' ? 'alert' : 'status'}, ...children);
}

// confirmDialog asks a yes/no question in the page and resolves to the answer.
export function confirmDialog(question, yes) {
  return new Promise((resolve) => {
    const dlg = h('dialog', {class: 'confirm', id: 'confirm'});
    const done = (v) => { dlg.close(); dlg.remove(); resolve(v); };
    append(dlg, [
      h('p', null, question),
      h('div', {class: 'actions'},
        h('button', {type: 'button', class: 'danger', id: 'confirm-yes', onclick: () => done(true)}, yes),
        h('button', {type: 'button', id: 'confirm-no', onclick: () => done(false)}, 'Cancel')),
    ]);
    dlg.addEventListener('cancel', () => done(false));
    document.body.append(dlg);
    dlg.showModal();
  });
}
