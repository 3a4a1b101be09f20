// A user's page: profile, fan-out mode badge, follow/unfollow/block, and their posts.

import { ApiError } from '../api.js';
import { composer } from '../compose.js';
import { avatar, clear, h } from '../dom.js';
import { PagedList } from '../paged.js';

const FANOUT = {
  PUSH: {
    label: 'PUSH',
    text: 'Fan-out on write: each new post is written into the home timeline of every active follower.',
  },
  PULL: {
    label: 'PULL',
    text: 'Fan-out on read: this account has so many followers that its posts are not copied into timelines; every reader’s feed pulls them at read time.',
  },
};

// The API has no "viewer blocked this user" field, so the page remembers the blocks it made.
function blockedSet(viewerId) {
  const key = `hybridfeed.blocked.${viewerId}`;
  const set = new Set(JSON.parse(localStorage.getItem(key) || '[]'));
  return {
    has: (handle) => set.has(handle),
    set(handle, on) {
      if (on) set.add(handle);
      else set.delete(handle);
      localStorage.setItem(key, JSON.stringify([...set]));
    },
  };
}

export function userView(app, handle) {
  const blocked = blockedSet(app.viewer.id);
  const header = h('div.profile-slot', h('div.card.profile.skeleton'));
  let user = null;
  let busy = false;
  const isMe = handle === app.viewer.handle;

  const list = new PagedList(app, {
    testid: 'user-posts',
    empty: isMe ? 'You have not posted yet.' : `@${handle} has no posts you can see.`,
    fetchPage: async (after, signal) => {
      const data = await app.call('UserProfile', { handle, first: app.pageSize, after }, { signal });
      if (!data.user) throw new ApiError('NOT_FOUND', `There is no user @${handle}.`);
      if (!after) {
        user = data.user;
        renderProfile();
      }
      return data.user.posts;
    },
    onError: (err, { first }) => {
      if (first && err.code === 'NOT_FOUND') {
        clear(header).append(
          h(
            'div.card.not-found',
            { dataset: { testid: 'user-not-found' } },
            h('strong', 'Not found'),
            h('p', err.message),
            h('a', { href: '#/' }, 'Back to your feed'),
          ),
        );
        return true;
      }
      return false;
    },
  });

  async function act(operation, after) {
    if (busy) return;
    busy = true;
    renderProfile();
    try {
      const data = await app.call(operation, { handle });
      user = Object.values(data)[0];
      after?.();
    } catch (err) {
      app.report(err);
    } finally {
      busy = false;
      renderProfile();
    }
  }

  function renderProfile() {
    if (!user) return;
    const mode = FANOUT[user.fanoutMode] || FANOUT.PUSH;
    const isBlocked = blocked.has(user.handle);
    const buttons = isMe
      ? [h('span.you', 'This is you')]
      : [
          user.viewerFollows
            ? h(
                'button.ghost.following',
                { type: 'button', disabled: busy, dataset: { testid: 'unfollow' }, onclick: () => act('Unfollow') },
                h('span.when-idle', 'Following'),
                h('span.when-hover', 'Unfollow'),
              )
            : h(
                'button.primary',
                { type: 'button', disabled: busy, dataset: { testid: 'follow' }, onclick: () => act('Follow') },
                'Follow',
              ),
          isBlocked
            ? h(
                'button.ghost',
                {
                  type: 'button',
                  disabled: busy,
                  dataset: { testid: 'unblock' },
                  onclick: () =>
                    act('Unblock', () => {
                      blocked.set(user.handle, false);
                      app.toast(`@${user.handle} is unblocked.`);
                    }),
                },
                'Unblock',
              )
            : h(
                'button.danger',
                {
                  type: 'button',
                  disabled: busy,
                  dataset: { testid: 'block' },
                  onclick: () =>
                    act('Block', () => {
                      blocked.set(user.handle, true);
                      app.toast(`@${user.handle} is blocked: neither of you sees the other’s posts.`);
                      list.reset();
                    }),
                },
                'Block',
              ),
        ];
    clear(header).append(
      h(
        'div.card.profile',
        { dataset: { testid: 'profile', handle: user.handle } },
        avatar(user, 'large'),
        h(
          'div.profile-main',
          h(
            'div.profile-title',
            h('h1', user.displayName),
            h(
              `span.badge.mode.${user.fanoutMode.toLowerCase()}`,
              { dataset: { testid: 'fanout-mode', mode: user.fanoutMode }, title: mode.text },
              mode.label,
            ),
            isBlocked ? h('span.badge.blocked', { dataset: { testid: 'blocked-badge' } }, 'Blocked') : null,
          ),
          h('div.handle', `@${user.handle}`),
          h(
            'div.stats',
            h('span', { dataset: { testid: 'follower-count' } }, h('strong', user.followerCount.toLocaleString()), user.followerCount === 1 ? ' follower' : ' followers'),
            h('span', { dataset: { testid: 'following-count' } }, h('strong', user.followingCount.toLocaleString()), ' following'),
          ),
          h('p.fanout-explain', mode.text),
          h('div.profile-actions', buttons),
        ),
      ),
    );
  }

  const el = h(
    'section.user',
    h('a.back', { href: '#/' }, '← Home'),
    header,
    isMe ? composer(app, { onPosted: (post) => list.prepend(post) }) : null,
    h('h2.section-title', isMe ? 'Your posts' : 'Posts'),
    list.el,
  );
  list.reset();

  return {
    el,
    title: `@${handle}`,
    mount() {
      list.attach();
      window.scrollTo({ top: 0 });
    },
    unmount() {
      list.detach();
    },
    destroy() {
      list.detach();
    },
  };
}
