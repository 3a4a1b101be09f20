// An infinitely scrolling list over a GraphQL connection (edges + pageInfo): posts by default,
// or anything else with an `id` given `renderItem` (the follower lists of a user page).
// The cursor is opaque: we only ever hand back the server's endCursor. A page that repeats a
// post already shown is not trusted blindly: the repeat is dropped and counted, visibly.
//
// Refreshing with `showNew` puts the new posts on top, marked "New", whatever rank the server
// gives them: that is what the reader asked for by clicking "N new posts". Only the order on
// screen changes: the next pages still come from the server's endCursor, and a post shown on
// top ahead of its own page is skipped (silently) when that page arrives.

import { clear, h } from './dom.js';
import { postCard } from './post.js';

const PREFETCH_PX = 900; // start loading the next page this far below the viewport

export class PagedList {
  /**
   * fetchPage(after, signal) -> {edges, pageInfo, ...extra}
   * onError(err, {first}) -> true when handled (the list then shows nothing more about it)
   * renderItem(node) -> HTMLElement, for lists of something else than posts
   */
  constructor(app, { fetchPage, onPage = () => {}, onError = () => false, empty = 'Nothing here yet.', testid = 'list', renderItem = null, listClass = 'posts', feedback = false }) {
    this.app = app;
    this.feedback = feedback; // the home feed: each card offers Hide and Mute (decision 0076)
    this.renderItem = renderItem;
    this.fetchPage = fetchPage;
    this.onPage = onPage;
    this.onError = onError;
    this.emptyText = empty;
    this.ids = new Set();
    this.newestMs = 0; // createdAt of the newest post a server page brought (not own posts made here)
    this.lifted = new Set(); // shown on top before the (later) page the server ranks them on
    this.endCursor = null;
    this.hasNextPage = false;
    this.pages = 0;
    this.duplicates = 0;
    this.loading = false;
    this.failed = null;
    this.generation = 0;
    this.abort = null;
    this.list = h(`ol.${listClass}`, { dataset: { testid } });
    this.footer = h('div.list-footer', { dataset: { testid: `${testid}-footer` } });
    this.sentinel = h('div.sentinel', { 'aria-hidden': 'true' });
    this.el = h('div.paged', this.list, this.sentinel, this.footer);
    this.observer = new IntersectionObserver((entries) => {
      if (entries.some((e) => e.isIntersecting)) this.more();
    }, { rootMargin: `0px 0px ${PREFETCH_PX}px 0px` });
  }

  attach() {
    this.observer.observe(this.sentinel);
  }

  detach() {
    this.observer.disconnect();
  }

  get count() {
    return this.ids.size;
  }

  /**
   * Load the first page again. With `showNew`, posts newer than every post a page brought
   * before (and not on screen) go on top, newest first, marked new. `moreNew(found, signal)`
   * may return further candidates for the top, for new posts the first page does not hold
   * (the ranking put them lower); only the new ones among them are used.
   */
  async reset({ showNew = false, moreNew = null } = {}) {
    const before = showNew && this.pages > 0 ? { ids: new Set(this.ids), newest: this.newestMs } : null;
    this.abort?.abort();
    const generation = ++this.generation;
    this.loading = true;
    this.failed = null;
    this.renderFooter();
    const abort = (this.abort = new AbortController());
    try {
      const page = await this.fetchPage(null, abort.signal);
      if (generation !== this.generation) return;
      let top = [];
      let extra = [];
      if (before) {
        const isNew = (node) => !before.ids.has(node.id) && createdMs(node) > before.newest;
        const onPage = page.edges.map((e) => e.node).filter(isNew);
        if (moreNew) {
          const pageIds = new Set(page.edges.map((e) => e.node.id));
          extra = (await this.quietly(() => moreNew(onPage.length, abort.signal))) || [];
          if (generation !== this.generation) return;
          extra = extra.filter((node) => isNew(node) && !pageIds.has(node.id));
        }
        top = [...onPage, ...extra].sort((a, b) => createdMs(b) - createdMs(a) || compareIds(b.id, a.id));
      }
      clear(this.list);
      this.ids.clear();
      this.lifted = new Set(extra.map((node) => node.id));
      this.newestMs = 0;
      this.pages = 0;
      this.duplicates = 0;
      this.accept(page, top);
    } catch (err) {
      if (generation !== this.generation || err?.name === 'AbortError') return;
      this.fail(err, true);
    } finally {
      if (generation === this.generation) {
        this.loading = false;
        this.renderFooter();
        this.checkSentinel();
      }
    }
  }

  async more() {
    if (this.loading || !this.hasNextPage || this.failed) return;
    const generation = this.generation;
    this.loading = true;
    this.renderFooter();
    const abort = (this.abort = new AbortController());
    try {
      const page = await this.fetchPage(this.endCursor, abort.signal);
      if (generation !== this.generation) return;
      this.accept(page);
    } catch (err) {
      if (generation !== this.generation || err?.name === 'AbortError') return;
      this.fail(err, false);
    } finally {
      if (generation === this.generation) {
        this.loading = false;
        this.renderFooter();
        this.checkSentinel();
      }
    }
  }

  /** A page from the server; `top` (new posts) goes first, before the page's own order. */
  accept(page, top = []) {
    this.pages += 1;
    this.endCursor = page.pageInfo.endCursor;
    this.hasNextPage = Boolean(page.pageInfo.hasNextPage && page.pageInfo.endCursor);
    const onTop = new Set(top.map((node) => node.id));
    for (const node of top) this.add(node, { fresh: true, isNew: true });
    for (const { node } of page.edges) {
      if (onTop.has(node.id)) continue; // shown above, as new
      if (this.lifted.delete(node.id)) continue; // shown on top already (the new posts)
      if (this.ids.has(node.id)) {
        this.duplicates += 1;
        continue;
      }
      this.add(node);
    }
    this.onPage(page, this);
  }

  add(node, options) {
    this.ids.add(node.id);
    this.newestMs = Math.max(this.newestMs, createdMs(node) || 0);
    this.list.append(h('li', this.card(node, options)));
  }

  /** An optional extra read: its failure costs only the extra (the page itself is fine). */
  async quietly(read) {
    try {
      return await read();
    } catch (err) {
      if (err?.name === 'AbortError') throw err;
      return null;
    }
  }

  card(post, { fresh = false, isNew = false } = {}) {
    if (this.renderItem) return this.renderItem(post);
    return postCard(post, this.app, {
      fresh,
      isNew,
      feedback: this.feedback,
      onMute: (handle) => {
        // A mute takes every post of that author out of the list at once, as the server's
        // next pages leave them out.
        for (const card of this.list.querySelectorAll(`article.post[data-author="${CSS.escape(handle)}"]`)) {
          this.ids.delete(card.dataset.postId);
          card.closest('li')?.remove();
        }
        this.renderFooter();
      },
      onRemove: (p) => {
        this.ids.delete(p.id);
        setTimeout(() => this.renderFooter(), 450);
      },
    });
  }

  /** A post made here: show it at the top at once (read-your-writes). */
  prepend(post) {
    if (this.ids.has(post.id)) return;
    this.ids.add(post.id);
    this.list.prepend(h('li', this.card(post, { fresh: true })));
    this.renderFooter();
  }

  fail(err, first) {
    if (this.onError(err, { first })) return;
    this.failed = err;
    if (!first) this.app.report(err);
  }

  checkSentinel() {
    // The observer only fires on changes; if the sentinel is still in range, keep going.
    requestAnimationFrame(() => {
      if (!this.sentinel.isConnected || this.loading || !this.hasNextPage) return;
      const top = this.sentinel.getBoundingClientRect().top;
      if (top < window.innerHeight + PREFETCH_PX) this.more();
    });
  }

  renderFooter() {
    clear(this.footer);
    this.footer.dataset.pages = String(this.pages);
    this.footer.dataset.count = String(this.count);
    this.footer.dataset.hasNext = String(this.hasNextPage);
    this.footer.dataset.state = this.loading ? 'loading' : this.failed ? 'error' : this.hasNextPage ? 'more' : 'end';
    if (this.loading) {
      this.footer.append(h('div.spinner', { role: 'status', 'aria-label': 'Loading' }), h('span.muted', 'Loading…'));
      return;
    }
    if (this.failed) {
      const err = this.failed;
      this.footer.append(
        h(
          'div.list-error',
          { role: 'alert', dataset: { testid: 'list-error', code: err.code || '' } },
          h('strong', err.title || 'Error'),
          h('p', err.message),
          err.hint ? h('p.muted', err.hint) : null,
          h('button.ghost', { type: 'button', onclick: () => (this.pages ? this.retryMore() : this.reset()) }, 'Try again'),
        ),
      );
      return;
    }
    if (this.hasNextPage) {
      this.footer.append(h('button.ghost.load-more', { type: 'button', onclick: () => this.more() }, 'Load more'));
      return;
    }
    if (this.count === 0 && this.pages > 0) {
      this.footer.append(h('div.empty', this.emptyText));
      return;
    }
    if (this.pages > 0) this.footer.append(h('div.end', { dataset: { testid: 'end-of-list' } }, 'You’re all caught up.'));
  }

  retryMore() {
    this.failed = null;
    this.more();
  }
}

function createdMs(post) {
  return Date.parse(post.createdAt);
}

/** Post ids are decimal strings of 64-bit integers (time-ordered): compare them as such. */
function compareIds(a, b) {
  const x = String(a);
  const y = String(b);
  return x.length - y.length || (x < y ? -1 : x > y ? 1 : 0);
}
