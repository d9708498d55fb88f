// The login page (shown when the server has a password and this browser has no session cookie).

import { api } from "./api.js";

const $ = (id) => document.getElementById(id);

export function showLogin(onLoggedIn) {
  const page = $("login");
  const form = $("login-form");
  const input = $("login-password");
  const error = $("login-error");
  page.hidden = false;
  input.focus();
  form.addEventListener("submit", async function submit(event) {
    event.preventDefault();
    error.hidden = true;
    const button = form.querySelector("button[type=submit]");
    button.disabled = true;
    try {
      const data = await api.login(input.value);
      form.removeEventListener("submit", submit);
      input.value = "";
      page.hidden = true;
      await onLoggedIn(data.csrf_token);
    } catch (err) {
      error.textContent = err.status === 429 ? "Too many attempts; wait a minute and try again." : err.status === 401 ? "Wrong password." : err.message;
      error.hidden = false;
      input.select();
    } finally {
      button.disabled = false;
    }
  });
}
