// The process title (what `ps` and /proc/<pid>/cmdline show every user of the machine) with the password
// of --database-url masked. Linux gives the title the space the command line had: a longer title is cut
// at its end, so a mask longer than the password it hides (a password of one or two characters) shortens
// the title's tail, never shows the password.
import { readFileSync } from 'node:fs';
import { redactUrl } from './secrets.js';

const OPTION = '--database-url';

/** `argv` with the value of every --database-url (`--database-url URL` and `--database-url=URL`) shown redacted. */
export function maskedArgv(argv: string[]): string[] {
  const mask = (url: string) => {
    const shown = redactUrl(url);
    return shown.includes('***') ? shown : url; // nothing hidden: as typed, not as the URL parser spells it
  };
  return argv.map((arg, i) => {
    if (arg.startsWith(`${OPTION}=`)) return `${OPTION}=${mask(arg.slice(OPTION.length + 1))}`;
    return argv[i - 1] === OPTION ? mask(arg) : arg;
  });
}

/** The command line as started: on Linux exactly as typed (/proc/self/cmdline), elsewhere Node's view of it. */
function commandLine(): string[] {
  try {
    return readFileSync('/proc/self/cmdline', 'utf8').split('\0').slice(0, -1);
  } catch {
    return [process.argv0, ...process.execArgv, ...process.argv.slice(1)];
  }
}

/** Sets the process title to the command line with its passwords masked, when it holds one. */
export function maskPasswordsInTitle(): void {
  const argv = commandLine();
  const masked = maskedArgv(argv);
  if (masked.some((arg, i) => arg !== argv[i])) process.title = masked.join(' ');
}
