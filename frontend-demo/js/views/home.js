// The home feed: compose, RANKED/CHRONOLOGICAL switch, infinite scroll over the opaque cursor,
// the live "N new posts" banner and the websocket's state. The view is kept while you visit a
// profile, so coming back restores the same feed session and scroll position.
// RANKED pages come from FeedWithReasons: a recommended post carries its edge's
// `recommendation` (as `recommended`) to its card. "Show recommendations" is the viewer's
// setting (ViewerSettings / SetRecommendations); changing it reloads the first page.

import { composer } from '../compose.js';
import { clear, h, icon, plural, timeAgo } from '../dom.js';
import { PagedList } from '../paged.js';

const MODES = { RANKED: 'Ranked', CHRONOLOGICAL: 'Latest' };
const MODE_KEY = 'hybridfeed.mode';

let cached = null;

export function homeView(app) {
  if (cached && cached.viewerId === app.viewer.id) return cached;
  cached?.destroy();
  cached = createHome(app);
  return cached;
}

export function forgetHome() {
  cached?.destroy();
  cached = null;
}

/** A RANKED edge with its recommendation on the node, for the card (null unless RECOMMENDED). */
function withReason(edge) {
  const recommended =
    edge.reason === 'RECOMMENDED' ? edge.recommendation ?? { text: 'Suggested for you', likedBy: [] } : null;
  return { ...edge, node: { ...edge.node, recommended } };
}

function createHome(app) {
  let mode = MODES[localStorage.getItem(MODE_KEY)] ? localStorage.getItem(MODE_KEY) : 'RANKED';
  let sessionId = null;
  let degraded = false;
  let scrollY = 0;
  let unavailable = null;

  const list = new PagedList(app, {
    testid: 'feed',
    feedback: true,
    empty: 'Your feed is empty. Follow someone (click an author) or post something.',
    fetchPage: async (after, signal) => {
      const operation = mode === 'RANKED' ? 'FeedWithReasons' : 'Feed';
      const data = await app.call(operation, { first: app.pageSize, after, mode }, { signal });
      if (mode === 'RANKED') data.feed.edges = data.feed.edges.map(withReason);
      if (!after) {
        // The server resets its count when it serves a first page; so do we.
        const times = data.feed.edges.map((e) => Date.parse(e.node.createdAt)).filter(Number.isFinite);
        app.feedSeenUpTo = Math.max(0, ...times);
        app.setNewPosts(0, null);
      }
      return data.feed;
    },
    onPage: (page) => {
      sessionId = page.sessionId ?? null;
      degraded = Boolean(page.degraded);
      unavailable = null;
      renderMeta();
    },
    onError: (err, { first }) => {
      if (err.code === 'CURSOR_EXPIRED') {
        app.report(err);
        window.scrollTo({ top: 0 });
        list.reset();
        return true;
      }
      if (err.code === 'NOT_IMPLEMENTED' && first) {
        unavailable = err;
        renderMeta();
        return true;
      }
      return false;
    },
  });

  // ------------------------------------------------------------------ toolbar

  const modeButtons = Object.entries(MODES).map(([value, label]) =>
    h(
      'button.seg',
      {
        type: 'button',
        dataset: { testid: `mode-${value}`, mode: value },
        onclick: () => switchMode(value),
      },
      label,
    ),
  );
  const refreshButton = h(
    'button.icon-button',
    { type: 'button', title: 'Refresh', 'aria-label': 'Refresh feed', dataset: { testid: 'refresh' }, onclick: () => refresh() },
    icon('refresh'),
  );
  // The viewer's setting, read once (null until known: the box stays disabled).
  const recommendationsBox = h('input', {
    type: 'checkbox',
    disabled: true,
    dataset: { testid: 'recommendations-toggle' },
    onchange: () => setRecommendations(recommendationsBox.checked),
  });
  const recommendationsToggle = h(
    'label.rec-toggle',
    { title: 'Posts from people you do not follow, liked by people you follow (Ranked feed only)' },
    recommendationsBox,
    'Show recommendations',
  );
  const toolbar = h(
    'div.feed-toolbar',
    h('h1', 'Home'),
    recommendationsToggle,
    h('div.segmented', { role: 'group', 'aria-label': 'Feed order' }, modeButtons),
    refreshButton,
  );

  async function loadSettings() {
    try {
      const data = await app.call('ViewerSettings');
      recommendationsBox.checked = data.viewer?.recommendationsEnabled !== false;
      recommendationsBox.disabled = false;
    } catch (err) {
      // An older server (no such field): leave the box disabled, the feed works without it.
      recommendationsToggle.hidden = true;
    }
  }

  async function setRecommendations(enabled) {
    recommendationsBox.disabled = true;
    try {
      const data = await app.call('SetRecommendations', { enabled });
      recommendationsBox.checked = data.setRecommendations.recommendationsEnabled !== false;
      app.toast(enabled ? 'Recommendations on.' : 'Recommendations off.');
      window.scrollTo({ top: 0 });
      list.reset(); // the next first page follows the setting
    } catch (err) {
      recommendationsBox.checked = !enabled;
      app.report(err);
    } finally {
      recommendationsBox.disabled = false;
    }
  }

  function switchMode(value) {
    if (value === mode) return;
    mode = value;
    localStorage.setItem(MODE_KEY, mode);
    syncModes();
    window.scrollTo({ top: 0 });
    list.reset();
  }

  function syncModes() {
    for (const b of modeButtons) b.setAttribute('aria-pressed', String(b.dataset.mode === mode));
    recommendationsToggle.classList.toggle('inactive', mode !== 'RANKED'); // CHRONOLOGICAL has none
  }

  // "N new posts" (or refresh): a fresh first page, with the posts that arrived since the
  // last one on top, marked "New", in both modes. In RANKED order a new post may rank 8th, or
  // on a later page: the reader clicked to see it, so it must not stay below the fold.
  async function refresh() {
    const announced = app.newPosts; // the first page read below resets the count
    window.scrollTo({ top: 0, behavior: 'smooth' });
    refreshButton.classList.add('spinning');
    await list.reset({ showNew: true, moreNew: (found, signal) => newestPosts(announced, found, signal) });
    refreshButton.classList.remove('spinning');
  }

  // The newest posts of the feed, when fewer new posts than `announced` are on the first page:
  // a CHRONOLOGICAL first page is exactly the newest (the list keeps only the new ones). It
  // makes no session and does not touch the list's cursor: paging goes on from that.
  async function newestPosts(announced, found, signal) {
    if (found >= announced) return [];
    const first = Math.min(100, announced + 10); // slack: posts may have come since the count
    const data = await app.call('Feed', { first, after: null, mode: 'CHRONOLOGICAL' }, { signal });
    const nodes = data.feed.edges.map((e) => e.node);
    const times = nodes.map((n) => Date.parse(n.createdAt)).filter(Number.isFinite);
    app.feedSeenUpTo = Math.max(app.feedSeenUpTo, ...times); // this read reset the count too
    return nodes;
  }

  // ------------------------------------------------------------------ live state

  const banner = h(
    'button.new-posts',
    { type: 'button', hidden: true, dataset: { testid: 'new-posts-banner' }, onclick: () => refresh() },
  );
  const liveBar = h('div.live-bar', { hidden: true, role: 'status', dataset: { testid: 'live-bar' } });
  let countdown = null;

  function renderBanner() {
    const n = app.newPosts;
    banner.hidden = n <= 0;
    banner.dataset.count = String(n);
    banner.replaceChildren(
      icon('up'),
      h('span', `${plural(n, 'new post')}`),
      app.latestPostAt ? h('small', ` · latest ${timeAgo(app.latestPostAt)}`) : null,
    );
  }

  function renderLive(status) {
    clearInterval(countdown);
    const { state, detail, retryAt } = status;
    liveBar.dataset.state = state;
    liveBar.hidden = !['reconnecting', 'unavailable', 'unauthorized'].includes(state);
    if (liveBar.hidden) return;
    const text = h('span.live-text');
    const paint = () => {
      const secs = retryAt ? Math.max(0, Math.ceil((retryAt - Date.now()) / 1000)) : null;
      const title =
        state === 'reconnecting'
          ? 'Reconnecting to live updates'
          : state === 'unavailable'
            ? 'Live updates unavailable'
            : 'Live updates paused';
      text.replaceChildren(
        h('strong', title),
        ' ',
        detail || '',
        state === 'reconnecting' && (secs === null || secs === 0)
          ? h('span.muted', ' Trying now…')
          : secs !== null && secs > 0
            ? h('span.muted', ` Next try in ${secs} s.`)
            : null,
      );
    };
    paint();
    countdown = setInterval(paint, 1000);
    clear(liveBar).append(
      h('span.pulse'),
      text,
      h('button.ghost.small', { type: 'button', onclick: () => app.live.retryNow(), dataset: { testid: 'live-retry' } }, 'Retry now'),
    );
  }

  const onNewPosts = () => renderBanner();
  const onLive = (e) => renderLive(e.detail);
  app.addEventListener('new-posts', onNewPosts);
  app.live.addEventListener('status', onLive);

  // ------------------------------------------------------------------ meta

  const notice = h('div.notices');
  const meta = h('div.feed-meta', { dataset: { testid: 'feed-meta' } });

  function renderMeta() {
    clear(notice);
    if (unavailable) {
      notice.append(
        h(
          'div.card.unavailable',
          { dataset: { testid: 'feed-unavailable' } },
          h('strong', unavailable.title),
          h('p', 'This server does not serve the home feed yet (its schema has no ', h('code', 'feed'), ' query).'),
          h(
            'p.muted',
            'Everything else works: post, open ',
            h('a', { href: `#/u/${encodeURIComponent(app.viewer.handle)}` }, 'your profile'),
            ' or anyone’s, follow, like and comment.',
          ),
          h('button.ghost.small', { type: 'button', onclick: () => list.reset() }, 'Try again'),
        ),
      );
    }
    if (degraded) {
      notice.append(
        h(
          'div.card.degraded',
          { dataset: { testid: 'feed-degraded' } },
          h('strong', 'Degraded mode. '),
          'The server answered from a fallback path (ranking timed out, or the timeline store is unavailable): the order or freshness may be off. Nothing you may not see is ever shown.',
        ),
      );
    }
    const bits = [
      h('span', `${MODES[mode]} feed`),
      list.pages ? h('span', plural(list.pages, 'page')) : null,
      list.pages ? h('span', plural(list.count, 'post')) : null,
      sessionId ? h('span', { title: `Feed session ${sessionId}` }, `session ${String(sessionId).slice(0, 8)}`) : null,
      list.duplicates ? h('span.warn', `${list.duplicates} repeated dropped`) : null,
    ];
    meta.replaceChildren(...bits.filter(Boolean));
    meta.hidden = Boolean(unavailable);
    meta.dataset.pages = String(list.pages);
  }

  const compose = composer(app, {
    onPosted: (post) => {
      if (!unavailable) list.prepend(post);
      renderMeta();
    },
  });

  const el = h(
    'section.home',
    compose,
    toolbar,
    liveBar,
    h('div.banner-slot', banner),
    notice,
    list.el,
    meta,
  );

  syncModes();
  renderBanner();
  renderLive(app.live.status);
  loadSettings();
  list.reset();

  return {
    viewerId: app.viewer.id,
    el,
    title: 'Home',
    mount() {
      list.attach();
      renderBanner();
      requestAnimationFrame(() => window.scrollTo({ top: scrollY }));
    },
    unmount() {
      scrollY = window.scrollY;
      list.detach();
    },
    destroy() {
      list.detach();
      clearInterval(countdown);
      app.removeEventListener('new-posts', onNewPosts);
      app.live.removeEventListener('status', onLive);
    },
  };
}
