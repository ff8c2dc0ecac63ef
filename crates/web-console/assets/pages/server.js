// #/server: configuration by section, active tasks and the node's figures.

import { clear, h } from '../lib/dom.js';
import { main, startPage } from '../lib/shell.js';

export async function renderServer() {
  startPage('Server', 'server');
  clear(main()).append(h('h1', { text: 'Server' }));
}
