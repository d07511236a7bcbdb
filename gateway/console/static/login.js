// The login page: posts the token as JSON (never in a URL), then opens the console; says so when the token
// was refused, or when this client failed too often and must wait.
"use strict";
if (new URLSearchParams(location.search).has("failed")) {
  document.getElementById("failed").hidden = false;
}
document.querySelector("form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const token = document.getElementById("token").value;
  const sent = await fetch("/console/login", {
    method: "POST", credentials: "same-origin", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ token }),
  });
  if (sent.ok) {
    location.href = "/console/";
  } else if (sent.status === 429) {
    const limited = document.getElementById("limited");
    limited.textContent = `Too many failed sign-ins: try again in ${sent.headers.get("Retry-After")} s.`;
    limited.hidden = false;
  } else {
    location.replace("/console/login?failed=1");
  }
});
