// Sign-in page: passkeys (views/login.ejs). @simplewebauthn/browser (served from the package's
// own bundle, /assets/vendor/simplewebauthn/) runs the ceremony; the server's options come from
// POST /api/passkeys/authentication/options and the answer is posted in the page's passkey
// form, so the sign-in continues exactly as a password sign-in does (session, redirect).
(() => {
  const lib = window.SimpleWebAuthnBrowser;
  const box = document.querySelector('[data-passkey]');
  const form = box?.querySelector('[data-passkey-form]');
  if (!lib || !form || !lib.browserSupportsWebAuthn()) return;
  const button = form.querySelector('[data-passkey-button]');
  const status = box.querySelector('[data-passkey-status]');
  box.hidden = false;

  const options = async () => {
    const answer = await fetch('/api/passkeys/authentication/options', {
      method: 'POST', credentials: 'same-origin', headers: { 'Content-Type': 'application/json', Accept: 'application/json' }, body: '{}',
    });
    if (!answer.ok) throw new Error(answer.status === 429 ? 'rate_limited' : 'options');
    return answer.json();
  };
  const send = (assertion) => {
    form.elements.passkey.value = JSON.stringify(assertion);
    form.submit();
  };

  button.addEventListener('click', async () => {
    status.textContent = '';
    button.disabled = true;
    try {
      send(await lib.startAuthentication({ optionsJSON: await options() }));
    } catch (err) {
      button.disabled = false;
      status.textContent = err?.message === 'rate_limited'
        ? 'Too many sign-in attempts from your network. Please wait a minute and try again.'
        : 'No passkey was used. Try again, or sign in with your username and password.';
    }
  });

  // the browser offers passkeys in the username field's autofill (conditional mediation)
  lib.browserSupportsWebAuthnAutofill().then(async (supported) => {
    if (!supported) return;
    try {
      send(await lib.startAuthentication({ optionsJSON: await options(), useBrowserAutofill: true }));
    } catch {
      // given up, or replaced by the button's ceremony: nothing to say
    }
  });
})();
