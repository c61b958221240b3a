// Writing planned traffic for a case: one session's writes (filtered), either as kandev writes its
// messages (the trigger does the rest, or nothing is captured) or with kandev's own subagent writer.
import type pg from 'pg';
import type { PlannedSession, Write } from '../kandev/traffic-plan.js';
import { executeWrite, createSessionRows, createTurnRow, deleteSession } from '../kandev/traffic-write.js';
import { writeWithKandevWriter } from '../kandev/writer.js';
import { utcTimestamp } from '../src/timestamp.js';

export type WriteMode = 'messages' | 'kandev-writer';

/** The session, task and turn rows (not timed by the cases). */
export async function createRows(c: pg.ClientBase, s: PlannedSession): Promise<void> {
  await createSessionRows(c, 'public', s, null);
  for (const t of s.turns) await createTurnRow(c, 'public', s, t, null);
}

/** Writes a session's writes that pass `keep`; returns how many message writes it made. */
export async function writeSession(c: pg.ClientBase, s: PlannedSession, mode: WriteMode,
  keep: (w: Write) => boolean = () => true, opts: { deleteAbandoned?: boolean } = {}): Promise<number> {
  let n = 0;
  const created = new Map<string, string>();
  for (const t of s.turns) {
    for (const w of t.writes) {
      if (!keep(w)) continue;
      const at = utcTimestamp();
      if (w.op === 'insert') created.set(w.message, at);
      const target = { schema: 'public', session: s.session, task: s.task, turn: t.id, at };
      if (mode === 'kandev-writer') {
        await writeWithKandevWriter(c, w, { ...target, createdAt: 'message' in w ? created.get(w.message) : undefined });
      } else {
        await executeWrite(c, w, target);
      }
      n++;
    }
  }
  if (opts.deleteAbandoned && s.abandoned) await deleteSession(c, 'public', s.session);
  return n;
}

export const isSubagentFrame = (w: Write) => w.class === 'subagent';
export const isOther = (w: Write) => w.class !== 'subagent' && w.class !== 'odd';
/** The completed frame of a subagent call (the one that carries result_text). */
export const isFinal = (w: Write) => w.op === 'update' && w.subagent?.agent_status === 'completed';
