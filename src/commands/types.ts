export interface CommandContext {
  databaseUrl: string | undefined;
  schema: string;
  json: boolean;
  verbose: boolean;
  args: Record<string, string | boolean | undefined>;
  positionals: string[];
}

export interface Command {
  name: string;
  summary: string;
  usage: string;
  /** Extra options: name -> parseArgs option config. */
  options?: Record<string, { type: 'string' | 'boolean'; short?: string }>;
  /** Groups of options of which at most one may be given (e.g. --once and --listen). */
  conflicts?: string[][];
  /** Takes no database (the demo starts its own): --database-url and the PG* variables are not read. */
  offline?: boolean;
  /** With --json, an error is one object on stdout too ({"status": "error", "error": the sentence}), for scripts that parse it. */
  jsonErrors?: boolean;
  run(ctx: CommandContext): Promise<number>;
}
