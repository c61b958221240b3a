// typescript-eslint's recommended rules over every TypeScript file and the install core's JavaScript (sql/,
// migrations/: type-checked from its JSDoc, tsconfig's checkJs), plus the type-aware rules that catch what
// a test suite gets wrong most: a promise nobody awaits (a check that never runs) or awaits twice.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', '.embedded-pg/'] },
  js.configs.recommended,
  tseslint.configs.recommended,
  {
    files: ['**/*.ts', 'sql/**/*.js', 'sql/**/*.mjs', 'migrations/**/*.js'],
    languageOptions: {
      parserOptions: { project: './tsconfig.test.json', tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/await-thenable': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      // `const { id, ...rest } = row` is how a test compares a row without its generated id.
      '@typescript-eslint/no-unused-vars': ['error', { ignoreRestSiblings: true, argsIgnorePattern: '^_' }],
    },
  },
  {
    // TypeScript checks names in the JavaScript too (checkJs), with Node's globals.
    files: ['**/*.js', '**/*.mjs'],
    rules: { 'no-undef': 'off' },
  },
  {
    // Tests assert on terminal output, escape sequences included.
    files: ['test/**/*.ts'],
    rules: { 'no-control-regex': 'off' },
  },
);
