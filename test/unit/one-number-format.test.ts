// One way to write a count for a reader (src/count.ts): health's summary sentence says the shortfall the
// way its shortfall row does. On 4259581 the sentence said "25000 subagents" beside a row that said 25,000.
import { describe, expect, it } from 'vitest';
import { STATUSES } from '../../src/status.js';
import { formatCount } from '../../src/count.js';

describe('counts in sentences', () => {
  it("health's shortfall advice writes the count as the shortfall row does", () => {
    const advice = STATUSES.shortfall.advice('public', 25000);
    expect(advice).toMatch(new RegExp(`^${formatCount(25000)} subagents written since activation have no row\\. `));
    expect(advice).not.toMatch(/\d{4}/);
    expect(STATUSES.shortfall.advice('public', 1)).toMatch(/^1 subagent written since activation has no row\. /);
  });
});
