// The report's window: a --since after now says, in one sentence, that the window holds nothing yet.
import { describe, expect, it } from 'vitest';
import { futureWindowWarning, parseWindow } from '../../src/report/index.js';

describe('dates as PostgreSQL holds them', () => {
  const now = new Date('2026-12-04T12:00:00Z');
  it('writes years past 9999 and before year 1 the way PostgreSQL reads them', () => {
    expect(parseWindow('0001-01-01', '9999-12-31', now)).toMatchObject({ since: '0001-01-01 00:00:00.000', until: '10000-01-01 00:00:00.000' });
    expect(parseWindow('300000w', undefined, now).since).toMatch(/^3724-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} BC$/);
    expect(parseWindow('0001-01-01T00:00+05:00', undefined, now).since).toBe('0001-12-31 19:00:00.000 BC');
  });
  it('orders the bounds by time, not by their text (10000 comes after 9000)', () => {
    expect(() => parseWindow('9000-01-01', '9999-12-31', now)).not.toThrow();
    expect(() => parseWindow('9999-12-31', '9000-01-01', now)).toThrow(/must be before --until/);
    expect(futureWindowWarning(parseWindow('9999-12-31T23:59-05:00', undefined, now), now))
      .toBe('warning: --since 10000-01-01 04:59:00 UTC is in the future, so the window holds nothing yet.');
  });
  it('takes -3d as 3d, and now as now', () => {
    expect(parseWindow('-3d', undefined, now).since).toBe('2026-12-01 12:00:00.000');
    expect(parseWindow('now', undefined, now).since).toBe('2026-12-04 12:00:00.000');
  });
});

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
