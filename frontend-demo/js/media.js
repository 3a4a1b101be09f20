// Images: a post's images as a grid (1 to 4, sized from the server's width and height before
// they load, so nothing moves), the full image in a lightbox, and one upload's three steps
// (docs/API.md, "Image posts"): CreateUpload, a PUT of the bytes to its URL with exactly its
// headers, and later CreatePost's `media` with the upload's id.

import { ApiError } from './api.js';
import { h, icon } from './dom.js';

export const MAX_IMAGES = 4; // the server's limit per post
export const MAX_ALT = 1000; // MEDIA_ALT_MAX_CHARS' default
export const ACCEPT = 'image/jpeg,image/png,image/webp,image/gif';

// Headers a page may not set: the browser sends them itself (Content-Length from the file,
// which is the byteSize the upload declared).
const BROWSER_HEADERS = new Set(['content-length', 'host', 'connection']);
const SINGLE_MAX_HEIGHT_PX = 460;

/** What identifies a post's images across answers: their URLs' paths and alt texts (the
 *  query strings change with every answer: each carries a freshly minted signature). */
export function mediaSignature(media) {
  return (media || []).map((m) => `${String(m.url).split('?')[0]}\u0000${m.alt ?? ''}`).join('\u0001');
}

/**
 * mediaGrid(media, {onBroken}) -> HTMLElement | null
 * One image at its own aspect ratio (capped in height); 2 to 4 in a fixed 16:9 grid. Each is
 * a link to the full image (a click opens it in a lightbox; a modified click, a new tab).
 * `onBroken()` is told once when an image fails to load (its signed URL may have expired).
 */
export function mediaGrid(media, { onBroken = () => {} } = {}) {
  if (!media?.length) return null;
  let told = false;
  const broken = () => {
    if (told) return;
    told = true;
    onBroken();
  };
  const single = media.length === 1;
  const grid = h(`div.media-grid.n${media.length}`, {
    dataset: { testid: 'post-media', count: String(media.length) },
  });
  media.forEach((item, index) => {
    const ratio = item.width > 0 && item.height > 0 ? item.width / item.height : 1;
    const img = h('img', {
      src: item.url,
      width: item.width,
      height: item.height,
      alt: item.alt || '',
      loading: 'lazy',
      decoding: 'async',
      dataset: { testid: 'post-image' },
      onerror: broken,
    });
    const link = h(
      'a.media-item',
      {
        href: item.url,
        target: '_blank',
        rel: 'noopener',
        title: item.alt || 'Open the image',
        'aria-label': item.alt ? `Open image: ${item.alt}` : `Open image ${index + 1} of ${media.length}`,
        style: single
          ? { '--ratio': String(ratio), '--max-h': `${SINGLE_MAX_HEIGHT_PX}px` }
          : undefined,
        onclick: (e) => {
          if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
          e.preventDefault();
          openLightbox(media, index);
        },
      },
      img,
    );
    grid.append(link);
  });
  return grid;
}

/** The full image over the page (a modal <dialog>: Escape or a click outside closes it). */
export function openLightbox(media, index = 0) {
  let at = index;
  const img = h('img.lightbox-image', { dataset: { testid: 'lightbox-image' } });
  const caption = h('p.lightbox-caption');
  const counter = h('span.lightbox-count');
  const original = h('a.lightbox-open', { target: '_blank', rel: 'noopener' }, 'Open original');
  const show = () => {
    const item = media[at];
    original.href = item.url;
    img.src = item.url;
    img.width = item.width;
    img.height = item.height;
    img.alt = item.alt || '';
    caption.textContent = item.alt || 'No description.';
    caption.classList.toggle('muted', !item.alt);
    counter.textContent = media.length > 1 ? `${at + 1} / ${media.length}` : '';
  };
  const step = (by) => {
    at = (at + by + media.length) % media.length;
    show();
  };
  const many = media.length > 1;
  const dialog = h(
    'dialog.lightbox',
    { 'aria-label': 'Image', dataset: { testid: 'lightbox' } },
    h(
      'div.lightbox-bar',
      counter,
      original,
      h(
        'button.icon-button',
        { type: 'button', 'aria-label': 'Close', dataset: { testid: 'lightbox-close' }, onclick: () => dialog.close() },
        icon('x'),
      ),
    ),
    h(
      'figure.lightbox-figure',
      many ? h('button.lightbox-nav.prev', { type: 'button', 'aria-label': 'Previous image', onclick: () => step(-1) }, '‹') : null,
      img,
      many ? h('button.lightbox-nav.next', { type: 'button', 'aria-label': 'Next image', onclick: () => step(1) }, '›') : null,
      h('figcaption', caption),
    ),
  );
  dialog.addEventListener('click', (e) => {
    if (e.target === dialog) dialog.close(); // the backdrop
  });
  dialog.addEventListener('keydown', (e) => {
    if (many && e.key === 'ArrowRight') step(1);
    if (many && e.key === 'ArrowLeft') step(-1);
  });
  dialog.addEventListener('close', () => dialog.remove());
  show();
  document.body.append(dialog);
  dialog.showModal();
  return dialog;
}

async function sha256Hex(file) {
  if (!globalThis.crypto?.subtle) return null; // not a secure context: the server checks anyway
  const digest = await crypto.subtle.digest('SHA-256', await file.arrayBuffer());
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, '0')).join('');
}

/**
 * Upload one file: CreateUpload (the server checks the declared type and size, and the
 * day's budget, and says why not), then the PUT with progress. Resolves to the upload's id;
 * rejects with ApiError carrying the server's message.
 */
export async function uploadImage(app, file, { onProgress = () => {} } = {}) {
  const sha256 = await sha256Hex(file);
  const data = await app.call('CreateUpload', { contentType: file.type, byteSize: file.size, sha256 });
  const upload = data.createUpload;
  await put(upload, file, onProgress);
  return upload.id;
}

function put(upload, file, onProgress) {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest(); // fetch() reports no upload progress
    xhr.open('PUT', upload.url);
    for (const { name, value } of upload.headers) {
      if (!BROWSER_HEADERS.has(name.toLowerCase())) xhr.setRequestHeader(name, value);
    }
    xhr.upload.onprogress = (e) => {
      if (e.lengthComputable && e.total > 0) onProgress(e.loaded / e.total);
    };
    xhr.onload = () => {
      if (xhr.status >= 200 && xhr.status < 300) {
        onProgress(1);
        resolve();
        return;
      }
      const said = (xhr.responseText || '').trim().slice(0, 200);
      reject(
        new ApiError('BAD_USER_INPUT', `The upload was refused (HTTP ${xhr.status}${said ? `: ${said}` : ''}).`, {
          operation: 'upload',
        }),
      );
    };
    xhr.onerror = () =>
      reject(new ApiError('NETWORK', 'The image did not reach the server.', { operation: 'upload' }));
    xhr.send(file);
  });
}
