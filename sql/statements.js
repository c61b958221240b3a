// Splits SQL text into its top-level statements. Citus forwards the whole query string of some DDL
// (CREATE INDEX, CREATE TRIGGER) to every worker as one prepared statement, which fails when the string
// holds more than one command; sending each statement alone works on every server, so the migrations
// always do. Knows what can hide a semicolon: quoted strings ('…', E'…' with backslash escapes),
// quoted identifiers, dollar-quoted bodies ($tag$…$tag$), and -- and /* */ comments (nested, as
// PostgreSQL nests them).
/** @param {string} sql @returns {string[]} */
export function splitStatements(sql) {
  const out = [];
  let start = 0;
  let i = 0;
  const n = sql.length;
  while (i < n) {
    const c = sql[i];
    const next = sql[i + 1];
    if (c === '-' && next === '-') {
      const end = sql.indexOf('\n', i);
      i = end < 0 ? n : end + 1;
    } else if (c === '/' && next === '*') {
      let depth = 1;
      i += 2;
      while (i < n && depth > 0) {
        if (sql[i] === '/' && sql[i + 1] === '*') { depth++; i += 2; }
        else if (sql[i] === '*' && sql[i + 1] === '/') { depth--; i += 2; }
        else i++;
      }
    } else if (c === "'") {
      const escapes = i > 0 && /[eE]/.test(sql[i - 1]) && !/[A-Za-z0-9_]/.test(sql[i - 2] ?? ' ');
      i++;
      while (i < n) {
        if (escapes && sql[i] === '\\') i += 2;
        else if (sql[i] === "'" && sql[i + 1] === "'") i += 2;
        else if (sql[i] === "'") { i++; break; }
        else i++;
      }
    } else if (c === '"') {
      i++;
      while (i < n) {
        if (sql[i] === '"' && sql[i + 1] === '"') i += 2;
        else if (sql[i] === '"') { i++; break; }
        else i++;
      }
    } else if (c === '$' && !/[A-Za-z0-9_]/.test(sql[i - 1] ?? ' ')) {
      const tag = /^\$([A-Za-z_][A-Za-z0-9_]*)?\$/.exec(sql.slice(i, i + 64));
      if (tag) {
        const end = sql.indexOf(tag[0], i + tag[0].length);
        i = end < 0 ? n : end + tag[0].length;
      } else i++;
    } else if (c === ';') {
      out.push(sql.slice(start, i + 1));
      i++;
      start = i;
    } else i++;
  }
  out.push(sql.slice(start));
  // A piece with nothing but comments and blanks is no statement.
  return out.map((s) => s.trim()).filter((s) => stripComments(s).trim() !== '');
}

/** @param {string} s */
function stripComments(s) {
  return s.replace(/--[^\n]*/g, '').replace(/\/\*[\s\S]*?\*\//g, '');
}
