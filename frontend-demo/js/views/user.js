// A user's page: profile, fan-out mode badge, follow/unfollow/block, and three tabs: their
// posts, their followers and whom they follow (#/u/<handle>/followers, /following), each an
// infinitely scrolling list. On your own page you can also change your display name.

import { ApiError } from '../api.js';
import { composer } from '../compose.js';
import { avatar, clear, h, plural } from '../dom.js';
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

const TABS = {
  posts: { label: 'Posts', path: '' },
  followers: { label: 'Followers', path: '/followers' },
  following: { label: 'Following', path: '/following' },
};

/** One row of a follower list: a link to that user's page. */
function personRow(person) {
  return h(
    'div.person',
    { dataset: { testid: 'person', handle: person.handle } },
    avatar(person),
    h(
      'a.person-link',
      { href: `#/u/${encodeURIComponent(person.handle)}`, dataset: { testid: 'person-link' } },
      h('span.name', person.displayName || person.handle),
      h('span.handle', `@${person.handle}`),
    ),
    h('span.person-stats.muted', plural(person.followerCount, 'follower')),
    person.viewerFollows ? h('span.badge.follows', 'Following') : null,
  );
}

export function userView(app, handle, initialTab = '') {
  const blocked = blockedSet(app.viewer.id);
  const header = h('div.profile-slot', h('div.card.profile.skeleton'));
  let user = null;
  let busy = false;
  let editingName = false;
  let draftName = null; // what was typed, kept when the server refuses it
  let tab = TABS[initialTab] ? initialTab : 'posts';
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
        tabBar.hidden = true;
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

  // The follower lists, made when their tab is first shown.
  const people = {};
  function peopleList(which) {
    if (people[which]) return people[which];
    const operation = which === 'followers' ? 'Followers' : 'Following';
    const made = new PagedList(app, {
      testid: which,
      listClass: 'people',
      renderItem: personRow,
      empty:
        which === 'followers'
          ? `${isMe ? 'You have' : `@${handle} has`} no followers you can see yet.`
          : `${isMe ? 'You follow' : `@${handle} follows`} no one you can see yet.`,
      fetchPage: async (after, signal) => {
        const data = await app.call(operation, { handle, first: app.pageSize, after }, { signal });
        if (!data.user) throw new ApiError('NOT_FOUND', `There is no user @${handle}.`);
        return data.user[which];
      },
    });
    made.reset();
    people[which] = made;
    return made;
  }

  const compose = isMe ? composer(app, { onPosted: (post) => list.prepend(post) }) : null; // kept: a draft survives tab switches
  const tabBar = h('nav.profile-tabs', { 'aria-label': 'Profile sections' });
  const tabBody = h('div.tab-body');

  function showTab(name) {
    tab = TABS[name] ? name : 'posts';
    clear(tabBar);
    for (const [key, t] of Object.entries(TABS)) {
      tabBar.append(
        h(
          'a.nav-link.profile-tab',
          {
            href: `#/u/${encodeURIComponent(handle)}${t.path}`,
            'aria-current': key === tab ? 'page' : null,
            dataset: { testid: `tab-${key}` },
          },
          t.label,
        ),
      );
    }
    list.detach();
    Object.values(people).forEach((p) => p.detach());
    clear(tabBody);
    if (tab === 'posts') {
      tabBody.append(compose ?? '', h('h2.section-title', isMe ? 'Your posts' : 'Posts'), list.el);
      if (mounted) list.attach();
    } else {
      const which = peopleList(tab);
      tabBody.append(
        h('h2.section-title', tab === 'followers' ? `Who follows @${handle}` : `Whom @${handle} follows`),
        which.el,
      );
      if (mounted) which.attach();
    }
  }

  async function saveName(value) {
    if (busy) return;
    busy = true;
    draftName = value;
    renderProfile();
    try {
      const data = await app.call('UpdateProfile', { displayName: value });
      draftName = null;
      user = { ...user, ...data.updateProfile };
      app.viewer = { ...app.viewer, displayName: data.updateProfile.displayName };
      editingName = false;
      app.toast(`Your name is now “${data.updateProfile.displayName}”.`);
      app.renderHeader();
      list.reset(); // the cards show the author's name
    } catch (err) {
      app.report(err);
    } finally {
      busy = false;
      renderProfile();
      if (editingName) header.querySelector('[data-testid="display-name-input"]')?.focus();
    }
  }

  function nameEditor() {
    const input = h('input', {
      type: 'text',
      'aria-label': 'Display name',
      disabled: busy,
      dataset: { testid: 'display-name-input' },
    });
    input.value = draftName ?? user.displayName;
    return h(
      'form.name-form',
      {
        onsubmit: (e) => {
          e.preventDefault();
          saveName(input.value);
        },
        onkeydown: (e) => {
          if (e.key === 'Escape') {
            editingName = false;
            draftName = null;
            renderProfile();
          }
        },
      },
      input,
      h('button.primary.small', { type: 'submit', disabled: busy, dataset: { testid: 'display-name-save' } }, 'Save'),
      h(
        'button.ghost.small',
        { type: 'button', onclick: () => ((editingName = false), (draftName = null), renderProfile()) },
        'Cancel',
      ),
    );
  }

  async function act(operation, after) {
    if (busy) return;
    busy = true;
    renderProfile();
    try {
      const data = await app.call(operation, { handle });
      user = Object.values(data)[0];
      after?.();
      people.followers?.reset(); // a follow or unfollow changes this user's followers
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
      ? [
          h('span.you', 'This is you'),
          editingName
            ? null
            : h(
                'button.ghost.small',
                {
                  type: 'button',
                  dataset: { testid: 'edit-name' },
                  onclick: () => {
                    editingName = true;
                    renderProfile();
                    header.querySelector('[data-testid="display-name-input"]')?.select();
                  },
                },
                'Edit name',
              ),
        ]
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
            editingName ? nameEditor() : h('h1', { dataset: { testid: 'profile-name' } }, user.displayName),
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
            h(
              'a',
              { href: `#/u/${encodeURIComponent(user.handle)}/followers`, dataset: { testid: 'follower-count' } },
              h('strong', user.followerCount.toLocaleString()),
              user.followerCount === 1 ? ' follower' : ' followers',
            ),
            h(
              'a',
              { href: `#/u/${encodeURIComponent(user.handle)}/following`, dataset: { testid: 'following-count' } },
              h('strong', user.followingCount.toLocaleString()),
              ' following',
            ),
          ),
          h('p.fanout-explain', mode.text),
          h('div.profile-actions', buttons),
        ),
      ),
    );
  }

  let mounted = false;
  const el = h('section.user', h('a.back', { href: '#/' }, '← Home'), header, tabBar, tabBody);
  list.reset(); // the profile comes with the first page of posts, whichever tab is shown
  showTab(tab);

  const detachAll = () => {
    list.detach();
    Object.values(people).forEach((p) => p.detach());
  };
  return {
    el,
    handle,
    title: `@${handle}`,
    showTab,
    mount() {
      mounted = true;
      showTab(tab);
      window.scrollTo({ top: 0 });
    },
    unmount() {
      mounted = false;
      detachAll();
    },
    destroy() {
      mounted = false;
      detachAll();
    },
  };
}
