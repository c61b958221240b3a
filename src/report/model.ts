// What `report` reads: one object, the shape of `report --json`. NULL is "unknown" (not reported), never 0.

export type Num = number | null;

export interface UsageRow {
  subagents: number; async: number; usage_reported: number; usage_not_reported: number;
  total_tokens: Num; avg_tokens: Num; max_tokens: Num; avg_duration_ms: Num; max_duration_ms: Num; avg_tool_uses: Num;
}

export interface TopRow {
  id: string; task_id: string; title: string | null; sessions?: number;
  subagents: number; async: number; turns: number; total_tokens: Num; usage_not_reported: number;
}

export interface Report {
  schema: string;
  database: { host: string; database: string; schema: string; server_port: number | null };
  /** The window asked for and what it covers: the first and last subagent observed in it. */
  window: { since: string | null; until: string | null; first_observed: string | null; last_observed: string | null; as_of: string };
  overview: {
    subagents: number; live: number; backfill: number; sessions: number; turns: number;
    usage_reported: number; usage_not_reported: number; subagent_type_missing: number;
    total_tokens: Num; max_tokens: Num; unknown_execution: number;
  };
  fanout_per_turn: Array<{ fanout: number; turns: number }>;
  sessions_and_cards: {
    cards: number; sessions: number; subagents: number; sessions_with_subagents: number;
    sessions_per_card: Num; subagents_per_session: Num; subagents_per_card: Num; contexts_per_card: Num;
    most_subagents_in_one_session: number;
  };
  subagents_per_session: Array<{ subagents: number; sessions: number }>;
  by_subagent_type: Array<UsageRow & { subagent_type: string }>;
  by_model: Array<UsageRow & { model: string }>;
  agent_status: Array<{ agent_status: string; subagents: number; usage_reported: number; model_reported: number }>;
  /** null where the topology cannot answer it (`unavailable` says why). */
  nesting: Array<{ depth: number | null; subagents: number }> | null;
  /** Panels left out on this topology or host, each with the one sentence that says why (docs/decisions.md, Citus and partitioned messages). */
  unavailable: Record<string, string>;
  settlement: {
    settled: number; settled_sync: number; settled_async: number; outstanding: number; outstanding_async: number;
    oldest_outstanding_since: string | null; median_seconds_to_settle_sync: Num; median_reported_run_seconds: Num; run_time_reported: number;
  };
  /** Calls not settled yet, oldest first (at most 20; settlement.outstanding counts them all). */
  running: Array<{ task_id: string; title: string | null; task_session_id: string; tool_call_id: string; subagent_type: string | null;
    model: string | null; agent_status: string | null; tool_status: string | null; async: boolean; observed_at: string; age_seconds: number }>;
  top_cards: { by_subagents: TopRow[]; by_tokens: TopRow[] };
  top_sessions: { by_subagents: TopRow[]; by_tokens: TopRow[] };
  trend_per_day: Array<{ day: string; subagents: number; async: number; sessions: number; total_tokens: Num }>;
  health: {
    activated: boolean; capture_since: string | null; backfill_through: string | null; shortfall: Num; excess: Num;
    last_observed_at: string | null; trigger_enabled: boolean; failures: Num; collisions: number; status: string; installed_version: string | null;
  };
  stats: { attempted: number; skipped_no_identity: number; persisted: number; failed: number; anomalous_value: number; unknown_execution: number };
}
