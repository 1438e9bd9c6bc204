// The API reference (/docs): Redoc (the redoc package's standalone bundle, served by this
// service at /assets/vendor/redoc.standalone.js) draws /api/openapi.json into #redoc: a sidebar
// by tag, search, and every operation with its schemas and examples. Nothing is fetched from
// another host. The colours are chosen for WCAG AA contrast, and two things Redoc leaves out
// are added as it draws (test/pages/api-reference.browser.test.ts runs axe over the page): a
// name for its sample selectors, and keyboard focus for the code samples that scroll.
(function () {
  'use strict';
  var el = document.getElementById('redoc');

  function label(root) {
    root.querySelectorAll('select:not([aria-label])').forEach(function (s) { s.setAttribute('aria-label', 'Choose a sample'); });
    root.querySelectorAll('pre:not([tabindex])').forEach(function (p) { p.setAttribute('tabindex', '0'); });
  }
  new MutationObserver(function () { label(el); }).observe(el, { childList: true, subtree: true });

  window.Redoc.init(el.getAttribute('data-spec'), {
    expandResponses: '200,201',
    hideHostname: true,
    jsonSampleExpandLevel: 3,
    nativeScrollbars: true,
    requiredPropsFirst: true,
    showObjectSchemaExamples: true,
    theme: {
      colors: {
        primary: { main: '#1d4ed8' },
        success: { main: '#166534' },
        warning: { main: '#92400e' },
        error: { main: '#b91c1c' },
        text: { primary: '#1f2937', secondary: '#4b5563' },
        responses: {
          success: { tabTextColor: '#86efac' },
          error: { tabTextColor: '#fca5a5' },
          redirect: { tabTextColor: '#fcd34d' },
          info: { tabTextColor: '#93c5fd' },
        },
        http: { get: '#166534', post: '#1d4ed8', put: '#92400e', patch: '#6d28d9', delete: '#b91c1c', options: '#374151', head: '#374151', basic: '#374151', link: '#374151' },
      },
      sidebar: { textColor: '#1f2937', activeTextColor: '#1d4ed8' },
      rightPanel: { backgroundColor: '#1f2937', textColor: '#ffffff' },
      typography: {
        fontFamily: 'system-ui, sans-serif',
        headings: { fontFamily: 'system-ui, sans-serif' },
        code: { fontFamily: 'ui-monospace, monospace', color: '#9f1239', backgroundColor: '#f3f4f6' },
      },
    },
  }, el);
})();
