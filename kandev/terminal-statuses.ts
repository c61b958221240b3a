// The terminal ACP tool-call statuses, as kandev's writer and the tests' reference model classify rows.

/**
 * ACP tool-call statuses that settle a subagent row (docs/decisions.md, "Derivation"): exact and case-sensitive.
 * SQL owns the set (subagent_context_is_terminal_status in sql/code/derive.sql); test/capture/terminal-status.test.ts pins
 * this constant to it, so code that reads rows can classify statuses without a round trip.
 */
export const TERMINAL_TOOL_STATUSES = ['complete', 'completed', 'success', 'error', 'failed', 'cancelled'] as const;

export type TerminalToolStatus = (typeof TERMINAL_TOOL_STATUSES)[number];

export function isTerminalToolStatus(status: string | null | undefined): status is TerminalToolStatus {
  return (TERMINAL_TOOL_STATUSES as readonly string[]).includes(status as string);
}
