export const INSTALL_FILES: string[];
export const HOST_TABLES: string[];
export function quoteIdent(name: string): string;
export function sqlFile(file: string, schema: string): string;
export function sqlStatements(file: string, schema: string): string[];
export function targetSchema(pgm: unknown): Promise<string>;
