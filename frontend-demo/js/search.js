// The people search in the header: SearchUsers on a handle or display-name prefix, typed
// with a short pause (debounced), at most SEARCH_LIMIT results, each a link to the user page.
//
// Only the answer to the latest prefix is shown: an older request still in flight is aborted,
// and an answer that arrives for a prefix no longer in the box is ignored.

import { clear, h, hue, icon, initials } from './dom.js';

export const SEARCH_LIMIT = 10;
const DEBOUNCE_MS = 250;

/** searchBox(app) -> {el}: one element, kept across header re-renders (see App.renderHeader). */
export function searchBox(app) {
  let timer = 0;
  let abort = null;
  let shown = ''; // the prefix the results are for
  let active = -1; // keyboard position in the results

  const input = h('input', {
    type: 'search',
    placeholder: 'Search people',
    autocomplete: 'off',
    spellcheck: 'false',
    'aria-label': 'Search people by handle or name',
    'aria-controls': 'search-results',
    'aria-expanded': 'false',
    role: 'combobox',
    dataset: { testid: 'search-input' },
  });
  const results = h('div.search-results', {
    id: 'search-results',
    role: 'listbox',
    hidden: true,
    dataset: { testid: 'search-results' },
  });
  // On a phone the box is a button that opens the field over the header.
  const toggle = h(
    'button.icon-button.search-toggle',
    {
      type: 'button',
      'aria-label': 'Search people',
      dataset: { testid: 'search-toggle' },
      onclick: () => {
        el.classList.add('open');
        input.focus();
      },
    },
    icon('search'),
  );
  const el = h('div.search', { role: 'search', dataset: { testid: 'search' } }, toggle, input, results);

  function close() {
    if (!input.value.trim() || document.activeElement !== input) el.classList.remove('open');
    results.hidden = true;
    input.setAttribute('aria-expanded', 'false');
    active = -1;
  }

  function open() {
    results.hidden = false;
    input.setAttribute('aria-expanded', 'true');
  }

  function schedule() {
    clearTimeout(timer);
    const prefix = input.value.trim();
    if (!prefix) {
      abort?.abort();
      shown = '';
      clear(results);
      close();
      return;
    }
    timer = setTimeout(() => search(prefix), DEBOUNCE_MS);
  }

  async function search(prefix) {
    abort?.abort();
    const mine = (abort = new AbortController());
    results.dataset.state = 'loading';
    try {
      const data = await app.call('SearchUsers', { prefix, first: SEARCH_LIMIT }, { signal: mine.signal });
      if (mine.signal.aborted || input.value.trim() !== prefix) return;
      show(prefix, data.searchUsers);
    } catch (err) {
      if (err?.name === 'AbortError' || mine.signal.aborted) return;
      clear(results);
      close();
      app.report(err);
    } finally {
      if (abort === mine) delete results.dataset.state;
    }
  }

  function show(prefix, users) {
    shown = prefix;
    active = -1;
    clear(results);
    results.dataset.prefix = prefix;
    results.dataset.count = String(users.length);
    if (!users.length) {
      results.append(h('div.search-empty', { dataset: { testid: 'search-empty' } }, `No one matches “${prefix}”.`));
    }
    for (const user of users) {
      results.append(
        h(
          'a.search-result',
          {
            href: `#/u/${encodeURIComponent(user.handle)}`,
            role: 'option',
            dataset: { testid: 'search-result', handle: user.handle },
            onclick: () => {
              close();
              input.blur();
            },
          },
          // Not avatar(): that is a link of its own, and this row is the link.
          h('span.avatar.small', { style: { '--hue': String(hue(user.handle)) }, 'aria-hidden': 'true' }, initials(user.displayName, user.handle)),
          h('span.search-name', user.displayName || user.handle),
          h('span.handle', `@${user.handle}`),
        ),
      );
    }
    open();
  }

  function move(step) {
    const links = [...results.querySelectorAll('.search-result')];
    if (!links.length || results.hidden) return;
    active = (active + step + links.length) % links.length;
    links.forEach((link, i) => link.setAttribute('aria-selected', String(i === active)));
    links[active].scrollIntoView({ block: 'nearest' });
  }

  input.addEventListener('input', schedule);
  input.addEventListener('focus', () => {
    if (shown && shown === input.value.trim()) open();
  });
  input.addEventListener('blur', () => {
    // A header redraw moves the box and gives the focus back (restoreFocus): close only
    // when the focus really went elsewhere.
    setTimeout(() => {
      if (document.activeElement !== input && !input.value.trim()) el.classList.remove('open');
    }, 0);
  });
  input.addEventListener('keydown', (e) => {
    if (e.key === 'Escape') {
      close();
      input.blur();
    } else if (e.key === 'ArrowDown' || e.key === 'ArrowUp') {
      e.preventDefault();
      move(e.key === 'ArrowDown' ? 1 : -1);
    } else if (e.key === 'Enter') {
      const links = [...results.querySelectorAll('.search-result')];
      const target = links[Math.max(active, 0)];
      if (target && !results.hidden) {
        e.preventDefault();
        target.click(); // follows the link
      }
    }
  });
  document.addEventListener('click', (e) => {
    if (!el.contains(e.target)) close();
  });

  return {
    el,
    /** Re-attach after the header was rebuilt; keep the caret where it was. */
    restoreFocus(hadFocus, selection) {
      if (!hadFocus) return;
      input.focus();
      if (selection) input.setSelectionRange(selection[0], selection[1]);
    },
    get focused() {
      return document.activeElement === input;
    },
    get selection() {
      return [input.selectionStart, input.selectionEnd];
    },
    reset() {
      clearTimeout(timer);
      abort?.abort();
      input.value = '';
      shown = '';
      clear(results);
      close();
    },
  };
}
