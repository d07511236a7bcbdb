// The login page: say so when the last token was refused (the form posts the token in its body, never in a URL).
"use strict";
if (new URLSearchParams(location.search).has("failed")) {
  document.getElementById("failed").hidden = false;
}
