// ESLint: typescript-eslint's recommended rules, import cycles refused (import-x/no-cycle),
// and files kept small (max-lines), over the service, its tests, benchmarks and scripts.
import js from '@eslint/js';
import importX from 'eslint-plugin-import-x';
import globals from 'globals';
import tseslint from 'typescript-eslint';

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
