// Every form of the pages and the panel: once sent, its submit buttons are disabled until the
// answer arrives, so a second click or Enter does not send it again (a second "turn on" would
// answer "already on" in place of the page with the recovery codes). Without JavaScript the
// forms work as before. Served from this origin (the Content-Security-Policy allows no inline
// script); views/partials/head.ejs includes it on every page.

const SENDING = 'data-sending';

/** The buttons that submit `form`, including those outside it with a form= attribute. */
function submitButtons(form) {
  return Array.from(form.elements).filter((el) => (el instanceof HTMLButtonElement || el instanceof HTMLInputElement)
    && (el.type === 'submit' || el.type === 'image'));
}

document.addEventListener('submit', (event) => {
  const form = event.target;
  if (!(form instanceof HTMLFormElement) || event.defaultPrevented) return;
  if (form.hasAttribute(SENDING)) {
    event.preventDefault();
    return;
  }
  form.setAttribute(SENDING, '');
  const buttons = submitButtons(form).filter((b) => !b.disabled);
  // after this task: the form's data (with the button that sent it) is taken once the event is
  // over, and a disabled button's name and value would be left out of it
  setTimeout(() => {
    for (const b of buttons) {
      b.disabled = true;
      b.setAttribute('data-disabled-while-sending', '');
    }
  }, 0);
});

// Back (or forward) to a page kept in the back/forward cache: its forms can be sent again.
window.addEventListener('pageshow', (event) => {
  if (!event.persisted) return;
  for (const form of document.querySelectorAll(`form[${SENDING}]`)) form.removeAttribute(SENDING);
  for (const b of document.querySelectorAll('[data-disabled-while-sending]')) {
    b.disabled = false;
    b.removeAttribute('data-disabled-while-sending');
  }
});
