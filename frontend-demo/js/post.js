// One post card: author, body, images, counts, like/comment, and for the author edit,
// visibility and delete. The card owns its DOM node and re-renders in place from each Post the
// API returns (its images are kept across renders while they are the same images).

import { ApiError } from './api.js';
import { commentThread } from './comments.js';
import { avatar, clear, fullDate, h, icon, timeAgo } from './dom.js';
import { mediaGrid, mediaSignature } from './media.js';

export const VISIBILITY = {
  PUBLIC: { label: 'Public', icon: 'globe', hint: 'Everyone can see it' },
  FOLLOWERS: { label: 'Followers', icon: 'users', hint: 'Only your followers' },
  PRIVATE: { label: 'Only me', icon: 'lock', hint: 'Only you' },
};

export const MAX_BODY = 500;

/**
 * postCard(post, app, {onRemove, fresh, isNew, feedback, onMute}) -> HTMLElement
 * `app` provides viewer, call(operation, variables) and report(error). `fresh` flashes the
 * card once; `isNew` marks it "New" (a post that arrived since the feed was last read).
 * `feedback` (the home feed): others' posts get "Hide" (hidePost) and "Mute @author"
 * (muteAuthor); `onMute(handle)` is told after a mute, to drop that author's other cards.
 * A post the RANKED feed recommends (`post.recommended`: the edge's `recommendation`, set by
 * the home view from FeedWithReasons) shows "Recommended · Liked by @x and 2 others" and
 * "Show fewer like this" (showFewerLikeThis, decision 0079).
 */
export function postCard(initial, app, { onRemove = () => {}, fresh = false, isNew = false, feedback = false, onMute = () => {} } = {}) {
  let post = initial;
  const recommended = initial.recommended ?? null; // kept: server answers (likes, edits) lack it
  let mode = 'view'; // view | edit | confirm-delete
  let menuOpen = false;
  let commenting = false;
  let thread = null; // made on the first open, kept (with what it loaded) afterwards
  let busy = false;
  let mediaEl = null; // the images' grid, rebuilt only when the images change
  let mediaSig = null;
  let mediaRetried = false;
  const root = h('article.post', {
    dataset: { postId: post.id, testid: 'post', author: post.author.handle },
  });
  if (fresh) root.classList.add('fresh');
  if (recommended) {
    root.classList.add('recommended');
    root.dataset.reason = 'RECOMMENDED';
  }
  if (isNew) {
    root.classList.add('new');
    root.dataset.new = 'true';
  }

  const mine = () => app.viewer && String(app.viewer.id) === String(post.author.id);

  async function run(operation, variables, apply) {
    if (busy) return false;
    busy = true;
    root.classList.add('busy');
    try {
      const data = await app.call(operation, variables);
      apply(data);
      return true;
    } catch (err) {
      if (err.code === 'NOT_FOUND') {
        app.report(err, 'This post was deleted or is no longer visible to you.');
        remove();
      } else {
        app.report(err);
      }
      return false;
    } finally {
      busy = false;
      root.classList.remove('busy');
      render();
    }
  }

  function remove() {
    const node = root.parentElement?.tagName === 'LI' ? root.parentElement : root;
    root.classList.add('removing');
    root.addEventListener('transitionend', () => node.remove(), { once: true });
    setTimeout(() => node.remove(), 400); // in case no transition runs
    onRemove(post);
  }

  // Likes are optimistic and never drop a click: the card shows the state you asked for at
  // once, and one request at a time walks the server there (a quick like-unlike-like sends
  // what is still needed when the previous answer arrives).
  let wantLiked = null;
  let liking = false;
  let beforeLikes = post;

  async function toggleLike() {
    if (!liking) beforeLikes = post;
    const target = !(wantLiked ?? post.viewerHasLiked);
    if (target !== post.viewerHasLiked) {
      post = { ...post, viewerHasLiked: target, likeCount: Math.max(0, post.likeCount + (target ? 1 : -1)) };
    }
    wantLiked = target;
    render();
    if (liking) return;
    liking = true;
    let confirmed = null;
    try {
      while (wantLiked !== null && wantLiked !== confirmed?.viewerHasLiked) {
        const goal = wantLiked;
        const data = await app.call(goal ? 'LikePost' : 'UnlikePost', { id: post.id });
        confirmed = data.likePost || data.unlikePost;
        if (wantLiked === goal) break;
      }
      if (confirmed) post = confirmed;
    } catch (err) {
      if (err.code === 'NOT_FOUND') {
        app.report(err, 'This post was deleted or is no longer visible to you.');
        remove();
      } else {
        app.report(err);
        post = confirmed ?? beforeLikes; // what the server last said, or the state before
      }
    } finally {
      wantLiked = null;
      liking = false;
      render();
    }
  }

  function outside(e) {
    if (!root.contains(e.target)) closeMenu();
  }

  function openMenu() {
    menuOpen = true;
    document.addEventListener('click', outside, true);
    render();
  }

  function closeMenu() {
    menuOpen = false;
    document.removeEventListener('click', outside, true);
    render();
  }

  function header() {
    const vis = VISIBILITY[post.visibility] || VISIBILITY.PUBLIC;
    const bits = [
      h(
        'a.author',
        { href: `#/u/${encodeURIComponent(post.author.handle)}` },
        h('span.name', post.author.displayName || post.author.handle),
        h('span.handle', `@${post.author.handle}`),
      ),
      post.author.fanoutMode === 'PULL'
        ? h('span.badge.pull', { title: 'Pull-mode author: read at feed time, not fanned out' }, 'PULL')
        : null,
      isNew ? h('span.badge.new', { title: 'Posted since you last refreshed', dataset: { testid: 'post-new' } }, 'New') : null,
      h('span.dot', '·'),
      h('time', { datetime: post.createdAt, title: fullDate(post.createdAt) }, timeAgo(post.createdAt)),
      post.editedAt ? h('span.edited', { title: `Edited ${fullDate(post.editedAt)}` }, '· edited') : null,
      post.visibility !== 'PUBLIC'
        ? h('span.vis', { title: vis.hint, dataset: { testid: 'post-visibility' } }, icon(vis.icon), vis.label)
        : null,
    ];
    const menu = mine()
      ? h(
          'div.menu',
          h(
            'button.icon-button',
            {
              type: 'button',
              'aria-label': 'Post actions',
              'aria-expanded': String(menuOpen),
              dataset: { testid: 'post-menu' },
              onclick: () => (menuOpen ? closeMenu() : openMenu()),
            },
            icon('more'),
          ),
          menuOpen ? menuItems() : null,
        )
      : null;
    return h('header.post-head', h('div.meta', bits), menu);
  }

  // Why a recommended post is here: the server's text, its @handles linked to the likers'
  // profiles (only handles the server listed in likedBy become links).
  function why() {
    if (!recommended) return null;
    const handles = new Set((recommended.likedBy || []).map((u) => u.handle));
    const text = recommended.text || 'Suggested for you';
    const parts = text.split(/(@[A-Za-z0-9_]+)/).map((part) =>
      part.startsWith('@') && handles.has(part.slice(1))
        ? h('a', { href: `#/u/${encodeURIComponent(part.slice(1))}` }, part)
        : part,
    );
    return h(
      'div.why',
      { dataset: { testid: 'post-recommendation' }, title: 'Not from someone you follow: the feed recommends it' },
      h('strong', 'Recommended'),
      ' · ',
      h('span', { dataset: { testid: 'post-recommendation-text' } }, parts),
    );
  }

  function menuItems() {
    const close = () => {
      menuOpen = false;
      document.removeEventListener('click', outside, true);
    };
    return h(
      'div.menu-items',
      { role: 'menu' },
      h(
        'button',
        {
          type: 'button',
          role: 'menuitem',
          dataset: { testid: 'post-edit' },
          onclick: () => {
            close();
            mode = 'edit';
            render();
            root.querySelector('textarea')?.focus();
          },
        },
        'Edit',
      ),
      h('div.menu-label', 'Who can see it'),
      Object.entries(VISIBILITY).map(([value, v]) =>
        h(
          'button',
          {
            type: 'button',
            role: 'menuitemradio',
            'aria-checked': String(post.visibility === value),
            dataset: { testid: `post-visibility-${value.toLowerCase()}` },
            onclick: () => {
              close();
              if (value === post.visibility) return render();
              run('SetPostVisibility', { id: post.id, visibility: value }, (data) => {
                post = data.setPostVisibility;
                app.toast(`Now visible to: ${VISIBILITY[value].label.toLowerCase()}.`);
              });
            },
          },
          icon(v.icon),
          v.label,
        ),
      ),
      h(
        'button.danger',
        {
          type: 'button',
          role: 'menuitem',
          dataset: { testid: 'post-delete' },
          onclick: () => {
            close();
            mode = 'confirm-delete';
            render();
          },
        },
        'Delete…',
      ),
    );
  }

  function body() {
    if (mode === 'edit') {
      const area = h('textarea', { maxlength: MAX_BODY, rows: 3, 'aria-label': 'Edit post' });
      area.value = post.body;
      const save = () => {
        const text = area.value.trim();
        if (!text && !post.media?.length) {
          return app.report(new ApiError('BAD_USER_INPUT', 'A post cannot be empty.'));
        }
        run('EditPost', { id: post.id, body: text }, (data) => {
          post = data.editPost;
          mode = 'view';
        });
      };
      area.addEventListener('keydown', (e) => {
        if (e.key === 'Enter' && (e.metaKey || e.ctrlKey)) save();
        if (e.key === 'Escape') {
          mode = 'view';
          render();
        }
      });
      return h(
        'div.edit',
        area,
        h(
          'div.row-end',
          h('button.ghost', { type: 'button', onclick: () => ((mode = 'view'), render()) }, 'Cancel'),
          h('button.primary', { type: 'button', dataset: { testid: 'post-save' }, onclick: save }, 'Save'),
        ),
      );
    }
    if (!post.body && post.media?.length) return null; // an image post without text
    return h('p.body', { dataset: { testid: 'post-body' } }, post.body);
  }

  // The same images keep their <img> nodes across renders (a like re-renders the card, and
  // its answer's URLs carry new signatures: reloading them would flash).
  function images() {
    const sig = mediaSignature(post.media);
    if (sig !== mediaSig) {
      mediaSig = sig;
      mediaEl = mediaGrid(post.media, { onBroken: reloadImages });
    }
    return mediaEl;
  }

  // An image failed to load: its signed URL may have expired (a FOLLOWERS post's live a few
  // minutes). Ask for the post again, once, for freshly minted URLs.
  async function reloadImages() {
    if (mediaRetried) return;
    mediaRetried = true;
    try {
      const data = await app.call('Post', { id: post.id });
      if (!data.post) return;
      post = { ...post, media: data.post.media };
      const fresh = mediaGrid(post.media, { onBroken: () => {} });
      mediaSig = mediaSignature(post.media);
      if (mediaEl && fresh) mediaEl.replaceWith(fresh);
      mediaEl = fresh;
    } catch {
      // Gone or not visible any more: the card stays as it was; the next action says why.
    }
  }

  function confirmDelete() {
    if (mode !== 'confirm-delete') return null;
    return h(
      'div.confirm',
      { role: 'alertdialog' },
      h('span', 'Delete this post? It disappears from every feed at once.'),
      h('button.ghost', { type: 'button', onclick: () => ((mode = 'view'), render()) }, 'Cancel'),
      h(
        'button.danger-solid',
        {
          type: 'button',
          dataset: { testid: 'post-delete-confirm' },
          onclick: () =>
            run('DeletePost', { id: post.id }, () => {
              mode = 'view';
              app.toast('Post deleted.');
              remove();
            }),
        },
        'Delete',
      ),
    );
  }

  function actions() {
    return h(
      'footer.actions',
      h(
        'button.action.like',
        {
          type: 'button',
          'aria-pressed': String(post.viewerHasLiked),
          'aria-label': post.viewerHasLiked ? 'Unlike' : 'Like',
          dataset: { testid: 'like' },
          onclick: toggleLike,
        },
        icon('heart'),
        h('span.count', { dataset: { testid: 'like-count' } }, String(post.likeCount)),
      ),
      h(
        'button.action.comment',
        {
          type: 'button',
          'aria-expanded': String(commenting),
          'aria-label': commenting ? 'Hide comments' : 'Show comments',
          dataset: { testid: 'comment' },
          onclick: () => {
            commenting = !commenting;
            render();
            if (commenting) {
              thread.open();
              thread.focus();
            }
          },
        },
        icon('comment'),
        h('span.count', { dataset: { testid: 'comment-count' } }, String(post.commentCount)),
        h('span.count-label', post.commentCount === 1 ? 'comment' : 'comments'),
      ),
      feedback && app.viewer && !mine() ? feedbackActions() : null,
    );
  }

  // Negative feedback (decision 0076): gone from this feed at once, and from its next pages
  // and the live count on the server's side; the profile still shows the post.
  function feedbackActions() {
    const handle = post.author.handle;
    return h(
      'span.feedback',
      recommended
        ? h(
            'button.action.fewer',
            {
              type: 'button',
              title: 'Fewer recommendations like this one (and this post leaves your feed)',
              dataset: { testid: 'post-show-fewer' },
              onclick: () =>
                run('ShowFewerLikeThis', { postId: post.id }, () => {
                  app.toast('You will see fewer posts like this.');
                  remove();
                }),
            },
            'Show fewer like this',
          )
        : null,
      h(
        'button.action.hide',
        {
          type: 'button',
          title: 'Hide this post from your feed',
          dataset: { testid: 'post-hide' },
          onclick: () =>
            run('HidePost', { id: post.id }, () => {
              app.toast('Post hidden from your feed.');
              remove();
            }),
        },
        'Hide',
      ),
      h(
        'button.action.mute',
        {
          type: 'button',
          title: `Stop seeing @${handle}'s posts in your feed (they are not told)`,
          dataset: { testid: 'post-mute' },
          onclick: () =>
            run('MuteAuthor', { handle }, () => {
              app.toast(`Muted @${handle}: their posts leave your feed.`);
              onMute(handle);
            }),
        },
        `Mute @${handle}`,
      ),
    );
  }

  function comments() {
    if (!commenting) return null;
    thread ??= commentThread(post, app, {
      setCount: (n) => {
        post = { ...post, commentCount: n };
        const count = root.querySelector('[data-testid="comment-count"]');
        if (count) count.textContent = String(n);
        const label = root.querySelector('.action.comment .count-label');
        if (label) label.textContent = n === 1 ? 'comment' : 'comments';
      },
      gone: () => remove(),
    });
    thread.syncCount(post.commentCount);
    return thread.el;
  }

  function render() {
    clear(root);
    root.dataset.postId = post.id;
    root.append(
      avatar(post.author),
      h('div.post-main', why(), header(), body(), images(), confirmDelete(), actions(), comments()),
    );
  }

  render();
  return root;
}
