// #/activity: a live view of _db_updates.

import { clear, h } from '../lib/dom.js';
import { main, startPage } from '../lib/shell.js';

export async function renderActivity() {
  startPage('Activity', 'activity');
  clear(main()).append(h('h1', { text: 'Activity' }));
}
