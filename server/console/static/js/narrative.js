// Narrative rendering. A resource's text.div is untrusted XHTML: it is
// parsed in an inert document (scripts do not run, images do not load
// there), and only whitelisted elements and attributes are copied into
// the page as new DOM nodes; everything else is dropped or unwrapped.
// The page's Content-Security-Policy would block inline script anyway.
import {h} from './dom.js';

// ELEMENTS are the XHTML elements FHIR allows in a narrative (txt-1).
const ELEMENTS = new Set(('a abbr acronym b big blockquote br caption cite code col colgroup dd dfn div dl dt em ' +
  'h1 h2 h3 h4 h5 h6 hr i img kbd li ol p pre q samp small span strong sub sup table tbody td tfoot th thead tr tt ul var').split(' '));
// DROP are removed with their content.
const DROP = new Set(['script', 'style', 'iframe', 'object', 'embed', 'template', 'noscript', 'svg', 'math', 'form', 'frame', 'frameset', 'head', 'title', 'meta', 'link', 'base']);
// ATTRIBUTES are the harmless attributes kept, per element ('*' for all).
const ATTRIBUTES = {'*': ['title', 'lang', 'dir'], a: ['href'], img: ['src', 'alt', 'width', 'height'],
  td: ['colspan', 'rowspan'], th: ['colspan', 'rowspan', 'scope'], col: ['span'], colgroup: ['span'],
  ol: ['start', 'type'], q: ['cite'], blockquote: ['cite']};

// linkHref keeps http(s) links and in-document anchors only.
function linkHref(v) {
  const s = v.trim();
  if (/^#[A-Za-z0-9_\-:.]*$/.test(s)) return s;
  try {
    const u = new URL(s);
    if (u.protocol === 'http:' || u.protocol === 'https:') return u.href;
  } catch (e) { /* relative or malformed */ }
  return null;
}

// imageSrc keeps inline raster images only (data:image/png etc.; no SVG).
function imageSrc(v) {
  return /^data:image\/(png|gif|jpeg|webp);base64,[A-Za-z0-9+/=\s]+$/.test(v.trim()) ? v.trim() : null;
}

function copyAttributes(src, dst, tag) {
  const allowed = new Set([...ATTRIBUTES['*'], ...(ATTRIBUTES[tag] || [])]);
  for (const a of Array.from(src.attributes)) {
    const name = a.name.toLowerCase();
    if (!allowed.has(name)) continue;
    let v = a.value;
    if (name === 'href' || name === 'cite') v = linkHref(v);
    else if (name === 'src') v = imageSrc(v);
    if (v === null) continue;
    dst.setAttribute(name, v);
  }
  if (tag === 'a' && dst.hasAttribute('href') && !dst.getAttribute('href').startsWith('#')) {
    dst.setAttribute('rel', 'noopener noreferrer nofollow');
    dst.setAttribute('target', '_blank');
  }
}

function copyChildren(src, dst) {
  for (const n of Array.from(src.childNodes)) {
    if (n.nodeType === Node.TEXT_NODE) { dst.append(document.createTextNode(n.data)); continue; }
    if (n.nodeType !== Node.ELEMENT_NODE) continue;
    const tag = n.localName.toLowerCase();
    if (DROP.has(tag)) continue;
    if (!ELEMENTS.has(tag)) { copyChildren(n, dst); continue; }
    const el = document.createElement(tag);
    copyAttributes(n, el, tag);
    copyChildren(n, el);
    dst.append(el);
  }
}

// sanitize returns a fragment with the safe part of an XHTML string.
export function sanitize(xhtml) {
  const doc = new DOMParser().parseFromString(String(xhtml), 'text/html');
  const frag = document.createDocumentFragment();
  copyChildren(doc.body, frag);
  return frag;
}

// narrative renders a resource's narrative, or says there is none.
export function narrative(resource) {
  const div = resource && resource.text && resource.text.div;
  if (!div) return h('p', {class: 'muted'}, 'This resource has no narrative.');
  const box = h('div', {class: 'narrative', id: 'narrative'});
  box.append(sanitize(div));
  return h('div', null,
    h('p', {class: 'muted'}, 'Narrative status: ', resource.text.status || 'unknown', ' (rendered with scripts, styles and unsafe links removed)'),
    box);
}
