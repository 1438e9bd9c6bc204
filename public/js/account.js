// Account security page: the "Print" button of the recovery codes (the CSP allows no inline script).
document.addEventListener('click', (event) => {
  const button = event.target instanceof Element ? event.target.closest('[data-print]') : null;
  if (button) window.print();
});
