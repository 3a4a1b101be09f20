// The compose box: text, up to four images (picked, dropped on the box or pasted), each with
// its alt text, visibility, and an idempotency key so that a retry after a lost answer cannot
// post twice (the key is kept until a post succeeds, and renewed when the post changes).
//
// An image is uploaded as soon as it is added (CreateUpload, then the PUT: js/media.js), with
// its progress shown; Post waits for the uploads still running, then sends CreatePost with
// their ids. Whatever the server refuses (a type, a size, bytes that are not the image they
// claim) is shown with the server's own message, on the image or above the Post button, and
// nothing is posted.

import { ApiError } from './api.js';
import { avatar, h, icon, uuid } from './dom.js';
import { ACCEPT, MAX_ALT, MAX_IMAGES, uploadImage } from './media.js';
import { MAX_BODY, VISIBILITY } from './post.js';

export function composer(app, { onPosted = () => {} } = {}) {
  let visibility = localStorage.getItem('hybridfeed.visibility') || 'PUBLIC';
  let idempotencyKey = null;
  let busy = false;
  let attachments = []; // {file, preview, alt, state: uploading|ready|failed, progress, uploadId, error, done}
  let dragDepth = 0;

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
  const fileInput = h('input.visually-hidden', {
    type: 'file',
    accept: ACCEPT,
    multiple: true,
    tabindex: -1,
    'aria-hidden': 'true',
    dataset: { testid: 'compose-file' },
    onchange: () => {
      addFiles(fileInput.files);
      fileInput.value = ''; // the same file may be picked again after a removal
    },
  });
  const attachButton = h(
    'button.attach',
    {
      type: 'button',
      title: `Add images (up to ${MAX_IMAGES}; or drop them on this box)`,
      'aria-label': 'Add images',
      dataset: { testid: 'compose-attach' },
      onclick: () => fileInput.click(),
    },
    icon('image'),
    h('span.attach-label', 'Images'),
  );
  const gallery = h('div.compose-media', { dataset: { testid: 'compose-media' }, hidden: true });
  const formError = h('p.form-error.compose-error', { role: 'alert', dataset: { testid: 'compose-error' }, hidden: true });

  const hasContent = () => Boolean(area.value.trim()) || attachments.length > 0;

  function sync() {
    const n = area.value.length;
    counter.textContent = `${n} / ${MAX_BODY}`;
    counter.classList.toggle('near', n > MAX_BODY - 40);
    button.disabled = busy || !hasContent();
    attachButton.disabled = busy || attachments.length >= MAX_IMAGES;
    visIcon.replaceChildren(icon(VISIBILITY[visibility].icon));
    // Grow with the text, up to a limit.
    if (area.isConnected) {
      area.style.height = 'auto';
      area.style.height = `${Math.max(area.scrollHeight, 56)}px`;
    }
  }

  function showError(message) {
    formError.textContent = message || '';
    formError.hidden = !message;
  }

  // ---------------------------------------------------------------- images

  function addFiles(list) {
    const files = Array.from(list || []);
    if (!files.length || busy) return;
    showError('');
    const room = MAX_IMAGES - attachments.length;
    if (files.length > room) {
      app.toast(`A post has at most ${MAX_IMAGES} images${room ? `: added the first ${room}` : ''}.`, 'error');
    }
    for (const file of files.slice(0, Math.max(0, room))) {
      const item = {
        file,
        preview: URL.createObjectURL(file),
        alt: '',
        state: 'uploading',
        progress: 0,
        uploadId: null,
        error: '',
      };
      item.done = upload(item);
      attachments.push(item);
    }
    idempotencyKey = null; // other images: a different post
    renderGallery();
    sync();
  }

  async function upload(item) {
    try {
      item.uploadId = await uploadImage(app, item.file, {
        onProgress: (fraction) => {
          item.progress = fraction;
          paintStatus(item);
        },
      });
      item.state = 'ready';
    } catch (err) {
      item.state = 'failed';
      item.error = err instanceof ApiError ? err.message : 'The upload failed.';
      if (err?.handled) item.error = 'Log in again to upload.';
    }
    paintStatus(item);
    return item.state === 'ready';
  }

  function remove(item) {
    attachments = attachments.filter((a) => a !== item);
    URL.revokeObjectURL(item.preview);
    idempotencyKey = null;
    showError('');
    renderGallery();
    sync();
    // Its upload, if it finished, is never attached: the server deletes it after a while.
  }

  function clearImages() {
    for (const item of attachments) URL.revokeObjectURL(item.preview);
    attachments = [];
    renderGallery();
  }

  function paintStatus(item) {
    const node = item.node;
    if (!node) return;
    node.dataset.state = item.state;
    const status = node.querySelector('.attachment-status');
    if (item.state === 'uploading') {
      const pct = Math.round(item.progress * 100);
      status.replaceChildren(
        h('progress', { max: 100, value: pct, 'aria-label': 'Upload progress' }),
        h('span', `Uploading ${pct}%`),
      );
    } else if (item.state === 'ready') {
      status.replaceChildren(h('span.ok', 'Uploaded'));
    } else {
      status.replaceChildren(h('span.error', { dataset: { testid: 'compose-attachment-error' } }, item.error));
    }
  }

  function attachmentNode(item, index) {
    const warning = h(
      'small.alt-warning',
      { dataset: { testid: 'compose-alt-warning' }, hidden: Boolean(item.alt.trim()) },
      'No alt text: describe the image for people who cannot see it.',
    );
    const alt = h('textarea.alt', {
      rows: 2,
      maxlength: MAX_ALT,
      placeholder: 'Describe the image (alt text)',
      'aria-label': `Alt text for image ${index + 1}`,
      dataset: { testid: 'compose-alt' },
    });
    alt.value = item.alt;
    alt.addEventListener('input', () => {
      item.alt = alt.value;
      warning.hidden = Boolean(item.alt.trim());
      idempotencyKey = null;
    });
    item.node = h(
      'figure.attachment',
      { dataset: { testid: 'compose-attachment', state: item.state } },
      h(
        'div.attachment-thumb',
        h('img', { src: item.preview, alt: '' }),
        h(
          'button.icon-button.small.attachment-remove',
          {
            type: 'button',
            'aria-label': `Remove image ${index + 1}`,
            dataset: { testid: 'compose-remove' },
            onclick: () => remove(item),
          },
          icon('x'),
        ),
      ),
      h(
        'figcaption',
        h('span.attachment-name', { title: item.file.name }, item.file.name || `image ${index + 1}`),
        alt,
        warning,
        h('div.attachment-status', { 'aria-live': 'polite' }),
      ),
    );
    paintStatus(item);
    return item.node;
  }

  function renderGallery() {
    gallery.replaceChildren(...attachments.map(attachmentNode));
    gallery.hidden = attachments.length === 0;
    gallery.dataset.count = String(attachments.length);
  }

  // ---------------------------------------------------------------- post

  async function submit(e) {
    e?.preventDefault();
    const body = area.value.trim();
    if (!hasContent() || busy) return;
    busy = true;
    showError('');
    form.classList.add('busy');
    sync();
    try {
      const uploaded = await Promise.all(attachments.map((item) => item.done));
      if (uploaded.includes(false)) {
        showError('Some images could not be uploaded (see why on each): remove them to post.');
        return;
      }
      idempotencyKey ||= uuid();
      const variables = { body, visibility, idempotencyKey };
      if (attachments.length) {
        variables.media = attachments.map((item) => ({ uploadId: item.uploadId, alt: item.alt.trim() || null }));
      }
      const data = await app.call('CreatePost', variables);
      idempotencyKey = null;
      area.value = '';
      clearImages();
      onPosted(data.createPost);
      app.toast(
        visibility === 'PRIVATE' ? 'Posted (only you can see it).' : 'Posted. Your followers will see it shortly.',
      );
    } catch (err) {
      if (err instanceof ApiError && !err.handled) showError(`${err.title}: ${err.message}`);
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
  area.addEventListener('paste', (e) => {
    const files = Array.from(e.clipboardData?.files || []);
    if (files.length) {
      e.preventDefault();
      addFiles(files);
    }
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
      gallery,
      formError,
      h('div.compose-bar', attachButton, fileInput, h('label.vis-select', visIcon, select), counter, button),
    ),
    h('div.drop-hint', { 'aria-hidden': 'true' }, icon('image'), `Drop images to add them (up to ${MAX_IMAGES})`),
  );

  // Drag and drop: files dropped anywhere on the box are added.
  const carriesFiles = (e) => Array.from(e.dataTransfer?.types || []).includes('Files');
  form.addEventListener('dragenter', (e) => {
    if (!carriesFiles(e)) return;
    e.preventDefault();
    dragDepth += 1;
    form.classList.add('dropping');
  });
  form.addEventListener('dragover', (e) => {
    if (!carriesFiles(e)) return;
    e.preventDefault();
    e.dataTransfer.dropEffect = busy || attachments.length >= MAX_IMAGES ? 'none' : 'copy';
  });
  form.addEventListener('dragleave', () => {
    dragDepth = Math.max(0, dragDepth - 1);
    if (!dragDepth) form.classList.remove('dropping');
  });
  form.addEventListener('drop', (e) => {
    if (!carriesFiles(e)) return;
    e.preventDefault();
    dragDepth = 0;
    form.classList.remove('dropping');
    addFiles(e.dataTransfer.files);
  });

  sync();
  return form;
}
