/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Terminal output helpers for the gpum CLI (see output.h): styles, threshold colours, bars and
 * compact memory figures. Colour is decided once by the caller (cli_use_color) and carried in
 * the cli_out_t, so no function here looks at the environment.
 */
#include <pwd.h>
#include <stdarg.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <gpum/size.h>

#include "output.h"

static const char *const style_codes[] = {
    [CLI_PLAIN] = "",         [CLI_BOLD] = "\033[1m",
    [CLI_DIM] = "\033[2m",    [CLI_RED] = "\033[31m",
    [CLI_GREEN] = "\033[32m", [CLI_YELLOW] = "\033[33m",
    [CLI_BLUE] = "\033[34m",  [CLI_MAGENTA] = "\033[35m",
    [CLI_CYAN] = "\033[36m",  [CLI_BOLD_RED] = "\033[1;31m",
};

void cli_styled(const cli_out_t *o, cli_style_t style, const char *fmt, ...) {
  bool esc = o->color && style != CLI_PLAIN;
  if (esc)
    fputs(style_codes[style], o->f);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(o->f, fmt, ap);
  va_end(ap);
  if (esc)
    fputs("\033[0m", o->f);
}

cli_style_t cli_level_style(double value, double warn, double crit) {
  if (value >= crit)
    return CLI_RED;
  if (value >= warn)
    return CLI_YELLOW;
  return CLI_GREEN;
}

void cli_bar(const cli_out_t *o, double frac, int width) {
  if (frac < 0)
    frac = 0;
  if (frac > 1)
    frac = 1;
  int full = (int)(frac * width + 0.5);
  if (full == 0 && frac > 0)
    full = 1; /* anything in use shows */
  char cells[128];
  if (width > (int)sizeof cells - 1)
    width = (int)sizeof cells - 1;
  for (int i = 0; i < width; i++)
    cells[i] = i < full ? '#' : '.';
  cells[width] = '\0';
  fputc('[', o->f);
  cli_styled(o, cli_level_style(frac * 100.0, 50, 90), "%.*s", full, cells);
  fprintf(o->f, "%s]", cells + full);
}

char *cli_fmt_mem_pair(uint64_t used, uint64_t total, char *buf, size_t len) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  unsigned u = 0;
  double div = 1;
  while (u + 1 < sizeof units / sizeof units[0] && (double)total >= div * 1024.0) {
    div *= 1024.0;
    u++;
  }
  if (u == 0)
    snprintf(buf, len, "%llu/%llu B", (unsigned long long)used, (unsigned long long)total);
  else
    snprintf(buf, len, "%.1f/%.1f %s", (double)used / div, (double)total / div, units[u]);
  return buf;
}

char *cli_fmt_size(uint64_t bytes, bool valid, char *buf, size_t len) {
  if (!valid) {
    snprintf(buf, len, "n/a");
    return buf;
  }
  return gpum_size_format(bytes, buf, len);
}

int cli_term_width(FILE *f) {
  struct winsize ws;
  if (!isatty(fileno(f)) || ioctl(fileno(f), TIOCGWINSZ, &ws) != 0 || ws.ws_col == 0)
    return 0;
  return ws.ws_col;
}

void cli_user_name(int64_t uid, char *buf, size_t len) {
  struct passwd pw, *res = NULL;
  char tmp[1024];
  if (uid >= 0 && getpwuid_r((uid_t)uid, &pw, tmp, sizeof tmp, &res) == 0 && res)
    snprintf(buf, len, "%s", pw.pw_name);
  else
    snprintf(buf, len, "%lld", (long long)uid);
}
