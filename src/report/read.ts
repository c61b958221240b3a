// Reading the report: every query in sql/dashboards/ and sql/report/ (one file per panel, readable on
// their own) in one read-only snapshot, bounded by a statement timeout. No SQL lives here.
import type pg from 'pg';
import { quoteIdent, sqlFile } from '#sql';
import { UserError } from '../errors.js';
import { inTransaction } from '../db.js';
import { readDashboard } from '../dashboards.js';
import { safe } from '../output.js';
import type { Report, TopRow, UsageRow } from './model.js';
import type { ReportWindow } from './window.js';

/**
 * The windowed panels, each one file taking $1 (since) and $2 (until): those Grafana also shows live in
 * sql/dashboards/ (its builder puts the time picker's range in $1/$2), the report's own in sql/report/.
 */
const WINDOWED = {
  identity: 'report/identity.sql',
  overview: 'dashboards/overview.sql',
  fanout_per_turn: 'dashboards/fanout-per-turn.sql',
  sessions_and_cards: 'dashboards/sessions-and-cards.sql',
  subagents_per_session: 'dashboards/subagents-per-session.sql',
  usage: 'dashboards/usage.sql',
  agent_status: 'dashboards/agent-status.sql',
  nesting: 'dashboards/nesting.sql',
  settlement: 'dashboards/settlement.sql',
  running: 'report/running.sql',
  top: 'report/top.sql',
  trend_per_day: 'report/trend-per-day.sql',
} as const;
const SINGLE_ROW = new Set(['identity', 'overview', 'sessions_and_cards', 'settlement', 'health', 'stats']);

/** The statement timeout `report` sets when neither --statement-timeout nor the server, role or PGOPTIONS set one. */
export const DEFAULT_STATEMENT_TIMEOUT = '5min';

/**
 * The statement timeout the report runs under: --statement-timeout when given (0 = none); else the
 * session's own (from the server, the database, the role or PGOPTIONS) when it has one; else 5 minutes,
 * so a runaway query cannot run forever. Returns null to keep the session's.
 */
export function statementTimeout(flag: string | undefined, session: string): string | null {
  if (flag !== undefined) {
    const v = flag.trim();
    if (!/^\d{1,9}\s*(ms|s|min|h|d)?$/.test(v)) {
      throw new UserError(`--statement-timeout must be a duration like 30s, 5min or 1h (0 for none), got "${safe(flag)}".`);
    }
    return v.replace(/\s+/g, '');
  }
  return session === '0' ? DEFAULT_STATEMENT_TIMEOUT : null;
}

export interface ReadOptions {
  window?: ReportWindow;
  /** The host as the operator named it (the connection URL's); else the server's address. */
  host?: string;
  /** --statement-timeout as given (see statementTimeout()). */
  statementTimeout?: string;
}

/** Runs every report query in one read-only snapshot, so the panels agree with each other. */
export async function readReport(client: pg.ClientBase, schema: string, opts: ReadOptions = {}): Promise<Report> {
  const window = opts.window ?? { since: null, until: null };
  const raw: Record<string, unknown> = {};
  const unavailable: Record<string, string> = {};
  const q = (file: string, params: unknown[] = []) => readDashboard(client, schema, file, params);
  let timeout = '';
  try {
    await inTransaction(client, async () => {
      const session = (await client.query(`SELECT current_setting('statement_timeout') AS t`)).rows[0].t as string;
      const chosen = statementTimeout(opts.statementTimeout, session);
      timeout = chosen ?? session;
      if (chosen !== null) await client.query(`SELECT set_config('statement_timeout', $1, true)`, [chosen]);

      const [features] = (await client.query(sqlFile('report/host-features.sql', schema), [schema])).rows;
      const topology = features.has_topology ? (await q('report/topology.sql'))[0].topology : 'plain';
      if (topology === 'citus') {
        unavailable.nesting = 'Nesting is not available on Citus: it follows parent links with a recursive query, ' +
          'which Citus runs over distributed tables only within one session.';
      }
      for (const [key, file] of Object.entries(WINDOWED)) {
        if (unavailable[key]) { raw[key] = null; continue; }
        const rows = await q(file, [window.since, window.until]);
        raw[key] = SINGLE_ROW.has(key) ? rows[0] : rows;
      }
      // Current state, not windowed: the same files the dashboards and `metrics` run.
      raw.health = (await q('dashboards/health.sql'))[0];
      raw.stats = (await q('dashboards/stats.sql'))[0];
      const ids = [...new Set([...(raw.top as TopRow[]), ...(raw.running as TopRow[])].map((x) => x.task_id))];
      const titles = new Map<string, string>();
      if (features.has_titles) for (const t of await q('report/task-titles.sql', [ids])) titles.set(t.id as string, t.title as string);
      else unavailable.titles = `the host has no ${quoteIdent(schema)}.tasks.title column, so cards are shown by their id.`;
      for (const key of ['top', 'running']) {
        for (const row of raw[key] as Array<Record<string, unknown>>) row.title = titles.get(row.task_id as string) ?? null;
      }
    }, { begin: 'BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY', rollback: () => true });
  } catch (err) {
    if ((err as { code?: string }).code === '57014') {
      throw new UserError(`the report was stopped after its statement timeout (${timeout}): narrow the window with --since/--until, ` +
        'or allow more time with --statement-timeout (0 for none).');
    }
    throw err;
  }
  return assemble(schema, raw, unavailable, opts.host);
}

function assemble(schema: string, raw: Record<string, unknown>, unavailable: Record<string, string>, host?: string): Report {
  const id = raw.identity as Record<string, string | number | null>;
  const usage = raw.usage as Array<UsageRow & { dimension: string; label: string }>;
  const pick = (dimension: string, name: 'subagent_type' | 'model') => usage.filter((u) => u.dimension === dimension)
    .map(({ dimension: _d, label, ...rest }) => ({ [name]: label, ...rest }));
  type Ranked = TopRow & { level: 'card' | 'session'; rank_by_subagents: number; rank_by_tokens: number | null };
  const top = (level: Ranked['level']) => {
    const rows = (raw.top as Ranked[]).filter((r) => r.level === level);
    const shape = ({ level: _l, rank_by_subagents: _a, rank_by_tokens: _b, ...r }: Ranked): TopRow => {
      if (level === 'session') delete r.sessions;  // a card's count of sessions; a session has none
      return r;
    };
    return {
      by_subagents: rows.filter((r) => r.rank_by_subagents <= 10).sort((a, b) => a.rank_by_subagents - b.rank_by_subagents).map(shape),
      by_tokens: rows.filter((r) => r.rank_by_tokens !== null && r.rank_by_tokens <= 10).sort((a, b) => a.rank_by_tokens! - b.rank_by_tokens!).map(shape),
    };
  };
  return {
    schema,
    database: { host: host || (id.server_address as string | null) || 'local socket', database: id.database as string, schema,
      server_port: id.server_port as number | null },
    window: { since: id.since as string | null, until: id.until as string | null, first_observed: id.first_observed as string | null,
      last_observed: id.last_observed as string | null, as_of: id.as_of as string },
    overview: raw.overview as Report['overview'],
    fanout_per_turn: raw.fanout_per_turn as Report['fanout_per_turn'],
    sessions_and_cards: raw.sessions_and_cards as Report['sessions_and_cards'],
    subagents_per_session: raw.subagents_per_session as Report['subagents_per_session'],
    by_subagent_type: pick('subagent_type', 'subagent_type') as Report['by_subagent_type'],
    by_model: pick('model', 'model') as Report['by_model'],
    agent_status: raw.agent_status as Report['agent_status'],
    nesting: raw.nesting as Report['nesting'],
    unavailable,
    settlement: raw.settlement as Report['settlement'],
    running: raw.running as Report['running'],
    top_cards: top('card'),
    top_sessions: top('session'),
    trend_per_day: raw.trend_per_day as Report['trend_per_day'],
    health: raw.health as Report['health'],
    stats: raw.stats as Report['stats'],
  };
}
