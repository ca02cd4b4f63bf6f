// SPDX-License-Identifier: Apache-2.0
// eslint for the dashboard (web/app.js, a browser script with uPlot as a global). The browser
// test's driver has its own config (tests/browser/eslint.config.mjs).
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
    files: ["eslint.config.js"],
    languageOptions: { ecmaVersion: 2022, sourceType: "module", globals: { ...globals.node } },
  },
];
