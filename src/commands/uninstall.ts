import type pg from 'pg';
import type { Command } from './types.js';
import { assertSchemaExists, assertWritable, explain, inTransaction, withClient } from '../db.js';
import { UserError } from '../errors.js';
import { migrate } from '../install.js';
import { MIGRATIONS_TABLE } from '../paths.js';
import { ACTIVATION_KEYS, dropDataStatements, quoteIdent, sqlStatements, uninstallStatements } from '#sql';
import { SQL } from 'sql-template-strings';
import { printJson, safe } from '../output.js';
import { sameRelease } from '../installed.js';
import { assertInstaller } from '../owner.js';
import { cancelOnInterrupt } from '../interrupt.js';

export const uninstallCommand: Command = {
  name: 'uninstall',
  summary: 'remove the trigger and functions (and, with --drop-data, the rows)',
  usage: `subagent-context uninstall [--database-url URL] [--schema S] [--drop-data] [--json]

Runs the migrations down, then removes whatever of the installation is still there (a trigger left
by a partial or hand-made removal, functions, the counters, health's index, the activation keys), and
prints what it removed. The derived rows and the failure log stay unless --drop-data is given.
--drop-data drops only a task_session_subagents that subagent-context created: when kandev created it
(adopted at install), it refuses and removes nothing. docs/uninstall.md

Example:
  subagent-context uninstall --schema tenant_a`,
  options: { 'drop-data': { type: 'boolean' } },
  async run(ctx) {
    return withClient(ctx.databaseUrl, async (client) => {
      await assertWritable(client);
      await assertSchemaExists(client, ctx.schema);
      // Any earlier release's installation is removed; a newer one's is left to its own release, which knows its objects.
      await sameRelease(client, ctx.schema, 'older');
      await assertInstaller(client, ctx.schema, 'uninstall');
      const before = await inventory(client, ctx.schema);
      const dropData = Boolean(ctx.args['drop-data']);
      if (isEmpty(before) && !(dropData && before.tables.length > 0)) {
        // Idempotent for scripts, but honest: say that nothing was there.
        if (ctx.json) printJson({ removed: {}, kept: before.tables, dropped: [] });
        else console.log(`nothing to uninstall: subagent-context is not installed in schema "${safe(ctx.schema)}"`);
        return 0;
      }
      const dataStatements = dropData ? dropDataStatements(ctx.schema) : [];
      // The deactivation refuses when kandev_meta carries code of its owner's, but only in the last
      // transaction, after the migrations down have committed: ask first, so that it changes nothing.
      if (before.keys.length > 0) await assertMetaWritable(client, ctx.schema);
      // Ctrl-C cancels the statement running (on Citus, with what it runs on the workers) and says what
      // had been removed; a failure (a lock it could not take) says it too, when anything had been.
      const after = await cancelOnInterrupt(client, ctx.databaseUrl!, {
        describe: async (admin) => `uninstall was interrupted: ${await whatChanged(admin, ctx.schema, before)}`,
      }, async () => {
        try {
          // --drop-data refuses before anything is removed when the table is kandev's (its first statement).
          if (dataStatements.length) await client.query(dataStatements[0]);
          if (before.migrations.length > 0) await migrate(client, ctx.schema, 'down');
          // What the migrations did not remove (they were never recorded, their bookkeeping was dropped, or a
          // removal by hand stopped halfway): the same SQL, once more, in one transaction.
          if (!isEmpty(await inventory(client, ctx.schema))) await removeCode(client, ctx.schema);
          for (const statement of dataStatements) await client.query(statement);
        } catch (err) {
          throw await withWhatChanged(err, client, ctx.schema, before);
        }
        return inventory(client, ctx.schema);
      });
      if (!isEmpty(after)) {
        throw new UserError(`uninstall left ${describe(after)} in schema "${ctx.schema}", which it does not know how ` +
          'to remove: drop them by hand (docs/uninstall.md, by hand with psql).');
      }
      const removed = difference(before, after);
      const dropped = before.tables.filter((t) => !after.tables.includes(t));
      if (ctx.json) printJson({ removed, kept: after.tables, dropped });
      else {
        console.log(`removed: ${describe(removed)}`);
        if (dropped.length) console.log(`dropped: ${dropped.join(', ')}`);
        console.log(after.tables.length ? `uninstalled; kept ${after.tables.join(' and ')}` : 'uninstalled; data dropped');
      }
      return 0;
    });
  },
};

/** What of an installation a schema holds, by kind, read from the catalog whatever state it is in. */
export interface Inventory {
  trigger: string[];
  functions: string[];
  types: string[];
  indexes: string[];
  counters: string[];
  keys: string[];
  migrations: string[];
  /** The data: kept unless --drop-data. */
  tables: string[];
}

const CODE_KINDS = ['trigger', 'functions', 'types', 'indexes', 'counters', 'keys', 'migrations'] as const;

function isEmpty(i: Inventory): boolean {
  return CODE_KINDS.every((k) => i[k].length === 0);
}

function difference(before: Inventory, after: Inventory): Partial<Inventory> {
  const out: Partial<Inventory> = {};
  for (const k of CODE_KINDS) {
    const gone = before[k].filter((x) => !after[k].includes(x));
    if (gone.length) out[k] = gone;
  }
  return out;
}

/** "the trigger subagent_context_capture, 31 functions, …": one phrase per kind present. */
function describe(i: Partial<Inventory>): string {
  const n = (k: keyof Inventory) => i[k]?.length ?? 0;
  const parts = [
    n('trigger') && `the trigger ${i.trigger!.join(', ')}`,
    n('functions') && `${n('functions')} function${n('functions') === 1 ? '' : 's'}`,
    n('types') && `the type ${i.types!.join(', ')}`,
    n('indexes') && `the index ${i.indexes!.join(', ')} on task_session_messages`,
    n('counters') && `${n('counters')} counter sequence${n('counters') === 1 ? '' : 's'}`,
    n('keys') && `${n('keys')} activation key${n('keys') === 1 ? '' : 's'}`,
    n('migrations') && `${n('migrations')} migration record${n('migrations') === 1 ? '' : 's'}`,
  ].filter(Boolean);
  return parts.length ? parts.join(', ') : 'nothing';
}

export async function inventory(client: pg.ClientBase, schema: string): Promise<Inventory> {
  const names = async (query: ReturnType<typeof SQL>) => (await client.query(query)).rows.map((r) => r.name as string);
  const messages = SQL`to_regclass(format('%I.task_session_messages', ${schema}::text))`;
  const migrations = SQL`to_regclass(format('%I.%I', ${schema}::text, ${MIGRATIONS_TABLE}::text))`;
  const meta = SQL`to_regclass(format('%I.kandev_meta', ${schema}::text))`;
  const hasMigrations = (await client.query(SQL`SELECT `.append(migrations).append(' IS NOT NULL AS x'))).rows[0].x;
  const hasMeta = (await client.query(SQL`SELECT `.append(meta).append(' IS NOT NULL AS x'))).rows[0].x;
  return {
    trigger: await names(SQL`SELECT tgname AS name FROM pg_trigger WHERE tgname = 'subagent_context_capture' AND tgrelid = `
      .append(messages)),
    ...await ourCode(client, schema),
    indexes: await names(SQL`SELECT c.relname AS name FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
       WHERE n.nspname = ${schema} AND c.relkind IN ('i', 'I')
         AND c.relname IN ('subagent_context_recent_messages_idx', 'subagent_context_recent_messages_idx_old')
       ORDER BY 1`),
    // As sql/uninstall/capture.sql finds them: named subagent_context_*_seq, owned by no column.
    counters: await names(SQL`SELECT s.relname AS name FROM pg_class AS s JOIN pg_namespace AS n ON n.oid = s.relnamespace
       WHERE n.nspname = ${schema} AND s.relkind = 'S' AND s.relname LIKE 'subagent\\_context\\_%\\_seq'
         AND NOT EXISTS (SELECT 1 FROM pg_depend AS d
                          WHERE d.classid = 'pg_class'::regclass AND d.objid = s.oid AND d.deptype IN ('a', 'i'))
       ORDER BY 1`),
    keys: hasMeta ? await names(SQL`SELECT key AS name FROM `.append(`${quoteIdent(schema)}.kandev_meta`)
      .append(SQL` WHERE key = ANY (${ACTIVATION_KEYS}) ORDER BY 1`)) : [],
    migrations: hasMigrations ? await names(SQL`SELECT name FROM `.append(`${quoteIdent(schema)}.${MIGRATIONS_TABLE}`).append(' ORDER BY run_on, id')) : [],
    tables: await names(SQL`SELECT t AS name FROM unnest(ARRAY['task_session_subagents', 'subagent_context_failures']) AS t
       WHERE to_regclass(format('%I.%I', ${schema}::text, t)) IS NOT NULL`),
  };
}

/**
 * The functions and the row type of any release here, by sql/data/ours.sql's rule, in a transaction rolled
 * back: where the rule is not installed (an earlier release's installation, or what an uninstall left) it
 * is applied there first. The rule itself is not counted.
 */
async function ourCode(client: pg.ClientBase, schema: string): Promise<Pick<Inventory, 'functions' | 'types'>> {
  return inTransaction(client, async () => {
    const { rows: [{ present }] } = await client.query(
      SQL`SELECT to_regprocedure(format('%I.subagent_context_ours()', ${schema}::text)) IS NOT NULL AS present`);
    if (!present) for (const statement of sqlStatements('data/ours.sql', schema)) await client.query(statement);
    const { rows } = await client.query<{ kind: string; name: string }>(
      `SELECT o.kind, CASE o.kind WHEN 'TYPE' THEN o.name::text
                      ELSE pg_catalog.format('%s(%s)', o.name, pg_catalog.pg_get_function_identity_arguments(o.oid)) END AS name
         FROM ${quoteIdent(schema)}.subagent_context_ours() AS o
        WHERE o.name <> 'subagent_context_ours' ORDER BY 2`);
    return { functions: rows.filter((r) => r.kind !== 'TYPE').map((r) => r.name), types: rows.filter((r) => r.kind === 'TYPE').map((r) => r.name) };
  }, { rollback: () => true });
}

/**
 * What an uninstall stopped part-way had changed, read from the database against `before`: the migrations
 * down commit one by one, and the last transaction removes the trigger, the keys and the code together
 * (the CLI's deactivation waits for it, migrations/lib/steps.js), so what is left is whole.
 */
export async function whatChanged(c: pg.ClientBase, schema: string, before: Inventory): Promise<string> {
  const now = await inventory(c, schema);
  const rerun = 'run `subagent-context uninstall` again to finish';
  if (isEmpty(now)) return `it had already finished: removed ${describe(difference(before, now))}.`;
  const capture = now.trigger.length === 0 ? 'the capture trigger is removed'
    : now.keys.length === ACTIVATION_KEYS.length ? 'capture is still installed and activated'
      : 'the capture trigger is still installed, and capture is not activated';
  const removed = difference(before, now);
  if (Object.keys(removed).length === 0) return `the transaction running was rolled back and nothing was removed: ${capture}; ${rerun}.`;
  return `the transaction running was rolled back; before it, uninstall had removed ${describe(removed)} (committed): ${capture}; ${rerun}.`;
}

/** An error that stopped an uninstall, with what had been removed before it, when anything had. */
async function withWhatChanged(err: unknown, client: pg.Client, schema: string, before: Inventory): Promise<unknown> {
  const now = await inventory(client, schema).catch(() => null);
  if (!now || Object.keys(difference(before, now)).length === 0) return err;
  const explained = explain(err);
  // The sentence of the transaction that failed speaks for that transaction only.
  const sentence = explained.message.replace(/[.\s]+$/, '').replace('nothing was changed', 'that transaction was rolled back');
  return new UserError(`${sentence}; ${await whatChanged(client, schema, before)}`);
}

/** sql/code/meta-writable.sql's check, in a transaction that is rolled back: it refuses in one sentence, or changes nothing. */
async function assertMetaWritable(client: pg.Client, schema: string): Promise<void> {
  await inTransaction(client, async () => {
    for (const statement of sqlStatements('code/meta-writable.sql', schema)) await client.query(statement);
    await client.query(`SELECT ${quoteIdent(schema)}.subagent_context_assert_meta_writable()`);
  }, { rollback: () => true });
}

/** What the first migration's down does (migrations/lib/steps.js uninstall), in one transaction. */
async function removeCode(client: pg.Client, schema: string): Promise<void> {
  await inTransaction(client, async () => {
    for (const statement of uninstallStatements(schema)) await client.query(statement);
  });
}
