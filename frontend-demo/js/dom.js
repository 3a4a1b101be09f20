// Tiny DOM helpers: no framework, no innerHTML with user text (everything goes through
// textContent), so post bodies and names can never inject markup.

/**
 * h('button.primary', {onclick, type: 'submit'}, 'Save', otherNode)
 * Attributes: `class`, `dataset` (object), `style` (object), `on<event>` (listener),
 * booleans (true sets, false omits), anything else via setAttribute.
 */
export function h(tagSpec, attrs = {}, ...children) {
  const [tag, ...classes] = tagSpec.split('.');
  const el = document.createElement(tag || 'div');
  if (classes.length) el.className = classes.join(' ');
  if (attrs === null || typeof attrs !== 'object' || attrs instanceof Node || Array.isArray(attrs)) {
    children.unshift(attrs);
    attrs = {};
  }
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'class') el.className = [el.className, value].filter(Boolean).join(' ');
    else if (key === 'dataset') Object.assign(el.dataset, value);
    else if (key === 'style') {
      for (const [prop, v] of Object.entries(value)) {
        if (prop.startsWith('--')) el.style.setProperty(prop, v);
        else el.style[prop] = v;
      }
    }
    else if (key.startsWith('on') && typeof value === 'function') {
      el.addEventListener(key.slice(2), value);
    } else if (key === 'html') el.innerHTML = value; // trusted, static markup only (icons)
    else if (value === true) el.setAttribute(key, '');
    else el.setAttribute(key, String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

export function clear(el) {
  while (el.firstChild) el.firstChild.remove();
  return el;
}

// Inline SVG icons (static strings, 24x24 viewBox, stroke = currentColor).
const PATHS = {
  heart:
    '<path d="M12 20.5s-7.5-4.6-9.3-9.2C1.4 7.9 3.6 4.5 7 4.5c2.1 0 3.6 1.2 5 3 1.4-1.8 2.9-3 5-3 3.4 0 5.6 3.4 4.3 6.8-1.8 4.6-9.3 9.2-9.3 9.2z"/>',
  comment:
    '<path d="M4 5.5h16a1.5 1.5 0 0 1 1.5 1.5v9a1.5 1.5 0 0 1-1.5 1.5H10l-4.5 3.5V17.5H4A1.5 1.5 0 0 1 2.5 16V7A1.5 1.5 0 0 1 4 5.5z"/>',
  more: '<circle cx="5" cy="12" r="1.6"/><circle cx="12" cy="12" r="1.6"/><circle cx="19" cy="12" r="1.6"/>',
  refresh:
    '<path d="M20 11a8 8 0 1 0-2.3 5.7"/><path d="M20 4.5V11h-6.5"/>',
  up: '<path d="M12 19V5"/><path d="M5.5 11.5 12 5l6.5 6.5"/>',
  globe:
    '<circle cx="12" cy="12" r="9"/><path d="M3 12h18"/><path d="M12 3c2.5 2.7 3.8 5.7 3.8 9s-1.3 6.3-3.8 9c-2.5-2.7-3.8-5.7-3.8-9s1.3-6.3 3.8-9z"/>',
  users:
    '<circle cx="9" cy="8.5" r="3.5"/><path d="M2.5 20c.6-3.6 3.2-5.5 6.5-5.5s5.9 1.9 6.5 5.5"/><path d="M16 5.2a3.4 3.4 0 0 1 0 6.6"/><path d="M18 14.8c2 .6 3.2 2.4 3.5 5.2"/>',
  lock: '<rect x="5" y="10.5" width="14" height="10" rx="2"/><path d="M8 10.5V7.5a4 4 0 0 1 8 0v3"/>',
  gauge:
    '<path d="M4.5 17.5a8.5 8.5 0 1 1 15 0"/><path d="M12 13.5 16 8.5"/><circle cx="12" cy="14" r="1.4"/>',
  logo:
    '<path d="M4 6h10"/><path d="M4 12h16"/><path d="M4 18h7"/><circle cx="18.5" cy="6" r="2"/><circle cx="15.5" cy="18" r="2"/>',
  x: '<path d="M6 6l12 12M18 6 6 18"/>',
  search: '<circle cx="10.5" cy="10.5" r="6.5"/><path d="m15.5 15.5 5 5"/>',
  image:
    '<rect x="3.5" y="4.5" width="17" height="15" rx="2.5"/><circle cx="9" cy="10" r="1.8"/><path d="m4 17.5 5-4.5 3.5 3 3-2.5 4.5 4"/>',
};

export function icon(name, cls = '') {
  const span = document.createElement('span');
  span.className = `icon ${cls}`.trim();
  span.setAttribute('aria-hidden', 'true');
  span.innerHTML = `<svg viewBox="0 0 24 24" fill="none" stroke="currentColor" stroke-width="1.8" stroke-linecap="round" stroke-linejoin="round">${PATHS[name] || ''}</svg>`;
  return span;
}

const RELATIVE = new Intl.RelativeTimeFormat(undefined, { numeric: 'auto', style: 'short' });
const ABSOLUTE = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' });

export function timeAgo(iso, now = Date.now()) {
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return '';
  const s = Math.round((t - now) / 1000);
  const abs = Math.abs(s);
  if (abs < 45) return 'just now';
  if (abs < 3600) return RELATIVE.format(Math.round(s / 60), 'minute');
  if (abs < 86400) return RELATIVE.format(Math.round(s / 3600), 'hour');
  if (abs < 7 * 86400) return RELATIVE.format(Math.round(s / 86400), 'day');
  return ABSOLUTE.format(t);
}

export function fullDate(iso) {
  const t = Date.parse(iso);
  return Number.isNaN(t) ? '' : ABSOLUTE.format(t);
}

export function initials(name, handle) {
  const words = (name || handle || '?').trim().split(/\s+/).filter(Boolean);
  const letters = words.length > 1 ? words[0][0] + words[words.length - 1][0] : words[0].slice(0, 2);
  return letters.toUpperCase();
}

/** A stable hue per handle, for avatars. */
export function hue(handle) {
  let x = 0x811c9dc5; // FNV-1a: nearby handles get far-apart hues
  for (const ch of handle || '') x = Math.imul(x ^ ch.charCodeAt(0), 0x01000193) >>> 0;
  return x % 360;
}

export function avatar(user, size = '') {
  return h(
    `a.avatar${size ? `.${size}` : ''}`,
    {
      href: `#/u/${encodeURIComponent(user.handle)}`,
      style: { '--hue': String(hue(user.handle)) },
      title: `@${user.handle}`,
      'aria-label': `${user.displayName || user.handle}'s profile`,
    },
    initials(user.displayName, user.handle),
  );
}

export function plural(n, one, many = `${one}s`) {
  return `${n.toLocaleString()} ${n === 1 ? one : many}`;
}

export function uuid() {
  if (globalThis.crypto?.randomUUID) return crypto.randomUUID();
  return `${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}`;
}
