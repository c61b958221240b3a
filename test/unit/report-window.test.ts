// The report's window: a --since after now says, in one sentence, that the window holds nothing yet.
import { describe, expect, it } from 'vitest';
import { futureWindowWarning, parseWindow } from '../../src/report/index.js';

describe('a window in the future', () => {
  const now = new Date('2026-12-04T12:00:00Z');
  it('is named in one sentence', () => {
    expect(futureWindowWarning(parseWindow('2030-01-01', undefined, now), now))
      .toBe('warning: --since 2030-01-01 00:00:00 UTC is in the future, so the window holds nothing yet.');
  });
  it('a window that has begun, or none, says nothing', () => {
    expect(futureWindowWarning(parseWindow('7d', undefined, now), now)).toBeNull();
    expect(futureWindowWarning(parseWindow(undefined, undefined, now), now)).toBeNull();
  });
});
