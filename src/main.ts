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
import { explain, ERROR_EXIT } from './db.js';
import { red, safeLines } from './output.js';
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
  --database-url URL   the database (default: $DATABASE_URL)
  --schema S           the schema holding kandev's tables (default: public)
  --json               machine-readable output
  --verbose            show stack traces on errors
  --version            print the version (${PACKAGE_VERSION}) and exit
  -h, --help           help for a command

Exit status: 3 on any error (bad arguments, unreachable database, refused login, missing privilege);
\`health\` also uses 0, 1 and 2 for what it found (see \`subagent-context health --help\`).

Run \`subagent-context <command> --help\` for examples.`;
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
  if (!command) return usageError(`unknown command "${name}". Run \`subagent-context --help\` for the list.`);
  let parsed;
  try {
    parsed = parseArgs({ args: rest, options: { ...COMMON, ...(command.options ?? {}) }, allowPositionals: true, strict: true });
  } catch (err) {
    return usageError(`${(err as Error).message.replace(/\.$/, '')}. Run \`subagent-context ${name} --help\`.`);
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
  try {
    return await command.run({
      databaseUrl: (values['database-url'] as string | undefined) ?? process.env.DATABASE_URL,
      schema: (values.schema as string | undefined) ?? 'public',
      json: Boolean(values.json),
      verbose,
      args: values,
      positionals: parsed.positionals,
    });
  } catch (err) {
    const e = explain(err);
    // Error messages can quote database values (a schema name, a failure's text): escaped for the terminal.
    console.error(red(`error: ${safeLines(e.message)}`));
    if (verbose) console.error((err as Error)?.stack ?? String(err));
    return ERROR_EXIT;
  }
}
