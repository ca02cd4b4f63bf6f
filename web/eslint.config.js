// SPDX-License-Identifier: Apache-2.0
// eslint for the dashboard (web/app.js, a browser script with uPlot as a global) and for the
// browser test's driver (tests/browser/*.mjs, node).
import js from "@eslint/js";
import globals from "globals";

export default [
  { ignores: ["node_modules/**"] },
  js.configs.recommended,
  {
    files: ["app.js"],
    languageOptions: {
      ecmaVersion: 2022,
      sourceType: "script",
      globals: { ...globals.browser, uPlot: "readonly" },
    },
  },
  {
    files: ["eslint.config.js", "**/*.mjs"],
    languageOptions: { ecmaVersion: 2022, sourceType: "module", globals: { ...globals.node } },
  },
];
