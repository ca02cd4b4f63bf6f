/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpumd's HTTP bearer token (docs/rest.md): STATE_DIR/http.token (or http.token_file), created
 * 0600 with 32 random bytes at first start, refused when others may read it, re-read on SIGHUP
 * (gpumd_http_reload) and rotated over the socket protocol (gpumd_http_token_op); compared in
 * constant time.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/http.h>

#include <gpum/error.h>
#include <gpum/log.h>

#include "http_internal.h"
#include "obs_internal.h"
#include "net.h"

/* ---- the bearer token ------------------------------------------------------------------- */

int gpumd__http_token_path(gpumd_t *d, char *buf, size_t len) {
  const char *p = gpum_config_get_string(d->cfg, "http.token_file");
  int n = p && *p ? snprintf(buf, len, "%s", p) : snprintf(buf, len, "%s/http.token", d->state_dir);
  if (n < 0 || (size_t)n >= len)
    return gpum_error(GPUM_EINVAL, "http.token_file: path too long");
  return 0;
}

/* Writes a fresh random token to path (through a temporary file and rename, mode 0600). */
static int token_write_new(const char *path, char *out, size_t outlen) {
  unsigned char raw[GPUMD_HTTP_TOKEN_HEX / 2];
  size_t got = 0;
  while (got < sizeof raw) {
    ssize_t n = getrandom(raw + got, sizeof raw - got, 0);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return gpum_error(GPUM_EIO, "getrandom failed: %s", strerror(errno));
    got += (size_t)n;
  }
  static const char hex[] = "0123456789abcdef";
  char tok[GPUMD_HTTP_TOKEN_HEX + 2];
  for (size_t i = 0; i < sizeof raw; i++) {
    tok[2 * i] = hex[raw[i] >> 4];
    tok[2 * i + 1] = hex[raw[i] & 15];
  }
  tok[GPUMD_HTTP_TOKEN_HEX] = '\n';
  tok[GPUMD_HTTP_TOKEN_HEX + 1] = '\0';
  char tmp[PATH_MAX + 8];
  snprintf(tmp, sizeof tmp, "%s.new", path);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0)
    return gpum_error(GPUM_EIO, "cannot create %s: %s", tmp, strerror(errno));
  bool ok = fchmod(fd, 0600) == 0 &&
            write(fd, tok, GPUMD_HTTP_TOKEN_HEX + 1) == (ssize_t)(GPUMD_HTTP_TOKEN_HEX + 1);
  ok = fsync(fd) == 0 && ok;
  int e = errno;
  close(fd);
  if (!ok || rename(tmp, path) != 0) {
    e = ok ? errno : e;
    unlink(tmp);
    return gpum_error(GPUM_EIO, "cannot write the HTTP token to %s: %s", path, strerror(e));
  }
  snprintf(out, outlen, "%.*s", GPUMD_HTTP_TOKEN_HEX, tok);
  return 0;
}

/* Reads the token in path into out; creates the file when missing and create is set. */
int gpumd_http_token_load(const char *path, bool create, char *out, size_t outlen) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0 && errno == ENOENT && create) {
    gpum_log(GPUM_LOG_INFO, "gpumd", "creating the HTTP API token in %s", path);
    return token_write_new(path, out, outlen);
  }
  if (fd < 0)
    return gpum_error(GPUM_EIO, "cannot open the HTTP token file %s: %s", path, strerror(errno));
  struct stat st;
  char buf[GPUMD_HTTP_TOKEN_MAX + 2];
  ssize_t n = -1;
  int e = 0;
  bool open_mode = false;
  if (fstat(fd, &st) != 0)
    e = errno;
  else if (!S_ISREG(st.st_mode))
    e = EINVAL;
  else if (st.st_mode & 077)
    open_mode = true;
  else if ((n = read(fd, buf, sizeof buf - 1)) < 0)
    e = errno;
  close(fd);
  if (open_mode)
    return gpum_error(GPUM_EPERM,
                      "the HTTP token file %s is readable by others (mode %04o): chmod 600 it",
                      path, (unsigned)(st.st_mode & 07777));
  if (e != 0 || n < 0)
    return gpum_error(GPUM_EIO, "cannot read the HTTP token file %s: %s", path,
                      strerror(e ? e : EIO));
  while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
    n--;
  buf[n] = '\0';
  if (n < 16 || (size_t)n >= outlen || n > GPUMD_HTTP_TOKEN_MAX)
    return gpum_error(GPUM_EINVAL, "the HTTP token in %s must be 16 to %d characters", path,
                      GPUMD_HTTP_TOKEN_MAX);
  for (ssize_t i = 0; i < n; i++)
    if (buf[i] <= ' ' || buf[i] > '~')
      return gpum_error(GPUM_EINVAL, "the HTTP token in %s has a space or control character", path);
  memcpy(out, buf, (size_t)n + 1);
  return 0;
}

/* Constant-time: the time depends on the presented length only. */
bool gpumd_http_token_matches(const char *want, const char *got, size_t got_len) {
  size_t wl = strlen(want);
  unsigned char diff = (unsigned char)(wl != got_len);
  for (size_t i = 0; i < got_len; i++)
    diff |= (unsigned char)(got[i] ^ want[i % (wl ? wl : 1)]);
  return diff == 0 && wl > 0;
}

void gpumd_http_reload(gpumd_t *d) {
  struct gpumd_http *h = d->http;
  if (!h)
    return;
  char path[PATH_MAX], tok[sizeof h->token];
  if (gpumd__http_token_path(d, path, sizeof path) != 0 ||
      gpumd_http_token_load(path, false, tok, sizeof tok) != 0) {
    gpum_log(GPUM_LOG_ERROR, "gpumd", "HTTP token not reloaded, keeping the old one: %s",
             gpum_last_error());
    return;
  }
  memcpy(h->token_path, path, sizeof path);
  memcpy(h->token, tok, sizeof tok);
  gpum_log(GPUM_LOG_INFO, "gpumd", "HTTP token reloaded from %s", path);
}

int gpumd_http_token_op(gpumd_t *d, bool rotate, json_t **out) {
  struct gpumd_http *h = d->http;
  if (!h)
    return gpum_error(GPUM_ESTATE, "the HTTP API is off (http.listen)");
  if (rotate) {
    char tok[sizeof h->token];
    int rc = token_write_new(h->token_path, tok, sizeof tok);
    if (rc != 0)
      return rc;
    memcpy(h->token, tok, sizeof tok);
    gpum_log(GPUM_LOG_INFO, "gpumd", "HTTP token rotated (%s)", h->token_path);
  }
  *out = json_pack("{s:s, s:s, s:b}", "token", h->token, "token_file", h->token_path, "rotated",
                   rotate);
  return *out ? 0 : gpum_error(GPUM_ENOMEM, "out of memory");
}
