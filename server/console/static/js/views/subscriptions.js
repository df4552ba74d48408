// Subscriptions: each of the tenant's Subscriptions with its status, its
// last error and, for topic-based ones, the events it has had and the
// latest of them ($status, $events).
import {h, enc, fmtDate, clear, message} from '../dom.js';
import * as api from '../api.js';
import {can, errorBox} from '../app.js';

// lastEvents is how many of a topic-based subscription's latest events are
// shown.
const lastEvents = 5;

export async function subscriptionsView() {
  const title = h('h1', null, 'Subscriptions');
  if (!can('Subscription', 's')) {
    return h('section', null, title, message('info', 'This token may not search Subscriptions.'));
  }
  let bundle;
  try {
    bundle = await api.get('/Subscription?_count=100&_sort=-_lastUpdated');
  } catch (e) {
    return h('section', null, title, errorBox(e));
  }
  const subs = (bundle.entry || []).map((e) => e.resource).filter(Boolean);
  const body = subs.length === 0
    ? h('p', {class: 'muted', id: 'subscriptions-empty'}, 'No subscriptions yet.')
    : h('table', {id: 'subscriptions', class: 'subscriptions'},
      h('thead', null, h('tr', null, h('th', null, 'Subscription'), h('th', null, 'Topic or criteria'), h('th', null, 'Channel'),
        h('th', null, 'Status'), h('th', {class: 'num'}, 'Events'), h('th', null, 'Last error'))),
      h('tbody', null, subs.map(row)));
  return h('section', {class: 'subscriptions-view', dataset: {title: 'Subscriptions'}}, title,
    h('p', {class: 'muted'}, 'Newest first. Topic-based subscriptions show the events they have had; open one for its latest.'), body);
}

// topicBased tells a topic-based subscription (its criteria is a topic's
// canonical URL) from a criteria-based one (a search).
function topicBased(s) { return /^https?:\/\//.test(s.criteria || ''); }

function row(s) {
  const topic = topicBased(s);
  const events = h('td', {class: 'num sub-events'}, topic ? '…' : '—');
  const status = h('td', {class: 'sub-status'}, badge(s.status));
  const detail = h('tr', {class: 'sub-detail', hidden: true}, h('td', {colspan: 6}));
  const id = h('a', {href: '#/r/Subscription/' + enc(s.id)}, s.id);
  const tr = h('tr', {dataset: {id: s.id}},
    h('td', null, id, topic ? ' ' : null,
      topic ? h('button', {type: 'button', class: 'link sub-toggle', onclick: () => toggle(s, detail)}, 'events') : null),
    h('td', {class: 'sub-criteria'}, s.criteria || ''),
    h('td', null, channel(s.channel || {})),
    status,
    events,
    h('td', {class: 'sub-error'}, s.error || ''));
  if (topic) fillStatus(s, status, events);
  return [tr, detail];
}

function channel(c) {
  return [c.type || '', c.endpoint ? h('div', {class: 'muted'}, c.endpoint) : null];
}

function badge(status) {
  return h('span', {class: 'badge status-' + (status || 'unknown')}, status || 'unknown');
}

// fillStatus asks $status for the events counted since the subscription
// started and its status as the server sees it now.
async function fillStatus(s, status, events) {
  try {
    const b = await api.get('/Subscription/' + enc(s.id) + '/$status');
    const p = ((b.entry || [])[0] || {}).resource || {};
    const n = param(p, 'events-since-subscription-start');
    clear(events, n === undefined ? '—' : String(n));
    const st = param(p, 'status');
    if (st) clear(status, badge(st));
  } catch (e) {
    clear(events, h('span', {class: 'muted', title: e.message}, '?'));
  }
}

// param is the value of a Parameters' parameter, whatever its type.
function param(p, name) {
  const found = (p.parameter || []).find((x) => x.name === name);
  if (!found) return undefined;
  const key = Object.keys(found).find((k) => k.startsWith('value'));
  return key ? found[key] : undefined;
}

async function toggle(s, detail) {
  detail.hidden = !detail.hidden;
  if (detail.hidden) return;
  const cell = detail.firstChild;
  clear(cell, h('p', {class: 'muted'}, 'Loading events…'));
  try {
    const st = await api.get('/Subscription/' + enc(s.id) + '/$status');
    const total = Number(param(((st.entry || [])[0] || {}).resource || {}, 'events-since-subscription-start')) || 0;
    if (total === 0) {
      clear(cell, h('p', {class: 'muted'}, 'No events yet.'));
      return;
    }
    const since = Math.max(1, total - lastEvents + 1);
    const b = await api.get('/Subscription/' + enc(s.id) + '/$events?eventsSinceNumber=' + since + '&eventsUntilNumber=' + total + '&content=id-only');
    clear(cell, eventsTable(b));
  } catch (e) {
    clear(cell, errorBox(e));
  }
}

// eventsTable lists the notification events of a query-event Bundle.
function eventsTable(b) {
  const status = ((b.entry || [])[0] || {}).resource || {};
  const events = (status.parameter || []).filter((x) => x.name === 'notification-event').map((x) => {
    const part = (n) => (x.part || []).find((y) => y.name === n) || {};
    return {number: part('event-number').valueString || part('event-number').valueInteger64 || part('event-number').valueInteger,
      at: part('timestamp').valueInstant, focus: (part('focus').valueReference || {}).reference};
  });
  if (events.length === 0) return h('p', {class: 'muted'}, 'No events in the range kept.');
  return h('table', {class: 'sub-events-table'},
    h('thead', null, h('tr', null, h('th', {class: 'num'}, 'Event'), h('th', null, 'When'), h('th', null, 'Focus'))),
    h('tbody', null, events.reverse().map((ev) => h('tr', null,
      h('td', {class: 'num'}, String(ev.number ?? '')),
      h('td', null, ev.at ? fmtDate(ev.at) : ''),
      h('td', null, ev.focus ? h('a', {href: '#/r/' + ev.focus.split('/').map(enc).join('/')}, ev.focus) : '')))));
}
