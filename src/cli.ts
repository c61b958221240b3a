#!/usr/bin/env node
// The `subagent-context` command (package.json "bin"): src/main.ts does the work.
import { main } from './main.js';

void main(process.argv.slice(2)).then((code) => { process.exitCode = code; });
