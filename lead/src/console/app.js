// The mesh console: the state at load, then the lead's events as they come
// (server-sent events). Peer text only ever goes into textContent.
// Each part is a module of js/.

import { start } from "./js/live.js";

start();
