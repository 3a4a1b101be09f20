// A hand-written graphql-transport-ws client for the `feedUpdates` subscription.
//
// Protocol (https://github.com/enisdenjo/graphql-ws/blob/master/PROTOCOL.md), client side:
//   -> connection_init {payload: {authorization: "Bearer <token>"}}
//   <- connection_ack                      (else the server closes: 4401/4403 = not authorized)
//   -> subscribe {id, payload: {documentId, operationName}}   (the registered document's id;
//                                        {query, ...} when the server does not know it)
//   <- next {id, payload: {data}} ...      (each carries the running newPostCount)
//   <- error {id, payload: [GraphQLError]} (the operation failed; no `complete` follows)
//   <- complete {id}                       (the server ended it; we subscribe again)
//   <-> ping / pong                        (either side; we answer pings and send our own to
//                                           notice a dead connection that never closes)
// When the socket drops we reconnect with exponential backoff and jitter, and say so.

import {
  auth,
  documentIdOf,
  errorFromGraphQL,
  forgetDocumentIds,
  isUnknownDocument,
  operationDocument,
} from './api.js';

const PROTOCOL = 'graphql-transport-ws';
const ACK_TIMEOUT_MS = 10_000;
const PING_EVERY_MS = 20_000;
const PONG_TIMEOUT_MS = 10_000;
const BACKOFF_BASE_MS = 500;
const BACKOFF_MAX_MS = 15_000;
const SUBSCRIBE_SETTLE_MS = 400;
const UNAVAILABLE_RETRY_MS = 30_000; // the server has no subscription yet: look again later

// Close codes of the protocol.
const CLOSE_BAD_MESSAGE = 4400;
const CLOSE_UNAUTHORIZED = 4401;
const CLOSE_FORBIDDEN = 4403;

/**
 * Status values (exposed on `status.state`, and as `data-state` in the page):
 *   idle | connecting | live | reconnecting | unavailable | unauthorized
 */
export class LiveFeed extends EventTarget {
  constructor({ url = defaultUrl(), operation = 'FeedUpdates' } = {}) {
    super();
    this.url = url;
    this.operation = operation;
    this.ws = null;
    this.seq = 0;
    this.subscriptionId = null;
    this.sentById = false; // the subscription named its document by id (not by text)
    this.attempt = 0; // consecutive failed connections
    this.timers = {};
    this.stopped = true;
    this.status = { state: 'idle', detail: '', retryAt: null, attempt: 0 };
    this.onOnline = () => this.retryNow();
  }

  start() {
    if (!this.stopped) return;
    this.stopped = false;
    window.addEventListener('online', this.onOnline);
    this.connect();
  }

  stop() {
    this.stopped = true;
    window.removeEventListener('online', this.onOnline);
    this.clearTimers();
    if (this.ws) {
      const ws = this.ws;
      this.ws = null;
      if (ws.readyState === WebSocket.OPEN && this.subscriptionId) {
        this.send(ws, { id: this.subscriptionId, type: 'complete' });
      }
      ws.close(1000, 'bye');
    }
    this.setStatus('idle');
  }

  /** Skip the backoff wait (button in the page, or the browser came back online). */
  retryNow() {
    if (this.stopped || this.ws) return;
    this.clearTimers();
    this.connect();
  }

  // ------------------------------------------------------------------ connection

  connect() {
    const document = operationDocument(this.operation);
    if (!document) {
      this.setStatus('unavailable', `The page has no ${this.operation} document.`);
      return;
    }
    const token = auth.token;
    if (!token) {
      this.setStatus('unauthorized', 'Log in to get live updates.');
      return;
    }
    if (this.attempt === 0) this.setStatus('connecting', 'Connecting…');
    else this.setStatus('reconnecting', this.status.detail); // retryAt null: trying now
    let ws;
    try {
      ws = new WebSocket(this.url, PROTOCOL);
    } catch (err) {
      this.scheduleReconnect(`Could not open a websocket: ${err.message}`);
      return;
    }
    this.ws = ws;
    this.subscriptionId = null;
    ws.onopen = () => {
      this.send(ws, { type: 'connection_init', payload: { authorization: `Bearer ${token}` } });
      this.timers.ack = setTimeout(() => ws.close(4408, 'no connection_ack'), ACK_TIMEOUT_MS);
    };
    ws.onmessage = (event) => this.receive(ws, event.data, document);
    ws.onerror = () => {}; // onclose follows and carries the code
    ws.onclose = (event) => this.closed(ws, event);
  }

  closed(ws, event) {
    if (ws !== this.ws) return; // an older socket
    this.ws = null;
    this.clearTimers();
    if (this.stopped) return;
    if (event.code === CLOSE_UNAUTHORIZED || event.code === CLOSE_FORBIDDEN) {
      this.attempt += 1;
      this.schedule(BACKOFF_MAX_MS, 'unauthorized', 'The server refused the live connection.');
      this.dispatchEvent(new CustomEvent('unauthorized'));
      return;
    }
    if (this.status.state === 'unauthorized') {
      this.schedule(BACKOFF_MAX_MS, 'unauthorized', this.status.detail);
      return;
    }
    if (this.status.state === 'unavailable') {
      this.schedule(UNAVAILABLE_RETRY_MS, 'unavailable', this.status.detail);
      return;
    }
    if (ws.protocolError) {
      this.scheduleReconnect(`Protocol error: ${ws.protocolError}.`);
      return;
    }
    const why =
      {
        1001: 'The server went away.',
        1011: 'The server hit an error.',
        1012: 'The server is restarting.',
        1013: 'The server is busy.',
      }[event.code] || (event.code === 1006 || !event.code ? 'Connection lost.' : `Closed (${event.code}).`);
    this.scheduleReconnect(why);
  }

  scheduleReconnect(detail) {
    this.attempt += 1;
    const exp = Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** (this.attempt - 1));
    const delay = Math.round(exp / 2 + (Math.random() * exp) / 2); // "equal jitter"
    this.schedule(delay, 'reconnecting', detail);
  }

  schedule(delay, state, detail) {
    clearTimeout(this.timers.retry);
    this.timers.retry = setTimeout(() => {
      delete this.timers.retry;
      this.connect();
    }, delay);
    this.setStatus(state, detail, Date.now() + delay);
  }

  // ------------------------------------------------------------------ messages

  receive(ws, raw, document) {
    // Every message of the protocol is JSON in a *text* frame. A binary frame (a Blob here)
    // is the server breaking the protocol: close like any protocol error and say so, instead
    // of decoding it and hiding the defect (standard clients such as graphql-ws reject it too).
    if (typeof raw !== 'string') {
      this.protocolError(ws, 'the server sent a binary frame (graphql-transport-ws messages are text)');
      return;
    }
    let message;
    try {
      message = JSON.parse(raw);
    } catch {
      this.protocolError(ws, 'the server sent a message that is not JSON');
      return;
    }
    switch (message.type) {
      case 'connection_ack':
        clearTimeout(this.timers.ack);
        this.attempt = 0;
        this.subscribe(ws, document);
        this.keepAlive(ws);
        // The protocol has no "subscribed" answer: a schema without the subscription rejects
        // it at once, so call it live after a short quiet period (or at the first `next`).
        this.setStatus('connecting', 'Subscribing…');
        this.timers.settle = setTimeout(() => this.markLive(), SUBSCRIBE_SETTLE_MS);
        break;
      case 'ping':
        this.send(ws, { type: 'pong' });
        break;
      case 'pong':
        clearTimeout(this.timers.pong);
        break;
      case 'next':
        if (message.id !== this.subscriptionId) break;
        if (message.payload?.errors?.length) {
          this.failed(ws, message.payload.errors);
        } else if (message.payload?.data?.feedUpdates) {
          this.markLive();
          this.dispatchEvent(new CustomEvent('update', { detail: message.payload.data.feedUpdates }));
        }
        break;
      case 'error':
        if (message.id !== this.subscriptionId) break;
        if (this.sentById && isUnknownDocument(message.payload)) {
          forgetDocumentIds(); // the server has other documents: send the text
          this.subscribe(ws, document);
          break;
        }
        this.failed(ws, message.payload || []);
        break;
      case 'complete':
        // The server ended the stream (e.g. it is shutting down): ask again shortly.
        if (message.id === this.subscriptionId) {
          this.subscriptionId = null;
          this.timers.resubscribe = setTimeout(() => this.subscribe(ws, document), 1000);
        }
        break;
      default:
        break;
    }
  }

  /** Close on a message the protocol does not allow; the reconnect notice says which. */
  protocolError(ws, why) {
    ws.protocolError = why; // the close event may not echo our reason: keep it here
    ws.close(CLOSE_BAD_MESSAGE, 'unreadable message');
  }

  markLive() {
    clearTimeout(this.timers.settle);
    if (this.ws && this.subscriptionId && this.status.state !== 'live') {
      this.setStatus('live', 'Live: new posts are announced here.');
    }
  }

  subscribe(ws, document) {
    if (ws.readyState !== WebSocket.OPEN) return;
    this.subscriptionId = String(++this.seq);
    const documentId = documentIdOf(this.operation);
    const named = documentId ? { documentId } : { query: document };
    this.sentById = Boolean(documentId);
    this.send(ws, {
      id: this.subscriptionId,
      type: 'subscribe',
      payload: { ...named, operationName: this.operation, variables: {} },
    });
  }

  failed(ws, errors) {
    const error = errorFromGraphQL(errors, this.operation);
    clearTimeout(this.timers.settle);
    this.subscriptionId = null;
    if (error.code === 'NOT_IMPLEMENTED') {
      this.setStatus(
        'unavailable',
        'This server has no feedUpdates subscription yet.',
      );
    } else if (error.code === 'UNAUTHENTICATED') {
      this.setStatus('unauthorized', error.message);
      this.dispatchEvent(new CustomEvent('unauthorized'));
    } else {
      this.setStatus('reconnecting', `${error.title}: ${error.message}`);
    }
    ws.close(1000, 'subscription failed');
  }

  keepAlive(ws) {
    clearInterval(this.timers.ping);
    this.timers.ping = setInterval(() => {
      if (ws.readyState !== WebSocket.OPEN) return;
      this.send(ws, { type: 'ping' });
      clearTimeout(this.timers.pong);
      this.timers.pong = setTimeout(() => ws.close(4000, 'no pong'), PONG_TIMEOUT_MS);
    }, PING_EVERY_MS);
  }

  send(ws, message) {
    if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(message));
  }

  clearTimers() {
    for (const timer of Object.values(this.timers)) {
      clearTimeout(timer);
      clearInterval(timer);
    }
    this.timers = {};
  }

  setStatus(state, detail = '', retryAt = null) {
    this.status = { state, detail, retryAt, attempt: this.attempt };
    this.dispatchEvent(new CustomEvent('status', { detail: this.status }));
  }
}

function defaultUrl() {
  const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
  return `${scheme}//${location.host}/graphql`;
}
