#!/usr/bin/env node
// The `subagent-context` command (package.json "bin"): src/main.ts does the work. The process title is
// masked before the rest of the CLI loads, so that `ps` shows a --database-url password as briefly as it can.
import { maskPasswordsInTitle } from './process-title.js';

maskPasswordsInTitle();
const { main } = await import('./main.js');
void main(process.argv.slice(2)).then((code) => { process.exitCode = code; });
