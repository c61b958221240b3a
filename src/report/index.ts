// `subagent-context report`, one job a file: the window (window.ts), reading the snapshot (read.ts, the
// queries in sql/dashboards/ and sql/report/), what each section shows (sections.ts, with format.ts), and
// its renderers: the terminal (terminal.ts, on layout.ts), the page (html.ts) and JSON (json.ts).
export type { Report, TopRow, UsageRow } from './model.js';
export { futureWindowWarning, parseWindow, parseWhen, type ReportWindow } from './window.js';
export { readReport, statementTimeout, DEFAULT_STATEMENT_TIMEOUT, type ReadOptions } from './read.js';
export { renderText } from './terminal.js';
export { renderHtml } from './html.js';
export { reportJson } from './json.js';
