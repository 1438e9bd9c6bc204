import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.ts';
import { parseDuration } from '../../src/config/duration.ts';
import { thrownBy } from '../helpers/expect.ts';

describe('durations in the configuration', () => {
  it('reads 30s, 15m, 24h and 30d, and 0 as zero', () => {
    expect(parseDuration('30s')).toBe(30_000);
    expect(parseDuration('15m')).toBe(900_000);
    expect(parseDuration('24h')).toBe(86_400_000);
    expect(parseDuration('30d')).toBe(2_592_000_000);
    expect(parseDuration('0')).toBe(0);
    expect(parseDuration('0d')).toBe(0);
  });

  it('refuses anything else rather than guess', () => {
    for (const text of ['', '10', '1.5h', '2w', '-1d', '1 d', 'd', '30 days', '99999999d']) {
      expect(parseDuration(text), text).toBe(null);
    }
  });

  it('defaults the retention keys as documented', () => {
    const c = loadConfig({});
    expect(c.TOKEN_RETENTION).toBe(24 * 3600_000);
    expect(c.WEBHOOK_RETENTION).toBe(30 * 86_400_000);
    expect(c.AUDIT_RETENTION).toBe(365 * 86_400_000);
    expect(c.PRUNE_INTERVAL).toBe(5 * 60_000);
    expect(loadConfig({ AUDIT_RETENTION: '0', PRUNE_INTERVAL: '0' })).toMatchObject({ AUDIT_RETENTION: 0, PRUNE_INTERVAL: 0 });
  });

  it('names the key of a bad duration', () => {
    for (const [key, value] of [['TOKEN_RETENTION', '24'], ['WEBHOOK_RETENTION', '1w'], ['AUDIT_RETENTION', 'forever'], ['PRUNE_INTERVAL', '500ms']]) {
      const err = thrownBy(() => loadConfig({ [key]: value }));
      expect(err instanceof ConfigError && err.message.startsWith(`Invalid configuration: ${key}: `), `${key}=${value}: ${String(err)}`).toBe(true);
    }
  });

  it('refuses a PRUNE_INTERVAL longer than a day, which a timer would run every millisecond', () => {
    expect(loadConfig({ PRUNE_INTERVAL: '24h' }).PRUNE_INTERVAL).toBe(86_400_000);
    for (const value of ['25h', '30d']) {
      const err = thrownBy(() => loadConfig({ PRUNE_INTERVAL: value }));
      expect(err instanceof ConfigError && /PRUNE_INTERVAL: .*longer than/.test(err.message), String(err)).toBe(true);
    }
  });
});
