// What the process title shows of a command line (src/process-title.ts; a running exporter's title is
// test/security/process-title.test.ts's): every --database-url value with its secrets as ***, everything else as typed.
import { describe, it, expect } from 'vitest';
import { maskedArgv } from '../../src/process-title.js';

describe('maskedArgv', () => {
  it('masks the password of --database-url URL and --database-url=URL, and password-like query parameters', () => {
    expect(maskedArgv(['node', 'cli.js', 'metrics', '--database-url', 'postgres://kandev:p%40ss@db:5432/kandev', '--listen', '0.0.0.0:9811']))
      .toEqual(['node', 'cli.js', 'metrics', '--database-url', 'postgres://kandev:***@db:5432/kandev', '--listen', '0.0.0.0:9811']);
    expect(maskedArgv(['health', '--database-url=postgres://kandev@db/kandev?sslmode=require&password=s3cret']))
      .toEqual(['health', '--database-url=postgres://kandev@db/kandev?sslmode=require&password=***']);
    expect(maskedArgv(['health', '--database-url', 'not a url: postgres://kandev:s3cret@db']))
      .toEqual(['health', '--database-url', 'not a url: postgres://kandev:***@db']);
  });

  it('leaves a command line without a secret as typed, not as the URL parser would spell it', () => {
    const argv = ['node', 'cli.js', 'health', '--database-url', 'postgres://kandev@db.internal:5432/kandev?application_name=a b', '--json'];
    expect(maskedArgv(argv)).toEqual(argv);
  });
});
