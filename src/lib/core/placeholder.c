/* SPDX-License-Identifier: Apache-2.0 */
/* Placeholder so the library links before the core modules exist; remove with the first one. */
int gpum__placeholder(void);
int gpum__placeholder(void) { return 0; }
