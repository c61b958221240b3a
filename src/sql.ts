// The .sql files, rendered for a schema, through the loader the migrations use (migrations/lib/sql.js):
// one way from a file in sql/ to the database.
import { pathToFileURL } from 'node:url';
import { join } from 'node:path';
import { MIGRATIONS_DIR } from './paths.js';

export interface InstalledCode {
  version: string;
  code_digest: string | null;
  server_major: number | null;
  /** This package's code, built for this server major. */
  current: boolean;
}

interface Loader {
  PACKAGE_VERSION: string;
  CODE_DIGEST: string;
  HOST_TABLES: string[];
  quoteIdent(name: string): string;
  sqlFile(file: string, schema: string): string;
  sqlStatements(file: string, schema: string): string[];
  dataSql(schema: string): string[];
  codeSql(schema: string): string[];
  uninstallSql(schema: string): string[];
  transactionStatements(schema: string, sqls: string[]): string[];
  installedCode(select: (text: string, values?: unknown[]) => Promise<Record<string, unknown>[]>, schema: string): Promise<InstalledCode | null>;
}

const loader = (await import(pathToFileURL(join(MIGRATIONS_DIR, 'lib', 'sql.js')).href)) as Loader;

export const {
  PACKAGE_VERSION, CODE_DIGEST, HOST_TABLES, quoteIdent, sqlFile, sqlStatements, dataSql, codeSql, uninstallSql,
  installedCode, transactionStatements,
} = loader;
