// Log in / sign up. The token goes to localStorage (api.js `auth`).

import { h, icon } from '../dom.js';

export function authView(app, { mode: initialMode = 'login', notice = '' } = {}) {
  let mode = initialMode;
  const root = h('section.auth');
  const error = h('div.form-error', { role: 'alert', hidden: true, dataset: { testid: 'auth-error' } });
  const handle = h('input', {
    name: 'handle',
    autocomplete: 'username',
    required: true,
    maxlength: 30,
    placeholder: 'alice',
    spellcheck: 'false',
    autocapitalize: 'none',
    dataset: { testid: 'auth-handle' },
  });
  const displayName = h('input', {
    name: 'displayName',
    autocomplete: 'name',
    maxlength: 80,
    placeholder: 'Alice Nguyen',
    dataset: { testid: 'auth-display-name' },
  });
  const password = h('input', {
    name: 'password',
    type: 'password',
    required: true,
    autocomplete: 'current-password',
    placeholder: '••••••••',
    dataset: { testid: 'auth-password' },
  });
  const submit = h('button.primary.wide', { type: 'submit', dataset: { testid: 'auth-submit' } });
  const tabs = {
    login: h('button.tab', { type: 'button', role: 'tab', dataset: { testid: 'tab-login' } }, 'Log in'),
    signup: h('button.tab', { type: 'button', role: 'tab', dataset: { testid: 'tab-signup' } }, 'Sign up'),
  };
  const nameRow = h('label.field', h('span', 'Display name ', h('small', '(optional)')), displayName);

  function setMode(next) {
    mode = next;
    for (const [key, tab] of Object.entries(tabs)) tab.setAttribute('aria-selected', String(key === mode));
    nameRow.hidden = mode !== 'signup';
    password.autocomplete = mode === 'signup' ? 'new-password' : 'current-password';
    submit.textContent = mode === 'signup' ? 'Create account' : 'Log in';
    error.hidden = true;
    history.replaceState(null, '', mode === 'signup' ? '#/signup' : '#/login');
  }
  tabs.login.onclick = () => setMode('login');
  tabs.signup.onclick = () => setMode('signup');

  async function onSubmit(e) {
    e.preventDefault();
    error.hidden = true;
    submit.disabled = true;
    const variables = { handle: handle.value.trim().toLowerCase(), password: password.value };
    try {
      let payload;
      if (mode === 'signup') {
        if (displayName.value.trim()) variables.displayName = displayName.value.trim();
        payload = (await app.call('SignUp', variables)).signUp;
      } else {
        payload = (await app.call('LogIn', variables)).logIn;
      }
      app.signedIn(payload.token, payload.user);
    } catch (err) {
      error.replaceChildren(h('strong', err.title || 'Error'), ' ', err.message);
      error.dataset.code = err.code || '';
      error.hidden = false;
    } finally {
      submit.disabled = false;
    }
  }

  root.append(
    h(
      'div.auth-card.card',
      h('div.auth-brand', icon('logo'), h('span', 'hybridfeed')),
      h('p.lede', 'A home feed with hybrid fan-out: pushed to followers’ timelines, pulled for big accounts.'),
      notice ? h('div.notice', { dataset: { testid: 'auth-notice' } }, notice) : null,
      h('div.tabs', { role: 'tablist' }, tabs.login, tabs.signup),
      h(
        'form.auth-form',
        { onsubmit: onSubmit },
        h('label.field', h('span', 'Handle'), handle),
        nameRow,
        h('label.field', h('span', 'Password'), password),
        error,
        submit,
      ),
      h(
        'p.hint',
        'Demo data (loaded by ',
        h('code', 'make run'),
        ' on first start): log in as ',
        h('code', 'alice'),
        ', ',
        h('code', 'bob'),
        ' or ',
        h('code', 'carol'),
        ' with password ',
        h('code', 'demo-password'),
        '.',
      ),
    ),
  );
  setMode(mode);
  return { el: root, focus: () => handle.focus() };
}
