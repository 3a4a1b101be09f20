// The compose box: text, visibility, and an idempotency key so that a retry after a lost
// answer cannot post twice (the key is kept until a post succeeds).

import { avatar, h, icon, uuid } from './dom.js';
import { MAX_BODY, VISIBILITY } from './post.js';

export function composer(app, { onPosted = () => {} } = {}) {
  let visibility = localStorage.getItem('hybridfeed.visibility') || 'PUBLIC';
  let idempotencyKey = null;
  let busy = false;

  const area = h('textarea', {
    maxlength: MAX_BODY,
    rows: 2,
    placeholder: `What's new, ${app.viewer.displayName.split(' ')[0]}?`,
    'aria-label': 'New post',
    dataset: { testid: 'compose-body' },
  });
  const counter = h('span.counter', `0 / ${MAX_BODY}`);
  const select = h(
    'select.visibility',
    { 'aria-label': 'Who can see it', dataset: { testid: 'compose-visibility' } },
    Object.entries(VISIBILITY).map(([value, v]) =>
      h('option', { value, selected: value === visibility, title: v.hint }, v.label),
    ),
  );
  const visIcon = h('span.vis-icon');
  const button = h(
    'button.primary',
    { type: 'submit', disabled: true, dataset: { testid: 'compose-submit' } },
    'Post',
  );

  function sync() {
    const n = area.value.length;
    counter.textContent = `${n} / ${MAX_BODY}`;
    counter.classList.toggle('near', n > MAX_BODY - 40);
    button.disabled = busy || !area.value.trim();
    visIcon.replaceChildren(icon(VISIBILITY[visibility].icon));
    // Grow with the text, up to a limit.
    if (area.isConnected) {
      area.style.height = 'auto';
      area.style.height = `${Math.max(area.scrollHeight, 56)}px`;
    }
  }

  async function submit(e) {
    e?.preventDefault();
    const body = area.value.trim();
    if (!body || busy) return;
    busy = true;
    idempotencyKey ||= uuid();
    form.classList.add('busy');
    sync();
    try {
      const data = await app.call('CreatePost', { body, visibility, idempotencyKey });
      idempotencyKey = null;
      area.value = '';
      onPosted(data.createPost);
      app.toast(
        visibility === 'PRIVATE' ? 'Posted (only you can see it).' : 'Posted. Your followers will see it shortly.',
      );
    } catch (err) {
      app.report(err);
    } finally {
      busy = false;
      form.classList.remove('busy');
      sync();
    }
  }

  area.addEventListener('input', () => {
    idempotencyKey = null; // different text: a different post
    sync();
  });
  area.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && (e.metaKey || e.ctrlKey)) submit(e);
  });
  select.addEventListener('change', () => {
    visibility = select.value;
    localStorage.setItem('hybridfeed.visibility', visibility);
    sync();
  });

  const form = h(
    'form.card.compose',
    { onsubmit: submit, dataset: { testid: 'compose' } },
    avatar(app.viewer),
    h(
      'div.compose-main',
      area,
      h('div.compose-bar', h('label.vis-select', visIcon, select), counter, button),
    ),
  );
  sync();
  return form;
}
