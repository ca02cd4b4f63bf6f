// SPDX-License-Identifier: Apache-2.0
// eslint for the browser test's driver (node), with the packages of web/node_modules
// (tests/browser/test_dashboard_lint.sh runs web's eslint here).
import { createRequire } from "node:module";

const require = createRequire(new URL("../../web/package.json", import.meta.url));
const js = require("@eslint/js");
const globals = require("globals");

export default [
  js.configs.recommended,
  {
    files: ["**/*.mjs"],
    // Node, and the browser: the functions given to page.evaluate run in the page.
    languageOptions: { ecmaVersion: 2022, sourceType: "module", globals: { ...globals.node, ...globals.browser } },
  },
];
