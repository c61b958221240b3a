// The .sql files, rendered for a schema, through the same loader the migrations use.
import { pathToFileURL } from 'node:url';
import { join } from 'node:path';
import { MIGRATIONS_DIR } from './paths.js';

type Loader = typeof import('../migrations/lib/sql.js');
const loader: Loader = await import(pathToFileURL(join(MIGRATIONS_DIR, 'lib', 'sql.js')).href);

export const { sqlFile, sqlStatements, quoteIdent, INSTALL_FILES, HOST_TABLES } = loader;
