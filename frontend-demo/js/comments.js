// The comments under one post: PostComments page by page (oldest first, "more comments"),
// AddComment, and DeleteComment for the comment's author or the post's author.
//
// The thread owns one DOM node that survives the card's re-renders (so a half-typed comment
// is not lost when a like re-renders the card). The card's count follows the server: each
// page brings `commentCount`, and an add or delete moves it by one in between.

import { avatar, clear, fullDate, h, timeAgo, uuid } from './dom.js';

export const COMMENTS_PAGE = 10;
const MAX_COMMENT = 500;

/**
 * commentThread(post, app, {setCount, gone}) -> {el, open(), focus()}
 * setCount(n): the post's comment count changed; gone(err): the post is deleted or hidden.
 */
export function commentThread(post, app, { setCount, gone }) {
  const loaded = []; // from the server's pages, oldest first
  let added = []; // made here, not yet reached by paging (shown after the loaded ones)
  const ids = new Set();
  let endCursor = null;
  let hasNextPage = false;
  let started = false;
  let loading = false;
  let sending = false;
  // Kept until a comment succeeds, as the compose box's: a retry after a lost answer
  // returns the first comment instead of adding a second one.
  let idempotencyKey = null;
  let failed = null;
  let count = post.commentCount;
  const deleting = new Set();

  const list = h('ol.comment-list', { dataset: { testid: 'comments' } });
  const footer = h('div.comments-footer');
  const input = h('input', {
    type: 'text',
    maxlength: MAX_COMMENT,
    placeholder: 'Write a comment…',
    'aria-label': 'Comment',
    dataset: { testid: 'comment-input' },
  });
  const send = h('button.primary.small', { type: 'submit', dataset: { testid: 'comment-send' } }, 'Reply');
  const form = h('form.comment-form', { onsubmit: submit }, input, send);
  const el = h('section.comments', { dataset: { testid: 'comment-thread' } }, list, footer, form);

  const mayDelete = (comment) =>
    app.viewer &&
    (String(comment.author.id) === String(app.viewer.id) || String(post.author.id) === String(app.viewer.id));

  function changeCount(n) {
    count = Math.max(0, n);
    setCount(count);
  }

  async function loadPage() {
    if (loading) return;
    loading = true;
    failed = null;
    render();
    try {
      const data = await app.call('PostComments', { id: post.id, first: COMMENTS_PAGE, after: endCursor });
      if (!data.post) {
        gone();
        return;
      }
      const page = data.post.comments;
      for (const { node } of page.edges) {
        if (ids.has(node.id) && !added.some((c) => c.id === node.id)) continue; // a repeat
        ids.add(node.id);
        added = added.filter((c) => c.id !== node.id); // reached by paging: now in its place
        loaded.push(node);
      }
      endCursor = page.pageInfo.endCursor || endCursor;
      hasNextPage = Boolean(page.pageInfo.hasNextPage && page.pageInfo.endCursor);
      changeCount(data.post.commentCount);
    } catch (err) {
      if (err.code === 'NOT_FOUND') {
        app.report(err, 'This post was deleted or is no longer visible to you.');
        gone();
        return;
      }
      failed = err;
      app.report(err);
    } finally {
      loading = false;
      render();
    }
  }

  async function submit(e) {
    e.preventDefault();
    const text = input.value.trim();
    if (!text || sending) return;
    sending = true;
    render();
    try {
      idempotencyKey ||= uuid();
      const data = await app.call('AddComment', { postId: post.id, body: text, idempotencyKey });
      idempotencyKey = null;
      const comment = data.addComment;
      if (!ids.has(comment.id)) {
        ids.add(comment.id);
        if (hasNextPage) added.push(comment);
        else loaded.push(comment);
        changeCount(count + 1);
      }
      input.value = '';
    } catch (err) {
      if (err.code === 'NOT_FOUND') {
        app.report(err, 'This post was deleted or is no longer visible to you.');
        gone();
        return;
      }
      app.report(err);
    } finally {
      sending = false;
      render();
      input.focus();
    }
  }

  async function remove(comment) {
    if (deleting.has(comment.id)) return;
    deleting.add(comment.id);
    render();
    try {
      await app.call('DeleteComment', { id: comment.id });
      drop(comment);
      changeCount(count - 1);
      app.toast('Comment deleted.');
    } catch (err) {
      if (err.code === 'NOT_FOUND') {
        drop(comment); // deleted already (or no longer visible): the server count says which
        app.report(err, 'That comment is gone already.');
        refreshCount();
      } else {
        app.report(err);
      }
    } finally {
      deleting.delete(comment.id);
      render();
    }
  }

  function drop(comment) {
    const i = loaded.findIndex((c) => c.id === comment.id);
    if (i >= 0) loaded.splice(i, 1);
    added = added.filter((c) => c.id !== comment.id);
  }

  async function refreshCount() {
    try {
      const data = await app.call('PostComments', { id: post.id, first: 1 });
      if (data.post) changeCount(data.post.commentCount);
    } catch {
      // the count stays as it was; the next page corrects it
    }
  }

  function item(comment) {
    const name = comment.author.displayName || comment.author.handle;
    return h(
      'li.comment-entry',
      { dataset: { testid: 'comment-item', commentId: comment.id, author: comment.author.handle } },
      avatar(comment.author, 'small'),
      h(
        'div.comment-main',
        h(
          'div.comment-meta',
          h('a.author', { href: `#/u/${encodeURIComponent(comment.author.handle)}` }, h('span.name', name), h('span.handle', `@${comment.author.handle}`)),
          h('span.dot', '·'),
          h('time', { datetime: comment.createdAt, title: fullDate(comment.createdAt) }, timeAgo(comment.createdAt)),
          mayDelete(comment)
            ? h(
                'button.link-button.comment-delete',
                {
                  type: 'button',
                  disabled: deleting.has(comment.id),
                  'aria-label': `Delete comment by @${comment.author.handle}`,
                  dataset: { testid: 'comment-delete' },
                  onclick: () => remove(comment),
                },
                'Delete',
              )
            : null,
        ),
        h('p.comment-body', { dataset: { testid: 'comment-body' } }, comment.body),
      ),
    );
  }

  function render() {
    clear(list);
    for (const comment of [...loaded, ...added]) list.append(item(comment));
    clear(footer);
    footer.dataset.state = loading ? 'loading' : failed ? 'error' : hasNextPage ? 'more' : 'end';
    if (loading) {
      footer.append(h('div.spinner.small', { role: 'status', 'aria-label': 'Loading comments' }));
    } else if (failed) {
      footer.append(h('button.link-button', { type: 'button', onclick: loadPage }, 'Could not load the comments. Try again'));
    } else if (hasNextPage) {
      footer.append(h('button.link-button', { type: 'button', dataset: { testid: 'comments-more' }, onclick: loadPage }, 'more comments'));
    } else if (!loaded.length && !added.length) {
      footer.append(h('span.muted', 'No comments yet. Be the first.'));
    }
    send.disabled = sending;
    input.disabled = sending;
  }

  render();
  return {
    el,
    /** The first page, once: the thread keeps what it has on later opens. */
    open() {
      if (!started) {
        started = true;
        loadPage();
      }
    },
    focus() {
      input.focus();
    },
    /** The card learnt a new count from elsewhere (a Post returned by a like, say). */
    syncCount(n) {
      count = n;
    },
  };
}
