// The console's only way to the server: same-origin fetches with the
// token of this browser tab as an Authorization header. No cookies.

const TOKEN_KEY = 'fhirstore.console.token';
export const BASE = '/fhir/r4';

const CACHE_PREFIX = 'fhirstore.console.cache.';

export function token() { return sessionStorage.getItem(TOKEN_KEY) || ''; }
export function setToken(t) { forget(); sessionStorage.setItem(TOKEN_KEY, t.trim()); }
export function signOut() { forget(); sessionStorage.removeItem(TOKEN_KEY); }

// remember keeps a small JSON value for the rest of this tab's session, so
// that a reload does not ask the server again.
export function remember(key, value) {
  try { sessionStorage.setItem(CACHE_PREFIX + key, JSON.stringify(value)); } catch (e) { /* full: skip */ }
}

// recall returns what remember kept, or null.
export function recall(key) {
  try { return JSON.parse(sessionStorage.getItem(CACHE_PREFIX + key) || 'null'); } catch (e) { return null; }
}

function forget() {
  for (const k of Object.keys(sessionStorage)) if (k.startsWith(CACHE_PREFIX) && k !== CACHE_PREFIX + 'metadata') sessionStorage.removeItem(k);
}

// ApiError is a non-2xx answer: status, the parsed body (an
// OperationOutcome for FHIR errors) and the response headers.
export class ApiError extends Error {
  constructor(status, body, headers) {
    super(describe(status, body));
    this.status = status;
    this.body = body;
    this.headers = headers;
  }
}

function describe(status, body) {
  if (body && body.resourceType === 'OperationOutcome' && Array.isArray(body.issue)) {
    return status + ': ' + body.issue.map((i) => i.diagnostics || i.code).join('; ');
  }
  if (body && body.error) return status + ': ' + (body.error_description || body.error);
  return 'HTTP ' + status;
}

// samePath turns a server link into a path on this origin; a link to any
// other origin is refused, so the token never leaves it.
export function samePath(link) {
  const u = new URL(link, location.href);
  if (u.origin !== location.origin) throw new Error('the server linked to another origin: ' + u.origin);
  return u.pathname + u.search;
}

// request sends a request to a path of this origin and returns
// {status, headers, body, text}; it throws ApiError unless 2xx.
export async function request(method, path, opts = {}) {
  const headers = new Headers(opts.headers || {});
  const t = token();
  if (t && !opts.anonymous) headers.set('Authorization', 'Bearer ' + t);
  if (!headers.has('Accept')) headers.set('Accept', 'application/fhir+json');
  let body = opts.body;
  if (body !== undefined && typeof body !== 'string' && !(body instanceof Blob) && !(body instanceof URLSearchParams)) {
    body = JSON.stringify(body);
  }
  if (typeof body === 'string' && !headers.has('Content-Type')) headers.set('Content-Type', 'application/fhir+json');
  const res = await fetch(path, {method, headers, body, credentials: 'omit', cache: 'no-store', redirect: 'error', referrerPolicy: 'no-referrer'});
  const text = await res.text();
  let parsed = null;
  if ((res.headers.get('Content-Type') || '').includes('json') && text) {
    try { parsed = JSON.parse(text); } catch (e) { parsed = null; }
  }
  if (!res.ok) throw new ApiError(res.status, parsed, res.headers);
  return {status: res.status, headers: res.headers, body: parsed, text};
}

// fhir is request under the FHIR base.
export function fhir(method, path, opts) { return request(method, BASE + path, opts); }

// get returns the parsed body of a FHIR GET.
export async function get(path) { return (await fhir('GET', path)).body; }

// follow fetches a link the server handed out (paging).
export async function follow(link) { return (await request('GET', samePath(link))).body; }

// consoleApi reads the console's own JSON API.
export async function consoleApi(name) { return (await request('GET', '/console/api/' + name, {headers: {Accept: 'application/json'}})).body; }

let capability = null;
// metadata returns what the console uses of the CapabilityStatement (the
// types with their interactions and search parameters, the operations),
// fetched once per tab session: the whole statement is large.
export async function metadata() {
  if (!capability) {
    const kept = recall('metadata');
    capability = kept ? Promise.resolve(kept) : request('GET', BASE + '/metadata', {anonymous: true}).then((r) => {
      const c = compact(r.body);
      remember('metadata', c);
      return c;
    });
  }
  return capability;
}

// compact keeps the parts of a CapabilityStatement the console reads, in
// the same shape.
function compact(cs) {
  const rest = (cs.rest && cs.rest[0]) || {};
  return {
    software: cs.software,
    rest: [{
      operation: rest.operation || [],
      interaction: rest.interaction || [],
      resource: (rest.resource || []).map((r) => ({
        type: r.type, interaction: r.interaction || [], operation: r.operation || [],
        searchParam: (r.searchParam || []).map((p) => ({name: p.name, type: p.type, documentation: (p.documentation || '').slice(0, 160)})),
      })),
    }],
  };
}

// smartConfiguration returns the SMART discovery document or null.
export async function smartConfiguration() {
  try {
    return (await request('GET', BASE + '/.well-known/smart-configuration', {anonymous: true, headers: {Accept: 'application/json'}})).body;
  } catch (e) {
    return null;
  }
}
