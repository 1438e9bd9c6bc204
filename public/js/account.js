// Account security page: the "Print" button of the recovery codes (the CSP allows no inline script).

// Recovery codes are shown once, in the answer to the form that made them (never kept in the
// session): the page's own address replaces the form's in the history, so a reload or a return
// asks for the page, without the codes, instead of sending the form again.
const shownAt = document.querySelector('[data-shown-at]')?.getAttribute('data-shown-at');
if (shownAt && window.history.replaceState) window.history.replaceState(null, '', shownAt);

document.addEventListener('click', (event) => {
  const button = event.target instanceof Element ? event.target.closest('[data-print]') : null;
  if (button) window.print();
});
