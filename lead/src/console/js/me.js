// Who is signed in, said in the header ("alice@example.com (reviewer)"),
// and signing out (a session's change, with its CSRF token as every POST).

import { post } from "./dom.js";

export async function showMe() {
  const response = await fetch("/api/me");
  if (!response.ok) return;
  const me = await response.json();
  document.getElementById("me").textContent = `${me.name} (${me.role})`;
  const out = document.getElementById("sign-out");
  out.hidden = !me.session;
  out.onclick = async () => {
    out.disabled = true;
    await post("/logout", {}).catch(() => {});
    location.assign("/");
  };
}
