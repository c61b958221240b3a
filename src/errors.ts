// The errors an operator can act on, and the exit status every error has.

/** The exit status of every error, on every command (docs/health.md, exit status): "could not check", never 0, 1 or 2. */
export const ERROR_EXIT = 3;

/** An error an operator can act on: its message is one sentence that says what to do. */
export class UserError extends Error {
  readonly exitCode = ERROR_EXIT;
}
