// SPDX-License-Identifier: Apache-2.0
// The server's HTTP API as the UI uses it (docs/http-api.md): GET with query parameters, the
// tenant header and bearer token when they are set, and errors turned into exceptions carrying
// the server's own message ({"error": "...", "status": N}) so the page can show it as is.

export class ApiError extends Error {
  constructor(message, status) {
    super(message);
    this.status = status;
  }
}

let tenant = '', token = '';
// The token is held here and in the tab's sessionStorage (app.js), never in a URL: a link is
// shared, logged and kept in the history; a header is not.
export function setAuth(t, tok) { tenant = t || ''; token = tok || ''; }
function headers() {
  const h = {};
  if (tenant) h['X-Scope-OrgID'] = tenant;
  if (token) h.Authorization = `Bearer ${token}`;
  return h;
}

// A download link cannot send headers: with a tenant or token set, fetch with them and hand the
// bytes to the browser as a file instead.
export async function download(a) {
  const res = await fetch(a.href, {headers: headers()});
  if (!res.ok) {
    let msg = `${res.status} ${res.statusText}`;
    try { msg = (await res.json()).error || msg; } catch (_) { /* keep the status */ }
    throw new ApiError(msg, res.status);
  }
  const url = URL.createObjectURL(await res.blob());
  const tmp = document.createElement('a');
  tmp.href = url;
  tmp.download = a.download;
  document.body.append(tmp);
  tmp.click();
  tmp.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}
export function hasAuth() { return tenant !== '' || token !== ''; }

export function apiUrl(path, params) {
  const u = new URL(path, location.href);
  for (const [k, v] of Object.entries(params || {}))
    if (v !== undefined && v !== null && v !== '') u.searchParams.set(k, v);
  return u.pathname + u.search;
}

// Requests of one kind (e.g. 'query') supersede each other: an answer to an older request that
// arrives late is dropped, so a slow query never overwrites the view of a newer one.
const inflight = new Map();

export async function get(path, params, kind) {
  let ctl = null;
  if (kind) {
    if (inflight.has(kind)) inflight.get(kind).abort();
    ctl = new AbortController();
    inflight.set(kind, ctl);
  }
  let res;
  try {
    res = await fetch(apiUrl(path, params), {headers: headers(), signal: ctl ? ctl.signal : undefined});
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(`cannot reach the server (${e.message})`, 0);
  } finally {
    if (kind && inflight.get(kind) === ctl) inflight.delete(kind);
  }
  const ct = res.headers.get('Content-Type') || '';
  if (!res.ok) {
    let msg = `${res.status} ${res.statusText}`;
    try {
      const j = await res.json();
      if (j && j.error) msg = j.error;
    } catch (_) { /* not JSON: keep the status line */ }
    throw new ApiError(msg, res.status);
  }
  return ct.startsWith('application/json') ? res.json() : res.text();
}
