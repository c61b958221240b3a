// `report --json`: the report as one JSON object. Text from the database may hold control and bidi
// characters that JSON.stringify leaves raw (DEL, C1 such as U+009B, U+202E): each is written as its \uXXXX
// escape, so the JSON is the same value and nothing reaches a terminal that shows it raw. The characters
// are the ones safe() escapes on the terminal.
import { safe } from '../output.js';
import type { Report } from './model.js';

export function reportJson(report: Report): string {
  // Outside strings JSON has only ASCII and the indentation's newlines; inside, JSON.stringify already
  // escaped every C0 character. What is left to escape is non-ASCII.
  return JSON.stringify(report, null, 2).replace(/[^\n\x20-\x7e]/g, (c) =>
    (safe(c) === c ? c : `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`));
}
