// The server's API from the browser: one request function, its error type
// and the sentence an error is shown as.

import { stripCredentials } from './dom.js';
import { query } from './paths.js';

// -------------------------------------------------------------------- API

export class ApiError extends Error {
  constructor(status, body, text) {
    const reason = (body && (body.reason || body.error)) || text || `HTTP ${status}`;
    super(typeof reason === 'string' ? reason : JSON.stringify(reason));
    this.status = status;
    this.error = body && body.error;
    this.reason = body && body.reason;
  }
}

export async function api(method, path, { json, body, headers, params } = {}) {
  const init = {
    method,
    credentials: 'same-origin',
    cache: 'no-store',
    headers: { Accept: 'application/json', ...(headers || {}) },
  };
  if (json !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(json);
  } else if (body !== undefined) {
    init.body = body;
  }
  let res;
  try {
    res = await fetch(path + query(params), init);
  } catch (err) {
    throw new ApiError(0, { error: 'network', reason: `The server cannot be reached (${err.message}).` });
  }
  const text = await res.text();
  let data = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = null;
    }
  }
  if (!res.ok) {
    throw new ApiError(res.status, data, text.slice(0, 300));
  }
  return data;
}

/** A readable sentence for an error from the server. */
export function describeError(err) {
  if (!(err instanceof ApiError)) return err && err.message ? err.message : String(err);
  const what = {
    0: 'Network error',
    400: 'Bad request',
    401: 'Not authorized',
    403: 'Not allowed',
    404: 'Not found',
    409: 'Conflict',
    412: 'Precondition failed',
    413: 'Too large',
    415: 'Unsupported media type',
    500: 'Server error',
  }[err.status] || `Error ${err.status}`;
  const reason = stripCredentials(err.message);
  let hint = '';
  if (err.status === 409) hint = ' Someone changed it meanwhile: reload to get the latest revision.';
  if (err.status === 403) hint = ' Your account may not do this.';
  return `${what}: ${reason}.${hint}`.replace(/\.\.$/, '.').replace(/([.!?])\./, '$1');
}
