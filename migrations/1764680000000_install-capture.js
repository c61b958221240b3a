// Installs capture: the table (created or adopted), failures log, stats, derivation, trigger, backfill,
// health and repair, from the .sql files in sql/.
import { INSTALL_FILES, sqlFile, targetSchema } from './lib/sql.js';

export async function up(pgm) {
  const schema = await targetSchema(pgm);
  for (const file of INSTALL_FILES) pgm.sql(sqlFile(file, schema));
}

export async function down(pgm) {
  const schema = await targetSchema(pgm);
  pgm.sql(sqlFile('uninstall.sql', schema));
}
