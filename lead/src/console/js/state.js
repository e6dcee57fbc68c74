// What the page knows of the team: the members, the requests, the tasks and
// what each model user used, as the state at load and the events since have
// said it.

export const members = new Map();   // name -> member
export const requests = new Map();  // request_id -> request
export const tasks = new Map();     // task_id -> task
// What each model user used, by name (members and others, like the lead's
// reviewer): { tokens, calls, budget }. `usageBase` is what the team's total
// holds beyond them (members the lead no longer lists).
export const usage = new Map();
export let usageBase = 0;
// The state at load sets it.
export function setUsageBase(n) {
  usageBase = n;
}

export const KIND_NAMES = { plan_approval: "Plan", permission: "Permission", shutdown: "Shutdown", result: "Result", amendment: "Amendment" };
