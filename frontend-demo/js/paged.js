// An infinitely scrolling list of posts over a GraphQL connection (edges + pageInfo).
// The cursor is opaque: we only ever hand back the server's endCursor. A page that repeats a
// post already shown is not trusted blindly: the repeat is dropped and counted, visibly.

import { clear, h } from './dom.js';
import { postCard } from './post.js';

const PREFETCH_PX = 900; // start loading the next page this far below the viewport

export class PagedList {
  /**
   * fetchPage(after, signal) -> {edges, pageInfo, ...extra}
   * onError(err, {first}) -> true when handled (the list then shows nothing more about it)
   */
  constructor(app, { fetchPage, onPage = () => {}, onError = () => false, empty = 'Nothing here yet.', testid = 'list' }) {
    this.app = app;
    this.fetchPage = fetchPage;
    this.onPage = onPage;
    this.onError = onError;
    this.emptyText = empty;
    this.ids = new Set();
    this.endCursor = null;
    this.hasNextPage = false;
    this.pages = 0;
    this.duplicates = 0;
    this.loading = false;
    this.failed = null;
    this.generation = 0;
    this.abort = null;
    this.list = h('ol.posts', { dataset: { testid } });
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

  /** Load the first page again; `highlight` marks posts that were not shown before. */
  async reset({ highlight = false } = {}) {
    const previous = highlight ? new Set(this.ids) : null;
    this.abort?.abort();
    const generation = ++this.generation;
    this.loading = true;
    this.failed = null;
    this.renderFooter();
    const abort = (this.abort = new AbortController());
    try {
      const page = await this.fetchPage(null, abort.signal);
      if (generation !== this.generation) return;
      clear(this.list);
      this.ids.clear();
      this.pages = 0;
      this.duplicates = 0;
      this.accept(page, previous);
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
      this.accept(page, null);
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

  accept(page, previous) {
    this.pages += 1;
    this.endCursor = page.pageInfo.endCursor;
    this.hasNextPage = Boolean(page.pageInfo.hasNextPage && page.pageInfo.endCursor);
    for (const { node } of page.edges) {
      if (this.ids.has(node.id)) {
        this.duplicates += 1;
        continue;
      }
      this.ids.add(node.id);
      const fresh = previous !== null && !previous.has(node.id);
      this.list.append(h('li', this.card(node, fresh)));
    }
    this.onPage(page, this);
  }

  card(post, fresh = false) {
    return postCard(post, this.app, {
      fresh,
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
    this.list.prepend(h('li', this.card(post, true)));
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
