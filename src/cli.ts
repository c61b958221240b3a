#!/usr/bin/env node
// The `subagent-context` command: one file per verb in src/commands/.
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
import { UserError, explain } from './db.js';
import { red } from './output.js';

const commands: Command[] = [upCommand, backfillCommand, healthCommand, repairCommand, reportCommand, metricsCommand, uninstallCommand, demoCommand];

const COMMON = {
  'database-url': { type: 'string' as const },
  schema: { type: 'string' as const },
  json: { type: 'boolean' as const },
  verbose: { type: 'boolean' as const },
  help: { type: 'boolean' as const, short: 'h' },
};

function topUsage(): string {
  const width = Math.max(...commands.map((c) => c.name.length));
  return `subagent-context: records how AI agents fan out to subagents, inside kandev's PostgreSQL

Usage: subagent-context <command> [options]

Commands:
${commands.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`).join('\n')}

Options (every command):
  --database-url URL   the database (default: $DATABASE_URL)
  --schema S           the schema holding kandev's tables (default: public)
  --json               machine-readable output
  --verbose            show stack traces on errors
  -h, --help           help for a command

Run \`subagent-context <command> --help\` for examples.`;
}

export async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    console.log(topUsage());
    return name ? 0 : 2;
  }
  const command = commands.find((c) => c.name === name);
  if (!command) {
    console.error(red(`error: unknown command "${name}". Run \`subagent-context --help\` for the list.`));
    return 2;
  }
  let parsed;
  try {
    parsed = parseArgs({ args: rest, options: { ...COMMON, ...(command.options ?? {}) }, allowPositionals: true, strict: true });
  } catch (err) {
    console.error(red(`error: ${(err as Error).message}. Run \`subagent-context ${name} --help\`.`));
    return 2;
  }
  const values = parsed.values as Record<string, string | boolean | undefined>;
  if (values.help) {
    console.log(command.usage);
    return 0;
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
    console.error(red(`error: ${e.message}`));
    if (verbose && !(e instanceof UserError)) console.error(e.stack);
    else if (verbose) console.error((err as Error).stack);
    return e instanceof UserError ? e.exitCode : 1;
  }
}

void main(process.argv.slice(2)).then((code) => { process.exitCode = code; });
