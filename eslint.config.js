// ESLint for the page's ES modules and their unit tests: the recommended rules, browser globals for the
// page, a service worker's for its worker, node's for the tests.
import js from "@eslint/js";
import globals from "globals";

export default [
  js.configs.recommended,
  // `const { messages: _rows, ...meta } = row` drops a key on purpose.
  { rules: { "no-unused-vars": ["error", { ignoreRestSiblings: true }] } },
  {
    files: ["static/js/**/*.js"],
    languageOptions: { ecmaVersion: "latest", sourceType: "module", globals: globals.browser },
  },
  {
    files: ["static/sw.js"],
    languageOptions: { ecmaVersion: "latest", sourceType: "script", globals: globals.serviceworker },
  },
  {
    files: ["tests/js/**/*.js", "eslint.config.js"],
    languageOptions: { ecmaVersion: "latest", sourceType: "module", globals: globals.node },
  },
];
