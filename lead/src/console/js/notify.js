// The operator's last look (what came after it is new) and opt-in browser
// notifications when a request comes to wait for a person.

import { cardTitle } from "./content.js";
import { KIND_NAMES, schedule } from "./state.js";

// The last look: when the operator last left this page (closed it or went
// to another tab). What came after it is marked new.
const LOOK_KEY = "mesh-console-looked-at";
export let lookedAt = Number(localStorage.getItem(LOOK_KEY)) || 0;
function lookedAway() {
  localStorage.setItem(LOOK_KEY, String(Date.now()));
}
document.addEventListener("visibilitychange", () => {
  if (document.visibilityState === "hidden") lookedAway();
  else { lookedAt = Number(localStorage.getItem(LOOK_KEY)) || lookedAt; schedule(); }
});
window.addEventListener("pagehide", lookedAway);

// Opt-in browser notifications: one when a request comes to wait for a
// person, while this page is open.
const NOTIFY_KEY = "mesh-console-notify";
const notifyButton = document.getElementById("notify");
function notifying() {
  return "Notification" in window && Notification.permission === "granted" && localStorage.getItem(NOTIFY_KEY) === "on";
}
function showNotifyButton() {
  if (!("Notification" in window) || Notification.permission === "denied") { notifyButton.hidden = true; return; }
  notifyButton.hidden = false;
  notifyButton.textContent = notifying() ? "Notifications on (turn off)" : "Notify me when something waits";
  notifyButton.setAttribute("aria-pressed", String(notifying()));
}
notifyButton.addEventListener("click", async () => {
  if (notifying()) localStorage.setItem(NOTIFY_KEY, "off");
  else if (await Notification.requestPermission() === "granted") localStorage.setItem(NOTIFY_KEY, "on");
  showNotifyButton();
});
showNotifyButton();
export function notify(r) {
  if (r.status !== "pending" || r.type === "shutdown" || !notifying()) return;
  const note = new Notification(`${r.sender}'s ${(KIND_NAMES[r.type] || r.type).toLowerCase()} waits for you`,
    { body: cardTitle(r), tag: r.request_id });
  note.onclick = () => { window.focus(); location.hash = "#/requests/" + encodeURIComponent(r.request_id); };
}
