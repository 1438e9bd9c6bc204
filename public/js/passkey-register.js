// Account security page: "Add a passkey" (views/account-security.ejs). The current password
// and the server's options (POST /api/passkeys/registration/options), the ceremony by
// @simplewebauthn/browser (the package's own bundle, /assets/vendor/simplewebauthn/), then the
// answer and its name (POST /api/passkeys/registration/verify); the page is then loaded again.
(() => {
  const lib = window.SimpleWebAuthnBrowser;
  const form = document.querySelector('[data-passkey-register]');
  if (!lib || !form || !lib.browserSupportsWebAuthn()) return;
  const status = form.querySelector('[data-passkey-status]');
  const button = form.querySelector('button[type="submit"]');
  form.hidden = false;
  document.querySelector('[data-passkey-unsupported]')?.setAttribute('hidden', '');

  const post = async (path, body) => {
    const answer = await fetch(path, {
      method: 'POST', credentials: 'same-origin', headers: { 'Content-Type': 'application/json', Accept: 'application/json' }, body: JSON.stringify(body),
    });
    const json = await answer.json().catch(() => ({}));
    if (!answer.ok) {
      const problem = new Error(json.message || 'The passkey could not be added. Please try again.');
      problem.fromServer = true;
      throw problem;
    }
    return json;
  };

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    status.textContent = '';
    button.disabled = true;
    try {
      const name = form.elements.name.value.trim();
      const optionsJSON = await post('/api/passkeys/registration/options', { current_password: form.elements.current_password.value });
      const response = await lib.startRegistration({ optionsJSON });
      await post('/api/passkeys/registration/verify', { name, response });
      window.location.assign('/account/security#passkeys');
      window.location.reload();
    } catch (err) {
      button.disabled = false;
      status.textContent = err?.fromServer ? err.message : 'No passkey was created. Please try again.';
    }
  });
})();
