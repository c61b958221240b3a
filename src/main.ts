// What `subagent-context …` does with its arguments (src/cli.ts runs it): one file per verb in src/commands/.
// Importing this runs nothing, so argument handling is tested in-process (test/unit/arguments.test.ts).
import { parseArgs } from 'node:util';
import type { Command } from './commands/types.js';
import { upCommand } from './commands/up.js';
import { backfillCommand } from './commands/backfill.js';
import { healthCommand } from './commands/health.js';
import { repairCommand } from './commands/repair.js';
import { uninstallCommand } from './commands/uninstall.js';
import { demoCommand } from './commands/demo.js';
import { reportCommand } from './commands/report.js';
import { metricsCommand } from './commands/metrics.js';
import { explain, PrivilegeError, privilegeMessage } from './db.js';
import { ERROR_EXIT } from './errors.js';
import { scrubSecrets } from './secrets.js';
import { resolveConnection } from './connection.js';
import { printJson, red, safe, safeLines } from './output.js';
import { OtherRelease } from './installed.js';
import { PACKAGE_VERSION } from '#sql';

const commands: Command[] = [upCommand, backfillCommand, healthCommand, repairCommand, reportCommand, metricsCommand, uninstallCommand, demoCommand];

const COMMON = {
  'database-url': { type: 'string' as const },
  schema: { type: 'string' as const },
  json: { type: 'boolean' as const },
  verbose: { type: 'boolean' as const },
  help: { type: 'boolean' as const, short: 'h' },
  version: { type: 'boolean' as const },
};

function topUsage(): string {
  const width = Math.max(...commands.map((c) => c.name.length));
  return `subagent-context ${PACKAGE_VERSION}: records how AI agents fan out to subagents, inside kandev's PostgreSQL

Usage: subagent-context <command> [options]

Commands:
${commands.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`).join('\n')}

Options (every command):
  --database-url URL   the database: a URL or libpq's key=value string (default: $DATABASE_URL, else the PG*
                       variables and pg_service.conf, as psql reads them)
  --schema S           the schema holding kandev's tables (default: public)
  --json               machine-readable output
  --verbose            show stack traces on errors
  --version            print the version (${PACKAGE_VERSION}) and exit
  -h, --help           help for a command

Exit status: 3 on any error (bad arguments, unreachable database, refused login, missing privilege);
\`health\` also uses 0, 1 and 2 for what it found (see \`subagent-context health --help\`).

Run \`subagent-context <command> --help\` for examples.`;
}

/** The candidate closest to `given` in edits, when it is close enough to be a typo (at most a third of it). */
export function nearest(given: string, candidates: string[]): string | undefined {
  const distance = (a: string, b: string) => {
    let row = Array.from({ length: b.length + 1 }, (_, j) => j);
    let before = row;
    for (let i = 1; i <= a.length; i++) {
      const next = [i];
      for (let j = 1; j <= b.length; j++) {
        next[j] = Math.min(row[j]! + 1, next[j - 1]! + 1, row[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
        // Two letters swapped (--sinec for --since) is one typo, not two.
        if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) next[j] = Math.min(next[j]!, before[j - 2]! + 1);
      }
      before = row;
      row = next;
    }
    return row[b.length]!;
  };
  const scored = candidates.map((c) => ({ c, d: distance(given.toLowerCase(), c) })).sort((x, y) => x.d - y.d);
  const best = scored[0];
  // A prefix counts too: `--drop` for `--drop-data`.
  const prefixed = candidates.filter((c) => given.length >= 3 && c.startsWith(given.toLowerCase()));
  if (prefixed.length === 1) return prefixed[0];
  return best && best.d <= Math.max(1, Math.floor(given.length / 3)) ? best.c : undefined;
}

/** Node's parser errors (two sentences, quotes) as one sentence of ours, with a suggestion for a typo. */
function optionError(err: Error & { code?: string }, args: string[], options: Record<string, { type: string; short?: string }>): string {
  const quoted = /'([^']+)'/.exec(err.message)?.[1] ?? '';
  if (err.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') {
    const flag = quoted.replace(/=.*$/, '');
    const near = flag.startsWith('--') ? nearest(flag.slice(2), Object.keys(options)) : undefined;
    return `unknown option ${safe(flag)}${near ? `: did you mean --${near}?` : '.'}`;
  }
  if (err.code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE') {
    const flag = quoted.split(' ')[0]!;
    const option = options[flag.replace(/^--/, '')];
    return option?.type === 'boolean'
      ? `${flag} is a switch and takes no value, got "${safe(args.find((a) => a.startsWith(`${flag}=`)) ?? flag)}".`
      : `${flag} needs a value, as in ${flag} VALUE.`;
  }
  return `${err.message.replace(/\.$/, '')}.`;
}

/**
 * `--since -3d`: a value that starts with a minus and a digit is the value of the option before it, not an
 * option of its own (node's parser would say "--since needs a value"). Written `--since=-3d` for the parser.
 */
export function joinNegativeValues(args: string[], options: Record<string, { type: string }>): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    const next = args[i + 1];
    if (/^--[^=]+$/.test(a) && options[a.slice(2)]?.type === 'string' && next !== undefined && /^-\d/.test(next)) {
      out.push(`${a}=${next}`);
      i++;
    } else out.push(a);
  }
  return out;
}

/** An error before any command ran: one sentence on stderr, exit 3 (never a status a check means). */
function usageError(message: string): number {
  console.error(red(`error: ${safeLines(message)}`));
  return ERROR_EXIT;
}

export async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === '--version' || name === '-V' || name === 'version') {
    console.log(PACKAGE_VERSION);
    return 0;
  }
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    if (name) { console.log(topUsage()); return 0; }
    console.error(topUsage());
    return ERROR_EXIT;
  }
  const command = commands.find((c) => c.name === name);
  if (!command) {
    const near = nearest(name, commands.map((c) => c.name));
    return usageError(`unknown command "${name}"${near ? `: did you mean \`subagent-context ${near}\`?` : '.'} ` +
      'Run `subagent-context --help` for the list.');
  }
  const options = { ...COMMON, ...(command.options ?? {}) };
  let parsed;
  try {
    parsed = parseArgs({ args: joinNegativeValues(rest, options), options, allowPositionals: true, strict: true });
  } catch (err) {
    return usageError(`${optionError(err as Error & { code?: string }, rest, options)} Run \`subagent-context ${name} --help\`.`);
  }
  const values = parsed.values as Record<string, string | boolean | undefined>;
  if (values.version) {
    console.log(PACKAGE_VERSION);
    return 0;
  }
  if (values.help) {
    console.log(command.usage);
    return 0;
  }
  if (parsed.positionals.length > 0) {
    return usageError(`${name} takes no arguments, got ${parsed.positionals.map((p) => `"${p}"`).join(', ')}. ` +
      `Options start with --; run \`subagent-context ${name} --help\`.`);
  }
  for (const group of command.conflicts ?? []) {
    const given = group.filter((o) => values[o] !== undefined);
    if (given.length > 1) {
      return usageError(`${given.map((o) => `--${o}`).join(' and ')} cannot be combined: pick one. ` +
        `Run \`subagent-context ${name} --help\`.`);
    }
  }
  const verbose = Boolean(values.verbose);
  const schema = (values.schema as string | undefined) ?? 'public';
  const given = (values['database-url'] as string | undefined) ?? process.env.DATABASE_URL;
  const givenBy = values['database-url'] !== undefined ? '--database-url' : 'DATABASE_URL';
  let databaseUrl: string | undefined;
  try {
    databaseUrl = command.offline ? undefined : resolveConnection(given, process.env, givenBy);
    return await command.run({
      databaseUrl,
      schema,
      json: Boolean(values.json),
      verbose,
      args: values,
      positionals: parsed.positionals,
    });
  } catch (err) {
    const e = explain(err);
    // The installation's SQL starts its own sentences with the product's name, for psql and logs; after
    // "error: " here it would be said twice.
    const message = (e instanceof PrivilegeError ? privilegeMessage(name, schema, e) : e.message).replace(/^subagent-context: /, '');
    // Error messages can quote database values (a schema name, a failure's text): escaped for the terminal.
    // Whatever produced them, no password leaves (src/secrets.ts).
    const sentence = scrubSecrets(message, databaseUrl, given);
    // The upgrade window's answer carries its own status (src/commands/health.ts).
    if (command.jsonErrors && values.json && !(e instanceof OtherRelease)) printJson({ status: 'error', error: sentence });
    console.error(red(`error: ${safeLines(sentence)}`));
    if (verbose) console.error(scrubSecrets((err as Error)?.stack ?? String(err), databaseUrl, given));
    return ERROR_EXIT;
  }
}

