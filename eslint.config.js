// ESLint: typescript-eslint's recommended rules, import cycles refused (import-x/no-cycle),
// layers that point one way (import-x/no-restricted-paths) and files kept small (max-lines),
// over the service, its tests, benchmarks and scripts.
import js from '@eslint/js';
import importX from 'eslint-plugin-import-x';
import globals from 'globals';
import tseslint from 'typescript-eslint';

// The layer map (docs/architecture.md, "The layers"), from the bottom up.
const PLUMBING = ['http', 'db', 'config', 'config.ts', 'logging', 'logger.ts', 'validation', 'stop-budget.ts'];
const FEATURES = [
  'auth', 'sso', 'clients', 'users', 'links', 'webhooks', 'audit', 'retention', 'health', 'metrics', 'mail',
  'demo', 'sdk', 'context.ts', 'openapi/operation.ts', 'openapi/responses.ts',
];
const ABOVE_FEATURES = [
  'pages', 'admin', 'cli', 'seeds', 'deps.ts', 'app.ts', 'service.ts', 'server.ts',
  'routes/index.ts', 'routes/mount.ts', 'routes/fast-path.ts', 'openapi/document.ts', 'openapi/routes.ts',
];

export default tseslint.config(
  { ignores: ['node_modules/', 'dist/', 'sdk/dist/', 'data/', 'coverage/', 'test-results/', 'public/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.{ts,js,mjs}'],
    languageOptions: { globals: { ...globals.node } },
    plugins: { 'import-x': importX },
    settings: { 'import-x/extensions': ['.ts', '.js', '.mjs'], 'import-x/resolver': { node: { extensions: ['.ts', '.js', '.mjs'] } } },
    rules: {
      'import-x/no-cycle': ['error', { ignoreExternal: true }],
      'import-x/no-self-import': 'error',
      'max-lines': ['error', { max: 300, skipBlankLines: true, skipComments: true }],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
    },
  },
  {
    // CommonJS preloads (node --require), which run before any ES module: scripts/pool-priority.cjs
    files: ['**/*.cjs'],
    languageOptions: { sourceType: 'commonjs', globals: { ...globals.node } },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
  {
    // SQL lives in the data layer only: queries.ts files (any name ending in queries.ts) and
    // src/db/ (docs/architecture.md, "The layers"). Elsewhere a statement is refused, whether
    // a string, a template or a `sql` tag, and so is running one (`.query(...)`).
    files: ['src/**/*.ts'],
    ignores: ['src/**/*queries.ts', 'src/db/**'],
    rules: {
      'no-restricted-syntax': ['error',
        { selector: 'Literal[value=/^\\s*(SELECT|INSERT|UPDATE|DELETE|WITH)\\s/]', message: 'SQL belongs in a queries.ts file or src/db/ (docs/architecture.md).' },
        { selector: 'TemplateElement[value.raw=/^\\s*(SELECT|INSERT|UPDATE|DELETE|WITH)\\s/]', message: 'SQL belongs in a queries.ts file or src/db/ (docs/architecture.md).' },
        { selector: 'TaggedTemplateExpression[tag.name="sql"]', message: 'SQL belongs in a queries.ts file or src/db/ (docs/architecture.md).' },
        { selector: 'CallExpression[callee.property.name="query"]', message: 'Statements run in a queries.ts file or src/db/ (docs/architecture.md); call a named query function.' },
      ],
    },
  },
  {
    // Layers point one way (docs/architecture.md, "The layers"): plumbing imports nothing above
    // it, and the features import no page, admin module or wiring. `import type` counts too.
    files: ['src/**/*.{ts,mjs}'],
    rules: {
      'import-x/no-restricted-paths': ['error', {
        zones: [
          {
            target: PLUMBING.map((p) => `./src/${p}`),
            from: './src',
            except: PLUMBING.map((p) => `./${p}`),
            message: 'Plumbing (http/, db/, config, logging/, validation/) imports no feature, page or wiring module: move the shared piece down (docs/architecture.md).',
          },
          {
            target: FEATURES.map((p) => `./src/${p}`),
            from: ABOVE_FEATURES.map((p) => `./src/${p}`),
            message: 'A feature imports no page, admin module or wiring: move the shared piece down (docs/architecture.md).',
          },
        ],
      }],
    },
  },
  {
    // The admin API and panel go through the other capabilities' services, never their
    // queries (docs/architecture.md); shared record types live in their own modules
    // (users/user.ts, clients/client.ts, audit/filter.ts).
    files: ['src/admin/**/*.ts'],
    rules: {
      'no-restricted-imports': ['error', { patterns: [{ regex: '^\\.\\./[^/]+/[^/]*queries\\.ts$', message: "admin/ uses the capability's service (or its record type module), not its queries." }] }],
    },
  },
  {
    // Tests read loosely typed JSON answers; their files hold one capability's cases each.
    files: ['test/**/*.ts', 'bench/**/*.ts'],
    rules: {
      '@typescript-eslint/no-explicit-any': 'off',
      'max-lines': ['error', { max: 400, skipBlankLines: true, skipComments: true }],
    },
  },
);
