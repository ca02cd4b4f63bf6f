/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The checks of `gpum doctor` on gpumd itself: is its socket there, may the caller connect to
 * it (owner, group and mode, with the command that fixes them), does gpumd answer and with
 * which version, and does its REST API answer where the configuration says it listens.
 *
 * gpumd is optional for much of gpum (status, monitor, alerts work without it), so a socket
 * missing at the default place warns; one missing where the configuration names it (socket set
 * by a flag, the environment or the file) fails: the user said gpumd is there. A socket that
 * exists but refuses the caller or does not answer always fails.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <netdb.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <gpum/client.h>
#include <gpum/error.h>
#include <gpum/version.h>

#include "cli.h"
#include "doctor.h"
#include "output.h"

#define GPUMD_TIMEOUT_MS 2000

static const char *group_name(gid_t gid, char *buf, size_t len) {
  struct group gr, *res = NULL;
  char tmp[4096];
  if (getgrgid_r(gid, &gr, tmp, sizeof tmp, &res) == 0 && res)
    snprintf(buf, len, "%s", gr.gr_name);
  else
    snprintf(buf, len, "%u", (unsigned)gid);
  return buf;
}

static bool in_group(gid_t gid) {
  if (getegid() == gid)
    return true;
  gid_t groups[256];
  int n = getgroups(256, groups);
  for (int i = 0; i < n; i++)
    if (groups[i] == gid)
      return true;
  return false;
}

/* Whether the caller may connect to the socket st describes: write permission on it. */
static bool may_connect(const struct stat *st) {
  if (geteuid() == 0)
    return true;
  if (st->st_uid == geteuid())
    return (st->st_mode & S_IWUSR) != 0;
  if (in_group(st->st_gid))
    return (st->st_mode & S_IWGRP) != 0;
  return (st->st_mode & S_IWOTH) != 0;
}

/* The socket's owner, group and mode, and whether the caller passes them (finding "gpumd"). */
static void check_access(doc_report_t *r, const char *path, const struct stat *st) {
  char owner[64], group[64], me[64];
  cli_user_name(st->st_uid, owner, sizeof owner);
  group_name(st->st_gid, group, sizeof group);
  cli_user_name(geteuid(), me, sizeof me);
  unsigned mode = (unsigned)(st->st_mode & 0777);
  if (may_connect(st)) {
    doc_add(r, "gpumd", DOC_OK, "%s: owner %s, group %s, mode %04o; %s may connect%s", path, owner,
            group, mode, me,
            geteuid() == 0            ? " (root)"
            : st->st_uid == geteuid() ? " (its owner)"
            : in_group(st->st_gid)    ? " (in its group)"
                                      : "");
    return;
  }
  doc_finding_t *f;
  if (!in_group(st->st_gid) && (st->st_mode & S_IWGRP)) {
    f = doc_add(r, "gpumd", DOC_FAIL,
                "%s: owner %s, group %s, mode %04o; %s is not in group %s, so may not connect",
                path, owner, group, mode, me, group);
    doc_suggest(f,
                "add yourself to the group: sudo usermod -aG %s %s, then log in again (or run "
                "'newgrp %s')",
                group, me, group);
  } else {
    f = doc_add(r, "gpumd", DOC_FAIL, "%s: owner %s, group %s, mode %04o; %s may not write to it",
                path, owner, group, mode, me);
    doc_suggest(f, "gpumd sets the socket's group and mode from socket_group and socket_mode "
                   "(default gpum, 0660): set them in gpumd's configuration and restart it");
  }
}

/* A socket that is there but refused the connection or the hello. */
static void explain_connect(doc_report_t *r, const char *path, int rc, int err) {
  doc_finding_t *f;
  if (rc == GPUM_EPERM || err == EACCES) {
    f = doc_add(r, "gpumd", DOC_FAIL, "cannot connect to gpumd at %s: permission denied", path);
    doc_suggest(f,
                "the socket's directory or the socket itself is closed to you: check 'ls -ld "
                "%s' and its directory; gpumd's socket_group and socket_mode set them",
                path);
  } else if (rc == GPUM_ETIMEDOUT) {
    f = doc_add(r, "gpumd", DOC_FAIL, "gpumd at %s did not answer within %d ms", path,
                GPUMD_TIMEOUT_MS);
    doc_suggest(f, "gpumd is hung or overloaded: see its log (journalctl -u gpumd) and restart "
                   "it (systemctl restart gpumd)");
  } else if (err == ECONNREFUSED) {
    f = doc_add(r, "gpumd", DOC_FAIL,
                "nobody listens on %s: gpumd stopped without removing its socket", path);
    doc_suggest(f, "start gpumd (systemctl start gpumd, or gpumd &); it replaces the stale "
                   "socket");
  } else {
    f = doc_add(r, "gpumd", DOC_FAIL, "cannot connect to gpumd at %s: %s", path, cli_reason(rc));
    doc_suggest(f, "see gpumd's log (journalctl -u gpumd) and restart it");
  }
}

/* connect(2) alone, for its errno: gpum_client_connect folds several into one code. */
static int raw_connect_errno(const char *path) {
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  if (strlen(path) >= sizeof sa.sun_path)
    return ENAMETOOLONG;
  memcpy(sa.sun_path, path, strlen(path));
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return errno;
  int err = connect(fd, (const struct sockaddr *)&sa, sizeof sa) == 0 ? 0 : errno;
  close(fd);
  return err;
}

/* ---- the REST API ---- */

/* Splits http.listen ("127.0.0.1:8642", "[::1]:8642", "0.0.0.0:80") into a host to connect
 * to (a wildcard address becomes loopback) and a port. Returns false when it cannot. */
static bool split_listen(const char *listen, char *host, size_t hlen, char *port, size_t plen) {
  const char *colon = strrchr(listen, ':');
  if (!colon || !colon[1])
    return false;
  const char *h = listen;
  size_t n = (size_t)(colon - listen);
  if (n >= 2 && h[0] == '[' && h[n - 1] == ']') {
    h++;
    n -= 2;
  }
  snprintf(host, hlen, "%.*s", (int)n, h);
  snprintf(port, plen, "%s", colon + 1);
  if (!*host || !strcmp(host, "0.0.0.0") || !strcmp(host, "*"))
    snprintf(host, hlen, "127.0.0.1");
  else if (!strcmp(host, "::"))
    snprintf(host, hlen, "::1");
  return true;
}

/* Connects to host:port within GPUMD_TIMEOUT_MS. Returns the socket, or -1 with errno set. */
static int tcp_connect(const char *host, const char *port) {
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
  struct addrinfo *ai = NULL;
  if (getaddrinfo(host, port, &hints, &ai) != 0 || !ai) {
    errno = EHOSTUNREACH;
    return -1;
  }
  int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  int err = fd < 0 ? errno : 0;
  if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
    err = errno;
    if (err == EINPROGRESS) {
      struct pollfd p = {fd, POLLOUT, 0};
      socklen_t sl = sizeof err;
      err = poll(&p, 1, GPUMD_TIMEOUT_MS) == 1 ? 0 : ETIMEDOUT;
      if (err == 0 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &sl) != 0)
        err = errno;
    }
  }
  freeaddrinfo(ai);
  if (err != 0 && fd >= 0)
    close(fd);
  errno = err;
  return err ? -1 : fd;
}

/* The status code of GET path over fd (0 when no HTTP reply came in time). */
static int http_get_status(int fd, const char *host, const char *path) {
  char req[512], buf[256];
  int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n",
                   path, host);
  if (n <= 0 || write(fd, req, (size_t)n) != (ssize_t)n)
    return 0;
  size_t got = 0;
  while (got < sizeof buf - 1) {
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, GPUMD_TIMEOUT_MS) != 1)
      break;
    ssize_t k = read(fd, buf + got, sizeof buf - 1 - got);
    if (k <= 0)
      break;
    got += (size_t)k;
    if (memchr(buf, '\n', got))
      break;
  }
  buf[got] = '\0';
  int code = 0;
  return sscanf(buf, "HTTP/1.%*d %d", &code) == 1 ? code : 0;
}

static void check_rest(const gpum_config_t *cfg, doc_report_t *r) {
  const char *listen = gpum_config_get_string(cfg, "http.listen");
  char host[128], port[16];
  if (!listen || !*listen || !strcmp(listen, "off")) {
    doc_add(r, "rest", DOC_OK, "gpumd's REST API is off (http.listen)");
    return;
  }
  if (!split_listen(listen, host, sizeof host, port, sizeof port) || !strcmp(port, "0")) {
    doc_add(r, "rest", DOC_OK, "http.listen is '%s': no fixed address to check", listen);
    return;
  }
  int fd = tcp_connect(host, port);
  if (fd < 0) {
    doc_finding_t *f =
        doc_add(r, "rest", DOC_WARN, "gpumd's REST API does not answer at %s (http.listen): %s",
                listen, strerror(errno));
    doc_suggest(f, "gpumd reads http.listen from its own configuration: make gpum's match it "
                   "(the same file, or --http-listen), or see gpumd's log for why it does not "
                   "listen; the dashboard and /metrics are there (docs/rest.md)");
    return;
  }
  int code = http_get_status(fd, host, "/api/v1/gpu/status");
  close(fd);
  if (code == 200 || code == 401 || code == 403) {
    doc_add(r, "rest", DOC_OK, "gpumd's REST API answers at %s (HTTP %d%s)", listen, code,
            code == 200 ? "" : ": it needs the bearer token here, gpum http-token");
  } else {
    doc_finding_t *f = doc_add(r, "rest", DOC_WARN,
                               "%s (http.listen) accepts connections but gave %s%d to GET "
                               "/api/v1/gpu/status",
                               listen, code ? "HTTP " : "no HTTP reply, ", code);
    doc_suggest(f, "another program may listen there: check 'ss -ltnp' and gpumd's http.listen");
  }
}

/* ---- the check ---- */

void doc_check_gpumd(doc_ctx_t *c, doc_report_t *r) {
  char path[256];
  doc_finding_t *f;
  if (gpum_socket_path(c->cfg, path, sizeof path) != 0) {
    f = doc_add(r, "gpumd", DOC_FAIL, "no socket path: %s", cli_reason(GPUM_EINVAL));
    doc_suggest(f, "set socket (--socket, GPUM_SOCKET) to gpumd's socket");
    return;
  }
  bool configured = gpum_config_source(c->cfg, "socket") != GPUM_OPT_SRC_DEFAULT;
  struct stat st;
  if (stat(path, &st) != 0) {
    int err = errno;
    if (err == ENOENT) {
      f = doc_add(r, "gpumd", configured ? DOC_FAIL : DOC_WARN,
                  "no gpumd socket at %s%s: gpumd is not running, or listens elsewhere", path,
                  configured ? " (the socket option)" : "");
      doc_suggest(f, "start gpumd (systemctl start gpumd, or 'gpumd &'); if it runs with another "
                     "socket, set socket (--socket, GPUM_SOCKET) to its path. Without gpumd, gpum "
                     "status, monitor and alerts still work; run, reserve and jobs need it");
    } else {
      f = doc_add(r, "gpumd", DOC_FAIL, "cannot look at %s: %s", path, strerror(err));
      doc_suggest(f,
                  "the directory is closed to you (ls -ld %s); gpumd's socket_group and "
                  "socket_mode decide who may use the socket",
                  path);
    }
    return;
  }
  if (!S_ISSOCK(st.st_mode)) {
    f = doc_add(r, "gpumd", DOC_FAIL, "%s is not a socket", path);
    doc_suggest(f, "remove it or point socket (--socket, GPUM_SOCKET) at gpumd's socket");
    return;
  }
  check_access(r, path, &st);
  gpum_client_t *cl = NULL;
  gpum_error_clear();
  int rc = gpum_client_connect(path, GPUMD_TIMEOUT_MS, &cl);
  if (rc != 0) {
    explain_connect(r, path, rc, raw_connect_errno(path));
    return;
  }
  const char *theirs = gpum_client_server_version(cl);
  const char *ours = gpum_version();
  if (theirs && !strcmp(theirs, ours)) {
    doc_add(r, "gpumd", DOC_OK, "gpumd %s answers at %s, the same version as gpum", theirs, path);
  } else {
    f = doc_add(r, "gpumd", DOC_WARN, "gpumd at %s is version %s, gpum is %s", path,
                theirs ? theirs : "unknown", ours);
    doc_suggest(f, "after an upgrade restart gpumd (systemctl restart gpumd), so that both "
                   "are the same release");
  }
  gpum_client_close(cl);
  check_rest(c->cfg, r);
}
