// typescript-eslint's recommended rules over every TypeScript file, plus the type-aware rules that catch
// what a test suite gets wrong most: a promise nobody awaits (a check that never runs) or awaits twice.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', '.embedded-pg/', 'migrations/', 'sql/'] },
  js.configs.recommended,
  tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
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
    // Tests assert on terminal output, escape sequences included.
    files: ['test/**/*.ts'],
    rules: { 'no-control-regex': 'off' },
  },
);
