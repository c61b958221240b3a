// Every statement this process sends runs under search_path `pg_catalog, pg_temp`, set for its transaction
// only (docs/decisions.md#the-trust-boundary). kandev's application role commonly owns schema public, and a
// function or operator it plants there with a better-matching signature than the built-in (a format(text,
// text) beside pg_catalog's format(text, VARIADIC "any")) is what an unqualified call resolves to: run by
// us, it runs with the installer's privileges. Pinned per transaction, never per session: behind a
// transaction pooler the server session serves other clients next (docs/install.md#behind-a-connection-pooler).
import type pg from 'pg';
import { PIN_SEARCH_PATH } from '#sql';

/**
 * Statements that cannot run inside a transaction block, nor so inside a multi-statement string: sent as
 * they are. What they name is qualified by hand (sql/message-index*.sql, the procedures they call).
 */
const OUTSIDE_TRANSACTIONS = /^(CALL|VACUUM|REINDEX|CREATE\s+(UNIQUE\s+)?INDEX\s+CONCURRENTLY|DROP\s+INDEX\s+CONCURRENTLY|CREATE\s+DATABASE|DROP\s+DATABASE|ALTER\s+SYSTEM)\b/i;
const STARTS_TRANSACTION = /^(BEGIN|START\s+TRANSACTION)\b/i;

/** The text of a statement, without the comments and blanks before it. */
const leading = (text: string) => text.replace(/^(\s|--[^\n]*\n|\/\*[\s\S]*?\*\/)*/, '');

type Query = pg.Client['query'];
const PINNED = Symbol('search_path pinned');

/**
 * Makes `client.query` pin the search_path in every transaction it sends a statement in, node-pg-migrate's
 * included (the CLI hands it this client):
 * - inside a transaction block, the statement goes as it is: the block was pinned when it began;
 * - a statement that begins one (BEGIN …) goes as it is, followed by the pin (a BEGIN with an isolation
 *   level must come before any other statement of its transaction);
 * - any other goes in BEGIN and the pin (one string), then it, then COMMIT (ROLLBACK when it fails): not in
 *   one string with the pin, which the extended protocol (parameters) cannot take and Citus cannot forward
 *   (it sends a DDL statement's whole string to every worker, where more than one command fails);
 * - what cannot run in a transaction block (CREATE INDEX CONCURRENTLY, CALL of a procedure that commits)
 *   goes as it is, and names only pg_catalog and our schema, by hand.
 * Statements are serialised, so that two sent without waiting cannot interleave with the wrapping.
 */
export function pinSearchPath<C extends pg.Client>(client: C): C {
  const internals = client as unknown as { _txStatus?: string; [PINNED]?: true };
  if (internals[PINNED]) return client;
  internals[PINNED] = true;
  const send = client.query.bind(client) as (...args: unknown[]) => Promise<pg.QueryResult | pg.QueryResult[]>;
  let queue: Promise<unknown> = Promise.resolve();

  const run = async (config: unknown, values: unknown): Promise<unknown> => {
    // pg keeps the transaction status of the last ReadyForQuery ('I' idle, 'T' in a block, 'E' failed block).
    const status = internals._txStatus;
    if (status === undefined) throw new Error('subagent-context: this version of pg does not report the transaction status');
    if (status !== 'I') return send(config, values);
    const text = typeof config === 'string' ? config : (config as { text?: string })?.text;
    if (typeof text !== 'string') return send(config, values);
    const statement = leading(text);
    if (OUTSIDE_TRANSACTIONS.test(statement)) return send(config, values);
    if (STARTS_TRANSACTION.test(statement)) {
      const begun = await send(config, values);
      if (internals._txStatus === 'T') await send(PIN_SEARCH_PATH);
      return begun;
    }
    await send(`BEGIN;\n${PIN_SEARCH_PATH}`);
    try {
      const result = await send(config, values);
      await send('COMMIT');
      return result;
    } catch (err) {
      await send('ROLLBACK').catch(() => {});
      throw err;
    }
  };

  const query = ((config: unknown, values?: unknown, callback?: unknown) => {
    // Callback style and submittables (cursors, streams) are not used by this project: left as they are.
    if (typeof values === 'function' || typeof callback === 'function' ||
        (typeof config === 'object' && config !== null && typeof (config as { submit?: unknown }).submit === 'function')) {
      return send(config, values, callback);
    }
    const result = queue.then(() => run(config, values));
    queue = result.catch(() => {});
    return result;
  }) as unknown as Query;
  client.query = query;
  return client;
}
