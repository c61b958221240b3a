// The migrations send every statement of a .sql file alone (Citus forwards some DDL strings whole to
// its workers, where more than one command fails): splitStatements must cut at top-level semicolons
// only, never inside what can hide one.
import { describe, expect, it } from 'vitest';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { splitStatements } from '../../sql/statements.js';
import { PACKAGE_ROOT } from '../../src/paths.js';

describe('splitStatements', () => {
  it('splits at top-level semicolons only', () => {
    const text = [
      `-- a comment; with a semicolon`,
      `CREATE FUNCTION f() RETURNS text LANGUAGE plpgsql AS $body$ BEGIN RETURN 'a;b'; END $body$;`,
      `SELECT 'it''s; fine', E'back\\'slash;', "odd;name" FROM t; /* block; /* nested; */ still; */`,
      `DO $$ BEGIN PERFORM 1; END $$;`,
      `SELECT $1::text`,
    ].join('\n');
    expect(splitStatements(text)).toEqual([
      `-- a comment; with a semicolon\nCREATE FUNCTION f() RETURNS text LANGUAGE plpgsql AS $body$ BEGIN RETURN 'a;b'; END $body$;`,
      `SELECT 'it''s; fine', E'back\\'slash;', "odd;name" FROM t;`,
      `/* block; /* nested; */ still; */\nDO $$ BEGIN PERFORM 1; END $$;`,
      `SELECT $1::text`,
    ]);
  });

  it('keeps a dollar-quoted body whole when it holds another tag or a lone $', () => {
    const fn = `CREATE FUNCTION g() RETURNS text LANGUAGE plpgsql AS $outer$ BEGIN EXECUTE $q$SELECT 1;$q$; RETURN '$'; END $outer$;`;
    expect(splitStatements(`${fn}\nSELECT 2;`)).toEqual([fn, 'SELECT 2;']);
  });

  it('reads a positional parameter or a $ inside a name as no quote', () => {
    expect(splitStatements('SELECT $1; SELECT a$b FROM t;')).toEqual(['SELECT $1;', 'SELECT a$b FROM t;']);
  });

  it("treats a backslash as an escape only in E'…' strings", () => {
    // In a standard string \ is an ordinary character: the quote after it ends the string.
    expect(splitStatements(`SELECT 'a\\'; SELECT 'b';`)).toEqual([`SELECT 'a\\';`, `SELECT 'b';`]);
    // A name ending in e before a quote is no E'' prefix.
    expect(splitStatements(`SELECT some'x\\'; SELECT 1;`)).toEqual([`SELECT some'x\\';`, 'SELECT 1;']);
    expect(splitStatements(`SELECT e'x\\';y'; SELECT 1;`)).toEqual([`SELECT e'x\\';y';`, 'SELECT 1;']);
  });

  it('drops pieces that hold only comments and blanks, and keeps a last statement without a semicolon', () => {
    expect(splitStatements('SELECT 1;\n-- a trailing; note\n/* and; another */\n')).toEqual(['SELECT 1;']);
    expect(splitStatements('SELECT 1;\n-- a note\nSELECT 2')).toEqual(['SELECT 1;', '-- a note\nSELECT 2']);
    expect(splitStatements('')).toEqual([]);
  });

  it('loses nothing of a shipped .sql file: its statements rejoin to its text, up to a trailing comment', () => {
    const dir = join(PACKAGE_ROOT, 'sql');
    const files = readdirSync(dir, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.sql'));
    expect(files.length).toBeGreaterThan(0);
    const squash = (s: string) => s.replace(/\s+/g, '');
    for (const f of files) {
      const text = readFileSync(join(dir, f), 'utf8');
      const parts = splitStatements(text);
      expect(parts.length, f).toBeGreaterThan(0);
      const joined = squash(parts.join(''));
      expect(squash(text).startsWith(joined), f).toBe(true);
      const rest = squash(text).slice(joined.length);
      expect(rest === '' || rest.startsWith('--') || rest.startsWith('/*'), `${f}: ${rest.slice(0, 80)}`).toBe(true);
      // Every statement but the last ends at its semicolon.
      for (const p of parts.slice(0, -1)) expect(p.endsWith(';'), `${f}: ${p.slice(-80)}`).toBe(true);
    }
  });
});
