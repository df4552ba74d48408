// Sign in: paste a bearer token, or get one from the server's own token
// endpoint with a client id and secret. The token stays in this tab's
// sessionStorage.
import {h, message} from '../dom.js';
import * as api from '../api.js';
import {go, loadSession} from '../app.js';

export async function signinView(ctx) {
  const status = h('div', {id: 'signin-status', 'aria-live': 'polite'});
  if (ctx.expired) status.append(message('error', 'The token was refused (expired, revoked or for another tenant). Sign in again.'));
  // A password field: the token is a secret, and it is pasted, not typed.
  const tokenInput = h('input', {id: 'token', type: 'password', spellcheck: 'false', autocomplete: 'off', placeholder: 'eyJhbGciOi…', required: true});
  const tokenForm = h('form', {class: 'card', id: 'signin-token'},
    h('h2', null, 'Paste a bearer token'),
    h('p', {class: 'muted'}, 'For example the output of ', h('code', null, 'fhirstore token --tenant <name> --scope "system/*.*"'), '. It is kept in this browser tab only and sent to this server only.'),
    h('label', {for: 'token'}, 'Token'), tokenInput,
    h('div', {class: 'actions'}, h('button', {type: 'submit', id: 'signin-submit'}, 'Sign in')));
  tokenForm.addEventListener('submit', (ev) => {
    ev.preventDefault();
    signIn(tokenInput.value.replace(/^Bearer\s+/i, ''), status);
  });
  const cards = h('div', {class: 'cards'}, tokenForm);
  // The token form shows at once; the client form once discovery answers.
  api.smartConfiguration().then((smart) => {
    if (smart && sameOrigin(smart.token_endpoint) && (smart.grant_types_supported || []).includes('client_credentials')) {
      cards.append(clientForm(smart.token_endpoint, status));
    }
  });
  return h('section', {class: 'signin', dataset: {title: 'Sign in'}},
    h('h1', null, 'Sign in'), status, cards);
}

function sameOrigin(u) {
  try { return !!u && new URL(u, location.href).origin === location.origin; } catch (e) { return false; }
}

// clientForm signs in with OAuth client credentials at the server's own
// token endpoint (client_secret_post).
function clientForm(endpoint, status) {
  const id = h('input', {id: 'client-id', autocomplete: 'off', required: true});
  const secret = h('input', {id: 'client-secret', type: 'password', autocomplete: 'off', required: true});
  const scope = h('input', {id: 'client-scope', placeholder: 'all the client was granted', autocomplete: 'off'});
  const form = h('form', {class: 'card', id: 'signin-client'},
    h('h2', null, 'Sign in with a client'),
    h('p', {class: 'muted'}, 'Ask this server\'s OAuth token endpoint for a token with a registered client\'s credentials.'),
    h('label', {for: 'client-id'}, 'Client id'), id,
    h('label', {for: 'client-secret'}, 'Client secret'), secret,
    h('label', {for: 'client-scope'}, 'Scope (optional)'), scope,
    h('div', {class: 'actions'}, h('button', {type: 'submit'}, 'Get a token')));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const body = new URLSearchParams({grant_type: 'client_credentials', client_id: id.value, client_secret: secret.value});
    if (scope.value.trim()) body.set('scope', scope.value.trim());
    try {
      const res = await api.request('POST', api.samePath(endpoint), {body, anonymous: true, headers: {Accept: 'application/json'}});
      await signIn(res.body.access_token, status);
    } catch (e) {
      status.replaceChildren(message('error', 'The token endpoint refused: ' + e.message));
    }
  });
  return form;
}

async function signIn(token, status) {
  if (!token.trim()) return;
  api.setToken(token);
  try {
    await loadSession();
    go('#/');
  } catch (e) {
    api.signOut();
    status.replaceChildren(message('error', e.status === 401 || e.status === 403
      ? 'The server refused this token: ' + e.message : 'Could not sign in: ' + e.message));
  }
}
