// Target 5: health on a realistic store of 1M messages (the traffic model's mix, seeded set-based):
// the full window (capture_since before all history) and a recent window (the newest 1% of messages),
// the recent window's plan, and how many entries health's index holds per subagent-call message.
import { QUICK, open, order, summary, now, type BenchCase, type CaseOutput } from '../harness.js';
import { definedInSql } from '../reconcile.js';
import { largeStores, STORE_BASE, STORE_SIZES } from '../stores.js';
import { utcTimestamp } from '../../src/timestamp.js';

const kase: BenchCase = {
  id: '05-health-1m',
  title: `health on a ${STORE_SIZES[1] / 1000}k-message store`,
  targets: [
    { name: 'T5 full window', metric: 'full_ms', comparator: '<=', limit: 1000 },
    { name: 'T5 recent window (1%)', metric: 'recent_ms', comparator: '<=', limit: 20 },
    { name: 'T5 recent window uses the index, no seq scan', metric: 'recent_plan_index_scan', comparator: '==', limit: true },
    { name: 'T5 index entries / subagent message versions', metric: 'index_entries_per_subagent_version', comparator: '<=', limit: 1.05 },
    { name: 'T5 shortfall + excess', metric: 'shortfall_plus_excess', comparator: '==', limit: 0 },
  ],
  async run(ctx): Promise<CaseOutput> {
    // Health before the reconciliation read a window of messages; case 08 measures the model that replaced it.
    if (!definedInSql('subagent_context_window')) {
      return { metrics: {}, skipped: 'health reads the reconciliation now (no subagent_context_window()): case 08 measures it' };
    }
    const stores = await largeStores(ctx, STORE_SIZES);
    const store = stores[stores.length - 1];
    const c = await open(store.url);
    const full = STORE_BASE;
    const recent = utcTimestamp(Date.parse(STORE_BASE.replace(' ', 'T') + 'Z') + Math.floor(store.size * 0.99) * 1000);
    const windows = { full, recent } as const;
    const ms: Record<keyof typeof windows, number[]> = { full: [], recent: [] };
    const last: Record<string, Record<string, number>> = {};
    const once = async (w: keyof typeof windows) => {
      await c.query(`UPDATE kandev_meta SET value = to_char($1::timestamp, 'YYYY-MM-DD"T"HH24:MI:SS.US"000Z"')
                      WHERE key = 'subagent_context_capture_since'`, [windows[w]]);
      const t0 = now();
      const { rows } = await c.query(`SELECT shortfall::float8, excess::float8 FROM subagent_context_health()`);
      const t = now() - t0;
      last[w] = rows[0];
      return t;
    };
    await once('recent'); await once('full');
    const rounds = QUICK ? 3 : 5;
    for (let r = 0; r < rounds; r++) for (const w of order(['full', 'recent'] as const, r)) ms[w].push(await once(w));
    const plan = (await c.query(`EXPLAIN (COSTS OFF) SELECT * FROM subagent_context_window('${recent}'::timestamp)`))
      .rows.map((r) => r['QUERY PLAN']).join('\n');
    const recentMessages = Number((await c.query(`SELECT count(*)::float8 AS n FROM task_session_messages WHERE created_at >= $1`, [recent])).rows[0].n);
    // VACUUM counts a btree's entries exactly (reltuples of the index).
    await c.query('VACUUM task_session_messages');
    const entries = Number((await c.query(`SELECT reltuples::float8 AS n FROM pg_class WHERE relname = 'subagent_context_recent_messages_idx'`)).rows[0].n);
    await c.query(`UPDATE kandev_meta SET value = to_char($1::timestamp, 'YYYY-MM-DD"T"HH24:MI:SS.US"000Z"')
                    WHERE key = 'subagent_context_capture_since'`, [full]);
    await c.end();
    return {
      metrics: {
        messages: store.size, subagent_messages: store.subagentMessages, recent_window_messages: recentMessages,
        full_ms: summary(ms.full).median, recent_ms: summary(ms.recent).median,
        recent_plan_index_scan: /subagent_context_recent_messages_idx/.test(plan) && !/Seq Scan on task_session_messages/.test(plan),
        index_entries: entries,
        index_entries_per_subagent_version: entries / store.subagentMessages,
        shortfall_plus_excess: last.full.shortfall + last.full.excess + last.recent.shortfall + last.recent.excess,
      },
      spread: { full_ms: summary(ms.full), recent_ms: summary(ms.recent) },
      details: { windows, recentPlan: plan, health: last, messageShare: store.messageShare },
    };
  },
};
export default kase;
