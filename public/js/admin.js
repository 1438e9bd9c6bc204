// Admin panel: the "Copy" button next to a secret shown once. Served from this origin (the
// Content-Security-Policy allows no inline script).

// A secret is shown once, in the answer to the form that made it (it is never kept in the
// session): the client's own address replaces the form's in the history, so a reload or a
// return asks for that page, without the secret, instead of sending the form again.
const shownAt = document.querySelector('[data-shown-at]')?.getAttribute('data-shown-at');
if (shownAt && window.history.replaceState) window.history.replaceState(null, '', shownAt);

document.addEventListener('click', async (event) => {
  const button = event.target instanceof Element ? event.target.closest('[data-copy]') : null;
  if (!button) return;
  const id = button.getAttribute('data-copy');
  const field = document.getElementById(id);
  const status = document.querySelector(`[data-copy-status="${id}"]`);
  if (!field) return;
  let copied = false;
  try {
    await navigator.clipboard.writeText(field.value);
    copied = true;
  } catch {
    field.focus();
    field.select();
    copied = document.execCommand && document.execCommand('copy');
  }
  button.textContent = copied ? 'Copied' : 'Copy';
  if (status) status.textContent = copied ? 'Copied to the clipboard.' : 'Select the secret and copy it with your keyboard.';
});
