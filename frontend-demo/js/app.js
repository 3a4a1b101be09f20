// The shell: session, hash router (#/, #/login, #/signup, #/u/<handle>[/followers|/following]),
// header (with the people search), toasts, the live connection and the operator panel. Views
// live in js/views/.

import { ApiError, auth, gql } from './api.js';
import { avatar, clear, h, icon } from './dom.js';
import { LiveFeed } from './live.js';
import { OperatorPanel } from './metrics.js';
import { searchBox } from './search.js';
import { authView } from './views/auth.js';
import { forgetHome, homeView } from './views/home.js';
import { userView } from './views/user.js';

const AUTH_OPERATIONS = new Set(['LogIn', 'SignUp']);
const OPERATOR_KEY = 'hybridfeed.operator';

class App extends EventTarget {
  constructor() {
    super();
    this.viewer = null;
    this.newPosts = 0;
    this.latestPostAt = null;
    this.live = new LiveFeed();
    this.view = null;
    this.pageSize = pageSizeFromUrl();
    this.els = {
      header: document.getElementById('topbar'),
      main: document.getElementById('view'),
      operator: document.getElementById('operator'),
      toasts: document.getElementById('toasts'),
    };
    this.operator = new OperatorPanel(this.els.operator);
    this.search = searchBox(this);
    this.feedSeenUpTo = 0; // createdAt (ms) of the newest post on the feed's first page
    this.live.addEventListener('update', (e) => {
      const { newPostCount, latestPostAt } = e.detail;
      // A frame sent before our last first page was read can arrive after it: when its newest
      // post is no newer than what the page already shows, there is nothing new to offer.
      const latest = Date.parse(latestPostAt || '');
      const stale = Number.isFinite(latest) && latest <= this.feedSeenUpTo;
      this.setNewPosts(stale ? 0 : newPostCount, stale ? null : latestPostAt);
    });
    this.live.addEventListener('status', () => this.renderHeader());
    this.live.addEventListener('unauthorized', () => this.checkSession());
  }

  // ---------------------------------------------------------------- API

  /** gql() plus the session rule: an UNAUTHENTICATED answer to a logged-in call logs out. */
  async call(operation, variables = {}, options = {}) {
    try {
      return await gql(operation, variables, options);
    } catch (err) {
      if (err instanceof ApiError && err.code === 'UNAUTHENTICATED' && !AUTH_OPERATIONS.has(operation) && auth.token) {
        err.handled = true;
        this.signOut(`${err.message}`);
      }
      throw err;
    }
  }

  async checkSession() {
    try {
      const data = await this.call('Viewer');
      if (!data.viewer) this.signOut('Your session ended; log in again.');
    } catch {
      // call() already handled UNAUTHENTICATED; other failures: keep the session.
    }
  }

  setNewPosts(count, latestPostAt) {
    this.newPosts = Math.max(0, count | 0);
    this.latestPostAt = latestPostAt || null;
    document.title = this.newPosts ? `(${this.newPosts}) hybridfeed` : 'hybridfeed';
    this.dispatchEvent(new CustomEvent('new-posts'));
    this.renderHeader();
  }

  // ---------------------------------------------------------------- session

  signedIn(token, user) {
    auth.token = token;
    this.viewer = user;
    this.live.stop();
    this.live.start();
    const next = sessionStorage.getItem('hybridfeed.next');
    sessionStorage.removeItem('hybridfeed.next');
    this.applyOperator();
    this.navigate(next && !next.startsWith('#/login') && !next.startsWith('#/signup') ? next : '#/');
    this.renderHeader();
  }

  signOut(notice = '') {
    auth.token = null;
    this.viewer = null;
    this.live.stop();
    this.search.reset();
    forgetHome();
    this.feedSeenUpTo = 0;
    this.setNewPosts(0, null);
    this.notice = notice;
    this.applyOperator();
    this.navigate('#/login');
  }

  // ---------------------------------------------------------------- routing

  navigate(hash) {
    if (location.hash === hash) this.route();
    else location.hash = hash;
  }

  route() {
    const hash = location.hash || '#/';
    const [, first = '', second = '', third = ''] = hash.split('/');
    let next;
    if (!this.viewer) {
      if (!['login', 'signup'].includes(first)) sessionStorage.setItem('hybridfeed.next', hash);
      next = authView(this, { mode: first === 'signup' ? 'signup' : 'login', notice: this.notice || '' });
      this.notice = '';
    } else if (first === 'login' || first === 'signup') {
      return this.navigate('#/');
    } else if (first === 'u' && second) {
      const handle = decodeURIComponent(second);
      // Another tab of the user page on screen: switch the tab, keep the rest.
      if (this.view?.handle === handle && this.view.showTab) {
        this.view.showTab(third);
        this.renderHeader();
        return;
      }
      next = userView(this, handle, third);
    } else if (first === '') {
      next = homeView(this);
    } else {
      next = { el: h('div.card.not-found', h('strong', 'Not found'), h('p', 'No such page.'), h('a', { href: '#/' }, 'Home')) };
    }
    this.show(next);
  }

  show(next) {
    if (this.view && this.view !== next) {
      this.view.unmount?.();
      if (!this.view.viewerId) this.view.destroy?.(); // the home view is cached, not destroyed
    }
    this.view = next;
    clear(this.els.main).append(next.el);
    next.mount?.();
    next.focus?.();
    document.body.dataset.view = this.viewer ? (location.hash.split('/')[1] || 'home') : 'auth';
    this.renderHeader();
  }

  // ---------------------------------------------------------------- chrome

  renderHeader() {
    const header = this.els.header;
    // The search box is one element kept across renders; rebuilding the header must not take
    // the caret out of it (the live status changes while someone types).
    const searching = this.search.focused;
    const selection = searching ? this.search.selection : null;
    clear(header);
    const brand = h('a.brand', { href: '#/' }, icon('logo'), h('span', 'hybridfeed'));
    if (!this.viewer) {
      header.append(h('div.topbar-inner', brand));
      return;
    }
    const status = this.live.status;
    const labels = {
      idle: 'Offline',
      connecting: 'Connecting…',
      live: 'Live',
      reconnecting: 'Reconnecting…',
      unavailable: 'No live updates',
      unauthorized: 'Live paused',
    };
    const route = location.hash.split('/')[1] || '';
    header.append(
      h(
        'div.topbar-inner',
        brand,
        h(
          'nav',
          h(
            'a.nav-link',
            { href: '#/', 'aria-current': route === '' ? 'page' : null, dataset: { testid: 'nav-home' } },
            'Home',
            this.newPosts ? h('span.nav-count', { dataset: { testid: 'nav-new-count' } }, String(this.newPosts)) : null,
          ),
          h(
            'a.nav-link',
            {
              href: `#/u/${encodeURIComponent(this.viewer.handle)}`,
              'aria-current': route === 'u' && decodeURIComponent(location.hash.split('/')[2] || '') === this.viewer.handle ? 'page' : null,
              dataset: { testid: 'nav-profile' },
            },
            'Profile',
          ),
        ),
        this.search.el,
        h('span.spacer'),
        h(
          'span.live-pill',
          { dataset: { testid: 'live-status', state: status.state }, title: status.detail || '' },
          h('span.dot'),
          labels[status.state] || status.state,
        ),
        h(
          'button.icon-button.operator-toggle',
          {
            type: 'button',
            title: 'Operator panel',
            'aria-label': 'Operator panel',
            'aria-pressed': String(this.operatorOpen()),
            dataset: { testid: 'operator-toggle' },
            onclick: () => this.toggleOperator(),
          },
          icon('gauge'),
        ),
        h(
          'div.me',
          avatar(this.viewer, 'small'),
          h('span.me-handle', { dataset: { testid: 'viewer-handle' } }, `@${this.viewer.handle}`),
          h('button.ghost.small', { type: 'button', dataset: { testid: 'logout' }, onclick: () => this.signOut() }, 'Log out'),
        ),
      ),
    );
    this.search.restoreFocus(searching, selection);
  }

  operatorOpen() {
    const saved = localStorage.getItem(OPERATOR_KEY);
    return saved === null ? window.matchMedia('(min-width: 1100px)').matches : saved === 'open';
  }

  toggleOperator(force) {
    const open = force ?? !this.operatorOpen();
    localStorage.setItem(OPERATOR_KEY, open ? 'open' : 'closed');
    this.applyOperator();
    this.renderHeader();
  }

  applyOperator() {
    const open = Boolean(this.viewer) && this.operatorOpen();
    document.body.classList.toggle('operator-open', open);
    this.els.operator.hidden = !open;
    if (open) this.operator.start();
    else this.operator.stop();
  }

  toast(message, kind = 'info', { title = '', code = '' } = {}) {
    const el = h(
      `div.toast.${kind}`,
      { role: kind === 'error' ? 'alert' : 'status', dataset: { testid: 'toast', code, kind } },
      code ? h('span.code', code) : null,
      h('div.toast-text', title ? h('strong', title) : null, h('span', message)),
      h('button.icon-button.small', { type: 'button', 'aria-label': 'Dismiss', onclick: () => el.remove() }, icon('x')),
    );
    this.els.toasts.append(el);
    while (this.els.toasts.children.length > 4) this.els.toasts.firstChild.remove();
    setTimeout(() => {
      el.classList.add('leaving');
      setTimeout(() => el.remove(), 300);
    }, kind === 'error' ? 8000 : 4000);
  }

  /** Show an error: the code's meaning as the title, the server's own message as the text. */
  report(err, message) {
    if (err?.handled) return; // an expired session already sent us to the login page
    if (!(err instanceof ApiError)) {
      console.error(err);
      err = new ApiError('INTERNAL', 'Unexpected error in the page.');
    }
    const text = message || (err.code === 'CURSOR_EXPIRED' ? `${err.hint}` : err.message);
    this.toast(text, 'error', { title: err.title, code: err.code });
  }

  // ---------------------------------------------------------------- start

  async start() {
    window.addEventListener('hashchange', () => this.route());
    window.addEventListener('resize', () => this.applyOperator());
    if (auth.token) {
      try {
        const data = await this.call('Viewer');
        this.viewer = data.viewer;
        if (!data.viewer) auth.token = null;
      } catch (err) {
        if (err.code === 'NETWORK' || err.code === 'INTERNAL') {
          this.fatal(err);
          return;
        }
        if (!err.handled) auth.token = null;
      }
    }
    if (this.viewer) this.live.start();
    this.applyOperator();
    this.route();
    document.body.classList.add('ready');
  }

  fatal(err) {
    clear(this.els.main).append(
      h(
        'div.card.fatal',
        { role: 'alert' },
        h('strong', err.title),
        h('p', err.message),
        h('p.muted', err.hint),
        h('button.primary', { type: 'button', onclick: () => location.reload() }, 'Try again'),
      ),
    );
    document.body.classList.add('ready');
  }
}

function pageSizeFromUrl() {
  const n = Number(new URLSearchParams(location.search).get('first'));
  return Number.isInteger(n) && n >= 1 && n <= 100 ? n : 20;
}

const app = new App();
window.hybridfeed = app; // handy in the console and for the browser tests
app.start();
