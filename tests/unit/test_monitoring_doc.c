/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Keeps docs/monitoring.md in step with the code it documents: the Xid table between
 * "<!-- xids:begin -->" and "<!-- xids:end -->" must be what gpum_xid_table() generates, and
 * the default rules between "<!-- rules:begin -->" and "<!-- rules:end -->" must be
 * gpum_alert_default_rules, in order. Run with GPUM_WRITE_DOCS=1 to regenerate both blocks
 * (the same switch as docs/config.md's check in test_options.c). The generators are tested too.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <gpum/alert.h>
#include <gpum/xid.h>

#define XIDS_BEGIN "<!-- xids:begin -->\n"
#define XIDS_END "<!-- xids:end -->"
#define RULES_BEGIN "<!-- rules:begin -->\n"
#define RULES_END "<!-- rules:end -->"

/* Writes s into f with '|' escaped for a Markdown table cell. */
static void cell(FILE *f, const char *s) {
  for (; *s; s++) {
    if (*s == '|')
      fputc('\\', f);
    fputc(*s, f);
  }
}

/* The Xid table as Markdown; the caller frees. */
static char *xid_markdown(void) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  assert_non_null(f);
  size_t n = 0;
  const gpum_xid_info_t *t = gpum_xid_table(&n);
  fprintf(f, "| Xid | meaning | level (`xid any auto`) | likely cause | what to do |\n"
             "|---|---|---|---|---|\n");
  for (size_t i = 0; i < n; i++) {
    fprintf(f, "| %u | ", t[i].xid);
    cell(f, t[i].name);
    fprintf(f, " | %s | ", t[i].critical ? "CRITICAL" : "ERROR");
    cell(f, t[i].description);
    fputs(" | ", f);
    cell(f, t[i].action);
    fputs(" |\n", f);
  }
  fclose(f);
  return buf;
}

/* The default rules as a fenced block; the caller frees. */
static char *rules_markdown(void) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  assert_non_null(f);
  fputs("```\n", f);
  for (const char *const *r = gpum_alert_default_rules; *r; r++)
    fprintf(f, "%s\n", *r);
  fputs("```\n", f);
  fclose(f);
  return buf;
}

static char *read_whole(const char *path) {
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return NULL;
  char *buf = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&buf, &len);
  char chunk[4096];
  size_t k;
  while ((k = fread(chunk, 1, sizeof chunk, f)) > 0)
    fwrite(chunk, 1, k, m);
  fclose(f);
  fclose(m);
  return buf;
}

static bool write_docs(void) {
  const char *w = getenv("GPUM_WRITE_DOCS");
  return w != NULL && strcmp(w, "1") == 0;
}

/* Checks (or, with GPUM_WRITE_DOCS=1, rewrites) the block between begin and end. */
static void check_block(const char *begin_mark, const char *end_mark, const char *want,
                        const char *what) {
  const char *src = getenv("GPUM_SOURCE_DIR");
  if (src == NULL)
    skip();
  char path[4096];
  snprintf(path, sizeof path, "%s/docs/monitoring.md", src);
  char *doc = read_whole(path);
  if (doc == NULL)
    fail_msg("cannot read %s", path);
  char *begin = strstr(doc, begin_mark), *end = begin ? strstr(begin, end_mark) : NULL;
  if (begin == NULL || end == NULL)
    fail_msg("%s lacks the markers %s and %s", path, begin_mark, end_mark);
  begin += strlen(begin_mark);
  size_t have = (size_t)(end - begin);
  if (have != strlen(want) || strncmp(begin, want, have) != 0) {
    if (!write_docs())
      fail_msg("docs/monitoring.md's %s differs from the code; regenerate it with "
               "GPUM_WRITE_DOCS=1 ctest --test-dir BUILD -R unit.test_monitoring_doc",
               what);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "%.*s%s%s", (int)(begin - doc), doc, want, end);
    assert_int_equal(fclose(f), 0);
    print_message("rewrote the %s in %s\n", what, path);
  }
  free(doc);
}

static void test_xid_markdown(void **state) {
  (void)state;
  char *md = xid_markdown();
  size_t n = 0;
  gpum_xid_table(&n);
  size_t lines = 0;
  for (const char *p = md; *p; p++)
    lines += *p == '\n';
  assert_int_equal(lines, n + 2);
  assert_non_null(strstr(md, "| 79 | GPU has fallen off the bus | CRITICAL | "));
  assert_non_null(strstr(md, "| 13 | Graphics Engine Exception | ERROR | "));
  free(md);
}

static void test_cell_escapes_pipes(void **state) {
  (void)state;
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  cell(f, "a|b");
  fclose(f);
  assert_string_equal(buf, "a\\|b");
  free(buf);
}

static void test_docs_xid_table_in_step(void **state) {
  (void)state;
  char *md = xid_markdown();
  check_block(XIDS_BEGIN, XIDS_END, md, "Xid table");
  free(md);
}

static void test_docs_default_rules_in_step(void **state) {
  (void)state;
  char *md = rules_markdown();
  assert_non_null(strstr(md, "health == ERROR CRITICAL\n"));
  check_block(RULES_BEGIN, RULES_END, md, "default rules");
  free(md);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_xid_markdown),
      cmocka_unit_test(test_cell_escapes_pipes),
      cmocka_unit_test(test_docs_xid_table_in_step),
      cmocka_unit_test(test_docs_default_rules_in_step),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
