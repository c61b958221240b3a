// 0.5.0: brings an earlier installation to this release (a no-op on a fresh install of it).
export { upgrade as up, nothing as down } from './lib/steps.js';
