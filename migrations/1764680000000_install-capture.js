// 0.1.0: installs capture (data and code layers; see lib/steps.js).
export { install as up, uninstall as down } from './lib/steps.js';
