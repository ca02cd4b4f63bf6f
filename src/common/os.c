/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The OS layer of os_internal.h: clocks, /proc/PID/stat and the owner of a local TCP peer
 * (sock_diag, /proc/net/tcp). Also compiled into libgpum_sim (src/sim/CMakeLists.txt), so it
 * uses nothing else of libgpum.
 */
#include "os_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static uint64_t clock_ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t gpum__os_mono_ns(void) {
  return clock_ns(CLOCK_MONOTONIC);
}

uint64_t gpum__os_mono_ms(void) {
  return clock_ns(CLOCK_MONOTONIC) / 1000000u;
}

uint64_t gpum__os_real_ns(void) {
  return clock_ns(CLOCK_REALTIME);
}

int gpum__os_cond_init_mono(pthread_cond_t *cond) {
  pthread_condattr_t ca;
  int rc = pthread_condattr_init(&ca);
  if (rc != 0)
    return rc;
  rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  if (rc == 0)
    rc = pthread_cond_init(cond, &ca);
  pthread_condattr_destroy(&ca);
  return rc;
}

struct timespec gpum__os_mono_timespec(uint64_t deadline_ns) {
  return (struct timespec){(time_t)(deadline_ns / 1000000000u), (long)(deadline_ns % 1000000000u)};
}

long gpum__os_read_file(const char *path, char *buf, size_t len) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  size_t got = 0;
  int err = 0;
  while (got + 1 < len) {
    ssize_t r = read(fd, buf + got, len - 1 - got);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0)
      err = errno;
    if (r <= 0)
      break;
    got += (size_t)r;
  }
  close(fd);
  buf[got] = '\0';
  return got == 0 && err != 0 ? -err : (long)got;
}

/* The number at p (a field), ending at a space, newline or the end. */
static int field_u64(const char *p, uint64_t *out) {
  char *end = NULL;
  errno = 0;
  unsigned long long v = strtoull(p, &end, 10);
  if (end == p || errno != 0 || (*end != ' ' && *end != '\n' && *end != '\0'))
    return -EINVAL;
  *out = (uint64_t)v;
  return 0;
}

int gpum__os_parse_proc_stat(const char *text, gpum__os_proc_stat_t *out) {
  const char *p = strrchr(text, ')');
  if (p == NULL || p[1] != ' ' || p[2] == '\0')
    return -EINVAL;
  p += 2; /* field 3 */
  out->state = *p;
  uint64_t ppid = 0;
  for (int field = 4; field <= 22; field++) { /* p moves on to this field */
    p = strchr(p, ' ');
    if (p == NULL)
      return -EINVAL;
    p++;
    if (field == 4 && (field_u64(p, &ppid) != 0 || ppid > 0x7fffffff))
      return -EINVAL;
  }
  out->ppid = (int)ppid;
  return field_u64(p, &out->start_time);
}

int gpum__os_proc_stat(int pid, gpum__os_proc_stat_t *out) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  long got = gpum__os_read_file(path, buf, sizeof buf);
  if (got == -ENOENT || got == -ESRCH)
    return -ENOENT;
  if (got <= 0)
    return got < 0 ? (int)got : -EINVAL;
  return gpum__os_parse_proc_stat(buf, out);
}

/* ---- the owner of a local TCP peer ------------------------------------------------------- */

/* The kernel's TCP states (include/net/tcp_states.h) that carry no owner. */
enum { OS_TCP_TIME_WAIT = 6, OS_TCP_LISTEN = 10, OS_TCP_NEW_SYN_RECV = 12 };

/* One end of a TCP connection; an IPv4-mapped IPv6 address is kept as the IPv4 one, so that
 * either side may be an IPv4 socket or an IPv6 one that reached an IPv4 address. */
typedef struct {
  int family; /* AF_INET or AF_INET6 */
  unsigned alen;
  unsigned char addr[16]; /* network byte order */
  uint16_t port;          /* host byte order */
} endpoint_t;

static void endpoint_set(endpoint_t *e, const unsigned char *addr, unsigned alen, uint16_t port) {
  static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  memset(e, 0, sizeof *e);
  e->port = port;
  if (alen == 16 && memcmp(addr, mapped, sizeof mapped) != 0) {
    e->family = AF_INET6;
    e->alen = 16;
    memcpy(e->addr, addr, 16);
  } else {
    e->family = AF_INET;
    e->alen = 4;
    memcpy(e->addr, alen == 16 ? addr + 12 : addr, 4);
  }
}

static int endpoint_of(const struct sockaddr *sa, endpoint_t *e) {
  if (sa && sa->sa_family == AF_INET) {
    const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
    endpoint_set(e, (const unsigned char *)&in->sin_addr, 4, ntohs(in->sin_port));
    return 0;
  }
  if (sa && sa->sa_family == AF_INET6) {
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
    endpoint_set(e, in6->sin6_addr.s6_addr, 16, ntohs(in6->sin6_port));
    return 0;
  }
  return -EAFNOSUPPORT;
}

static bool endpoint_eq(const endpoint_t *a, const endpoint_t *b) {
  return a->family == b->family && a->port == b->port && memcmp(a->addr, b->addr, a->alen) == 0;
}

/* Whether a socket found in this state with this inode has an owner to go by: a file holds it,
 * and it is not a listener (the lookup falls back to those) nor a request or TIME_WAIT socket
 * (shown as uid 0). */
static bool owned(unsigned state, uint64_t inode) {
  return inode != 0 && state != OS_TCP_LISTEN && state != OS_TCP_TIME_WAIT &&
         state != OS_TCP_NEW_SYN_RECV;
}

/* Reads sock_diag's answer to the request for the socket src -> dst: one inet_diag_msg, or
 * an error (-ENOENT: no such socket). */
static int netlink_answer(const unsigned char *buf, size_t len, const endpoint_t *src,
                          const endpoint_t *dst, gpum__os_sock_owner_t *out) {
  while (len >= sizeof(struct nlmsghdr)) {
    struct nlmsghdr h;
    memcpy(&h, buf, sizeof h);
    if (h.nlmsg_len < sizeof h || h.nlmsg_len > len)
      return -EPROTO;
    const unsigned char *data = buf + NLMSG_HDRLEN;
    size_t dlen = h.nlmsg_len - NLMSG_HDRLEN;
    if (h.nlmsg_seq == 1 && h.nlmsg_type == NLMSG_ERROR) {
      struct nlmsgerr e;
      if (dlen < sizeof e)
        return -EPROTO;
      memcpy(&e, data, sizeof e);
      return e.error < 0 ? e.error : -EPROTO;
    }
    if (h.nlmsg_seq == 1 && h.nlmsg_type == SOCK_DIAG_BY_FAMILY) {
      struct inet_diag_msg m;
      if (dlen < sizeof m)
        return -EPROTO;
      memcpy(&m, data, sizeof m);
      endpoint_t ms, md;
      unsigned alen = m.idiag_family == AF_INET6 ? 16 : 4;
      endpoint_set(&ms, (const unsigned char *)m.id.idiag_src, alen, ntohs(m.id.idiag_sport));
      endpoint_set(&md, (const unsigned char *)m.id.idiag_dst, alen, ntohs(m.id.idiag_dport));
      /* The exact lookup may return a listener on src's port: only the socket itself counts. */
      if (!endpoint_eq(&ms, src) || !endpoint_eq(&md, dst) || !owned(m.idiag_state, m.idiag_inode))
        return -ENOENT;
      out->uid = m.idiag_uid;
      out->inode = m.idiag_inode;
      return 0;
    }
    size_t step = NLMSG_ALIGN(h.nlmsg_len);
    if (step >= len)
      break;
    buf += step;
    len -= step;
  }
  return -EPROTO;
}

/* Asks sock_diag for the TCP socket whose local end is src and whose remote end is dst. */
static int owner_netlink(const endpoint_t *src, const endpoint_t *dst, int timeout_ms,
                         gpum__os_sock_owner_t *out) {
  int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (fd < 0)
    return -errno;
  struct {
    struct nlmsghdr nlh;
    struct inet_diag_req_v2 r;
  } req;
  memset(&req, 0, sizeof req);
  req.nlh.nlmsg_len = sizeof req;
  req.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  req.nlh.nlmsg_flags = NLM_F_REQUEST; /* no NLM_F_DUMP: the one socket of id */
  req.nlh.nlmsg_seq = 1;
  req.r.sdiag_family = (uint8_t)src->family;
  req.r.sdiag_protocol = IPPROTO_TCP;
  req.r.idiag_states = ~0u;
  req.r.id.idiag_sport = htons(src->port);
  req.r.id.idiag_dport = htons(dst->port);
  memcpy(req.r.id.idiag_src, src->addr, src->alen);
  memcpy(req.r.id.idiag_dst, dst->addr, dst->alen);
  req.r.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
  req.r.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
  struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
  int rc = 0;
  if (sendto(fd, &req, sizeof req, 0, (const struct sockaddr *)&kernel, sizeof kernel) < 0) {
    rc = -errno;
    goto out_close;
  }
  struct pollfd p = {.fd = fd, .events = POLLIN};
  uint64_t deadline = gpum__os_mono_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
  for (;;) {
    uint64_t now = gpum__os_mono_ms();
    rc = poll(&p, 1, now < deadline ? (int)(deadline - now) : 0);
    if (rc >= 0 || errno != EINTR)
      break;
  }
  if (rc <= 0) {
    rc = rc == 0 ? -ETIMEDOUT : -errno;
    goto out_close;
  }
  union {
    struct nlmsghdr align;
    unsigned char buf[8192];
  } u;
  ssize_t n = recv(fd, u.buf, sizeof u.buf, MSG_DONTWAIT);
  rc = n < 0 ? -errno : netlink_answer(u.buf, (size_t)n, src, dst, out);
out_close:
  close(fd);
  return rc;
}

/* The n (at most 8) hex digits at p as a number; false when one is not a hex digit. */
static bool hex_u32(const char *p, unsigned n, uint32_t *v) {
  *v = 0;
  for (unsigned i = 0; i < n; i++) {
    char c = p[i];
    unsigned d = c >= '0' && c <= '9'   ? (unsigned)(c - '0')
                 : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10)
                 : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                                        : 16u;
    if (d == 16u)
      return false;
    *v = *v << 4 | d;
  }
  return true;
}

/* "ADDR:PORT" at *p: 8 or 32 hex digits (each 32-bit word as the host reads it), then 4. */
static int parse_addr_port(const char **p, unsigned char *addr, unsigned *alen, uint16_t *port) {
  size_t n = strcspn(*p, ": \n");
  if ((n != 8 && n != 32) || (*p)[n] != ':')
    return -EINVAL;
  for (size_t i = 0; i < n / 8; i++) {
    uint32_t w;
    if (!hex_u32(*p + 8 * i, 8, &w))
      return -EINVAL;
    memcpy(addr + 4 * i, &w, 4);
  }
  const char *q = *p + n + 1;
  uint32_t v;
  if (!hex_u32(q, 4, &v) || q[4] != ' ')
    return -EINVAL;
  *alen = (unsigned)n / 2;
  *port = (uint16_t)v;
  *p = q + 4;
  return 0;
}

/* The next field after the one at p (which may be preceded by spaces), or NULL at the end. */
static const char *next_field(const char *p) {
  p += strspn(p, " ");
  p += strcspn(p, " \n");
  p += strspn(p, " ");
  return *p && *p != '\n' ? p : NULL;
}

/* The decimal field at p (digits only: strtoull would take a sign). */
static int field_dec(const char *p, uint64_t *out) {
  return *p >= '0' && *p <= '9' ? field_u64(p, out) : -EINVAL;
}

int gpum__os_parse_proc_net_tcp(const char *line, gpum__os_tcp_line_t *out) {
  memset(out, 0, sizeof *out);
  const char *p = line + strspn(line, " ");
  size_t digits = strspn(p, "0123456789");
  if (digits == 0 || p[digits] != ':') /* "sl" of the header line, or garbage */
    return -EINVAL;
  p += digits + 1;
  p += strspn(p, " ");
  unsigned ralen = 0;
  if (parse_addr_port(&p, out->local, &out->alen, &out->lport) != 0)
    return -EINVAL;
  p += strspn(p, " ");
  if (parse_addr_port(&p, out->remote, &ralen, &out->rport) != 0 || ralen != out->alen)
    return -EINVAL;
  p += strspn(p, " ");
  uint32_t st;
  if (!hex_u32(p, 2, &st) || p[2] != ' ')
    return -EINVAL;
  out->state = st;
  /* state, tx_queue:rx_queue, tr:tm->when, retrnsmt, then uid, timeout, inode */
  for (int i = 0; i < 4 && p; i++)
    p = next_field(p);
  uint64_t uid = 0;
  if (!p || field_dec(p, &uid) != 0 || uid > UINT32_MAX)
    return -EINVAL;
  out->uid = (uint32_t)uid;
  for (int i = 0; i < 2 && p; i++)
    p = next_field(p);
  if (!p || field_dec(p, &out->inode) != 0)
    return -EINVAL;
  return 0;
}

/* Looks for the socket src -> dst in /proc/net/tcp (IPv4: also tcp6, where an IPv6 socket
 * that reached an IPv4 address is listed) or /proc/net/tcp6. */
static int owner_proc(const endpoint_t *src, const endpoint_t *dst, gpum__os_sock_owner_t *out) {
  static const char *const files[] = {"/proc/net/tcp", "/proc/net/tcp6"};
  int rc = -ENOENT;
  for (size_t i = src->family == AF_INET ? 0 : 1; i < 2; i++) {
    FILE *f = fopen(files[i], "re");
    if (!f) {
      if (errno != ENOENT && rc == -ENOENT)
        rc = -errno;
      continue;
    }
    char line[512];
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) {
      gpum__os_tcp_line_t t;
      endpoint_t ls, rs;
      if (gpum__os_parse_proc_net_tcp(line, &t) != 0)
        continue;
      endpoint_set(&ls, t.local, t.alen, t.lport);
      endpoint_set(&rs, t.remote, t.alen, t.rport);
      /* A TIME_WAIT line of the same addresses may precede the live one: go on past it. */
      if (endpoint_eq(&ls, src) && endpoint_eq(&rs, dst) && owned(t.state, t.inode)) {
        out->uid = t.uid;
        out->inode = t.inode;
        found = true;
      }
    }
    fclose(f);
    if (found)
      return 0;
  }
  return rc;
}

int gpum__os_tcp_peer_owner(const struct sockaddr *local, const struct sockaddr *remote,
                            unsigned how, int timeout_ms, gpum__os_sock_owner_t *out) {
  endpoint_t me, peer;
  if (endpoint_of(local, &me) != 0 || endpoint_of(remote, &peer) != 0 || me.family != peer.family)
    return -EAFNOSUPPORT;
  if ((how & (GPUM__OS_SOCK_NETLINK | GPUM__OS_SOCK_PROC)) == 0)
    return -EINVAL;
  int rc = -ENOENT;
  /* Seen from the peer's side: its local end is our remote one, and the other way round. */
  if (how & GPUM__OS_SOCK_NETLINK) {
    rc = owner_netlink(&peer, &me, timeout_ms, out);
    if (rc == 0 || !(how & GPUM__OS_SOCK_PROC))
      return rc;
  }
  return owner_proc(&peer, &me, out);
}
