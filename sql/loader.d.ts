// Types of loader.js for the TypeScript side (src/ imports it as `#sql`, package.json "imports").
export const PACKAGE_VERSION: string;
/** sql/manifest.txt: each section's files, in order. */
export const MANIFEST: Record<string, string[]>;
export const DATA_FILES: string[];
export const CODE_FILES: string[];
export const HOST_TABLES: string[];
export const ACTIVATION_KEYS: string[];
export const COUNTERS: string[];
export const CODE_DIGEST: string;
/** The capture prefilter over a text expression (loader.js). */
export function MAY_QUALIFY(text: string): string;
/** Health's index on task_session_messages: definition after `ON <table>`, and its comment. */
export const HEALTH_INDEX: { definition: string; comment: string };

export interface InstalledCode {
  version: string;
  code_digest: string | null;
  server_major: number | null;
  /** subagent_context_health() is there to ask (a removal by hand that stopped halfway may have dropped it). */
  health: boolean;
  /** This package's code, built for this server major. */
  current: boolean;
}

/** The search_path every transaction of ours runs under, and the statement that pins it for its transaction. */
export const PINNED_SEARCH_PATH: string;
export const PIN_SEARCH_PATH: string;
export function quoteIdent(name: string): string;
/** One file of sql/, rendered for `schema`. */
export function sqlFile(file: string, schema: string): string;
/** One file of sql/, rendered for `schema`, as its pieces separated by `-- statement` lines. */
export function sqlStatements(file: string, schema: string): string[];
/** Install or upgrade as the statements of one transaction (the data layer, and the code layer unless `code` is false). */
export function installStatements(schema: string, opts?: { code?: boolean }): string[];
/** Uninstall as the statements of one transaction. */
export function uninstallStatements(schema: string): string[];
/** The guard every migration transaction starts with (guards/migration-guard.sql), as one string of statements. */
export function migrationGuard(schema: string, opts: { lock: string; bookkeeping?: string | null; expected?: number | null;
  schema?: string | null; holdIndexBuilds?: boolean }): string;
/** Deactivation (the activation keys go) as its statements. */
export function deactivateStatements(schema: string): string[];
export function installedCode(select: (text: string, values?: unknown[]) => Promise<Record<string, unknown>[]>, schema: string): Promise<InstalledCode | null>;
export function targetSchema(pgm: unknown, given?: string): Promise<string>;
/** `uninstall --drop-data`'s statements (manifest section drop-data). */
export function dropDataStatements(schema: string): string[];
