// GraphQL over HTTP with the project's own operation documents (operations.js is generated
// from graphql/operations/*.graphql), and one place that turns every failure into a message.
//
// The server registers those same documents as trusted documents (docs/API.md, "Trusted
// documents") and lists their ids at /graphql/documents.json: the page sends the id of a
// document instead of its text, and falls back to the text when the server does not know
// the id (PERSISTED_QUERY_NOT_FOUND: it was restarted with other documents) or when the
// list cannot be had (a server without it).

import { operations } from '../operations.js';

const TOKEN_KEY = 'hybridfeed.token';
const DOCUMENT_IDS_URL = '/graphql/documents.json';
const UNKNOWN_DOCUMENT = 'PERSISTED_QUERY_NOT_FOUND';

let documentIds = null; // operation name -> documentId ("sha256:<hex>"), once loaded
let loadingIds = null;

/** The server's list of document ids (once per page; again after forgetDocumentIds). */
function loadDocumentIds() {
  if (documentIds) return Promise.resolve(documentIds);
  loadingIds ??= fetch(DOCUMENT_IDS_URL, { headers: { accept: 'application/json' } })
    .then((response) => (response.ok ? response.json() : {}))
    .then((ids) => {
      documentIds = ids && typeof ids === 'object' ? ids : {};
      return documentIds;
    })
    .catch(() => ({})) // unreachable now: send texts, and ask again next time
    .finally(() => {
      loadingIds = null;
    });
  return loadingIds;
}

loadDocumentIds(); // early: the first request should not wait for it

/** The documentId to send for an operation, when the list is loaded and names it. */
export function documentIdOf(name) {
  return documentIds?.[name] || null;
}

/** The server did not know a documentId we sent: its list changed. */
export function isUnknownDocument(errors) {
  return (errors || []).some((e) => e?.extensions?.code === UNKNOWN_DOCUMENT);
}

export function forgetDocumentIds() {
  documentIds = null;
}

export const auth = {
  get token() {
    return localStorage.getItem(TOKEN_KEY);
  },
  set token(value) {
    if (value) localStorage.setItem(TOKEN_KEY, value);
    else localStorage.removeItem(TOKEN_KEY);
  },
};

/**
 * What each public error code means for a person using the page (API.md, "Errors").
 * The server's own message is shown too: it says what to do in this particular case.
 * NETWORK and NOT_IMPLEMENTED are the client's own: no answer at all, and a server that does
 * not have a feature yet (its schema rejects the document).
 */
export const ERROR_CODES = {
  UNAUTHENTICATED: {
    title: 'Please log in',
    hint: 'Your session is missing or has expired. Log in again to continue.',
  },
  FORBIDDEN: {
    title: 'Not allowed',
    hint: 'You do not have permission to do that (for example, one of you blocked the other).',
  },
  NOT_FOUND: {
    title: 'Not found',
    hint: 'It does not exist any more, or it is not visible to you.',
  },
  BAD_USER_INPUT: {
    title: 'Check your input',
    hint: 'The request was not valid; fix it and try again.',
  },
  CURSOR_EXPIRED: {
    title: 'Feed session expired',
    hint: 'Your place in the feed expired, so it starts again from the top.',
  },
  RATE_LIMITED: {
    title: 'Slow down',
    hint: 'Too many requests in a short time. Wait a few seconds and try again.',
  },
  CONFLICT: {
    title: 'Conflict',
    hint: 'That clashes with something that already exists or changed meanwhile.',
  },
  OVERLOADED: {
    title: 'Server busy',
    hint: 'The server is at capacity and did not run this request. Try again in a moment.',
  },
  UNAVAILABLE: {
    title: 'Temporarily unavailable',
    hint: 'The server cannot reach its database right now. Try again in a few seconds.',
  },
  PERSISTED_QUERY_NOT_FOUND: {
    title: 'Unknown document',
    hint: 'The server did not know this request by its hash; reload the page.',
  },
  INTERNAL: {
    title: 'Server error',
    hint: 'Something went wrong on the server. Try again in a moment.',
  },
  NETWORK: {
    title: 'Cannot reach the server',
    hint: 'Check that the backend (make run) is running, then try again.',
  },
  NOT_IMPLEMENTED: {
    title: 'Not available on this server yet',
    hint: 'This backend does not have that feature yet; the rest of the page still works.',
  },
};

export class ApiError extends Error {
  constructor(code, message, { operation = null, feature = null } = {}) {
    super(message);
    this.name = 'ApiError';
    this.code = ERROR_CODES[code] ? code : 'INTERNAL';
    this.operation = operation;
    this.feature = feature;
  }

  get title() {
    return ERROR_CODES[this.code].title;
  }

  get hint() {
    return ERROR_CODES[this.code].hint;
  }
}

// Validation errors that mean "this schema does not have it (yet)", not "you typed it wrong":
// the documents are fixed, so they can only fail validation against an older server.
const MISSING_FEATURE = [
  /Cannot query field ["'](\w+)["'] on type ["'](\w+)["']/,
  /Unknown type ["'](\w+)["']/,
  /Unknown argument ["'](\w+)["']/,
  /(subscription) operation is not supported/i,
  /Schema is not configured (?:to execute |for )?(subscription)/i,
];

export function missingFeature(message) {
  for (const pattern of MISSING_FEATURE) {
    const m = pattern.exec(message || '');
    if (m) return m[1];
  }
  return null;
}

/** Turn a GraphQL `errors` array (HTTP or websocket) into one ApiError. */
export function errorFromGraphQL(errors, operation) {
  const missing = errors.map((e) => missingFeature(e.message)).find(Boolean);
  if (missing) {
    return new ApiError(
      'NOT_IMPLEMENTED',
      `The server does not support “${missing}” yet (operation ${operation}).`,
      { operation, feature: missing },
    );
  }
  const first = errors[0] || {};
  const code = first.extensions?.code || 'INTERNAL';
  return new ApiError(code, first.message || ERROR_CODES.INTERNAL.hint, { operation });
}

/**
 * Run a named operation. Resolves to `data`; rejects with ApiError (never a raw Error),
 * except AbortError when the caller's signal aborts.
 */
export async function gql(operation, variables = {}, { signal, token = auth.token } = {}) {
  const query = operations[operation];
  if (!query) {
    throw new ApiError('NOT_IMPLEMENTED', `The page has no “${operation}” document.`, {
      operation,
    });
  }
  const headers = { 'content-type': 'application/json', accept: 'application/json' };
  if (token) headers.authorization = `Bearer ${token}`;
  const documentId = (await loadDocumentIds())[operation];
  let body;
  if (documentId) {
    body = await post({ documentId, variables, operationName: operation }, headers, signal);
    if (isUnknownDocument(body?.errors)) {
      forgetDocumentIds();
      body = null; // the text, below
    }
  }
  body ??= await post({ query, variables, operationName: operation }, headers, signal);
  if (body?.errors?.length) throw errorFromGraphQL(body.errors, operation);
  if (!body?.data) throw new ApiError('INTERNAL', 'The server answered without data.', { operation });
  return body.data;
}

/** One POST /graphql; the decoded answer, or ApiError (AbortError when `signal` aborts). */
async function post(payload, headers, signal) {
  const operation = payload.operationName;
  let response;
  try {
    response = await fetch('/graphql', {
      method: 'POST',
      headers,
      body: JSON.stringify(payload),
      signal,
    });
  } catch (err) {
    if (err?.name === 'AbortError') throw err;
    throw new ApiError('NETWORK', 'The request did not reach the server.', { operation });
  }
  try {
    return await response.json();
  } catch {
    throw new ApiError('INTERNAL', `The server answered HTTP ${response.status} without JSON.`, {
      operation,
    });
  }
}

export function hasOperation(name) {
  return Boolean(operations[name]);
}

export function operationDocument(name) {
  return operations[name];
}
