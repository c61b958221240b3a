/** Splits SQL text into its top-level statements (see statements.js). */
export function splitStatements(sql: string): string[];
