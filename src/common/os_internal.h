/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The small OS layer: clocks, /proc/PID/stat and the owner of a local TCP peer, written once for
 * libgpum, gpumd and the simulated driver. os.c is compiled into libgpum and into libgpum_sim
 * (which must not link libgpum), so nothing here sets libgpum's error detail or exports a symbol:
 * failures are negative errno values that the caller turns into its own message.
 *
 * Every function is thread-safe and async-signal-safe except where noted.
 */
#ifndef GPUM_OS_INTERNAL_H
#define GPUM_OS_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC in nanoseconds: for durations, deadlines and timeouts. Never fails. */
uint64_t gpum__os_mono_ns(void);
/* The same in milliseconds. */
uint64_t gpum__os_mono_ms(void);
/* CLOCK_REALTIME in nanoseconds since the epoch: for timestamps that are stored or shown. */
uint64_t gpum__os_real_ns(void);

/* Initialises a condition variable whose timed waits take CLOCK_MONOTONIC deadlines (the
 * default clock, CLOCK_REALTIME, jumps with the wall clock, and a monotonic deadline given to it
 * lies decades in the past, so the wait returns at once). Returns 0 or a positive errno. */
int gpum__os_cond_init_mono(pthread_cond_t *cond);
/* The timespec of a CLOCK_MONOTONIC deadline in nanoseconds, for pthread_cond_timedwait on a
 * condition variable made by gpum__os_cond_init_mono. */
struct timespec gpum__os_mono_timespec(uint64_t deadline_ns);

/* Reads up to len - 1 bytes of a small file (a /proc file: it may not say its size) into buf,
 * NUL-terminated (len > 0). Returns the byte count, or a negative errno when the file cannot be
 * opened or read (a read that fails after some bytes returns those). Not async-signal-safe. */
long gpum__os_read_file(const char *path, char *buf, size_t len);

/* The fields of /proc/PID/stat that gpum uses. */
typedef struct {
  char state;          /* field 3: R, S, D, Z (zombie), X (dead), ... */
  int ppid;            /* field 4 */
  uint64_t start_time; /* field 22: clock ticks after boot; with the pid, names a process */
} gpum__os_proc_stat_t;

/* Parses the text of a /proc/PID/stat line (NUL-terminated). The command name (field 2) may
 * hold spaces and ')': the fields resume after the last ')'. Returns 0 or -EINVAL (malformed:
 * fewer than 22 fields, or a field that is not a number). */
int gpum__os_parse_proc_stat(const char *text, gpum__os_proc_stat_t *out);
/* Reads /proc/PID/stat of pid. Returns 0, -ENOENT (no such process), -EINVAL (malformed) or
 * another negative errno (cannot open or read). Not async-signal-safe (strtoull). */
int gpum__os_proc_stat(int pid, gpum__os_proc_stat_t *out);

struct sockaddr;

/* The owner of a TCP socket of this host (in the caller's network namespace). */
typedef struct {
  uint32_t uid;   /* the uid that created the socket (its file's owner, as ls -l /proc/PID/fd
                     shows it), in the caller's user namespace */
  uint64_t inode; /* the socket's inode, as in /proc/PID/fd's "socket:[INODE]"; never 0 */
} gpum__os_sock_owner_t;

/* The ways gpum__os_tcp_peer_owner may look (a mask): the kernel's sock_diag over netlink
 * (NETLINK_SOCK_DIAG, an exact lookup of one socket), and /proc/net/tcp or tcp6 (read whole). */
#define GPUM__OS_SOCK_NETLINK 1u
#define GPUM__OS_SOCK_PROC 2u

/* Finds the owner of the socket at the other end of a TCP connection whose two ends are both
 * on this host, from one end: local and remote are that end's getsockname and getpeername
 * (both AF_INET, or both AF_INET6). The socket looked for is the one whose own local address
 * is remote and whose remote address is local. With GPUM__OS_SOCK_NETLINK, sock_diag is asked
 * first (waiting at most timeout_ms for its answer, which the kernel gives at once); with
 * GPUM__OS_SOCK_PROC, /proc/net/tcp (tcp6) is read when netlink was not asked or failed in any
 * way (no sock_diag or inet_diag in the kernel, a filter on netlink sockets). Reading that file
 * takes time in proportion to the host's TCP sockets and is not bounded by timeout_ms.
 *
 * Only a socket that a file still holds counts: one in TIME_WAIT, one closed by its process but
 * not yet finished (orphaned), and one listening carry no owner (the kernel shows uid 0 for some
 * of them), so they are -ENOENT. The answer is the socket's creator (or who root chowned it to),
 * not necessarily the process using it now (a descriptor may be passed or inherited).
 *
 * Returns 0 with *out set, -ENOENT (no such socket with an owner), -EAFNOSUPPORT (not a pair of
 * IPv4 or IPv6 addresses), -EINVAL (how names no way), -ETIMEDOUT (netlink did not answer;
 * PROC not asked), or another negative errno. Not async-signal-safe; thread-safe. */
int gpum__os_tcp_peer_owner(const struct sockaddr *local, const struct sockaddr *remote,
                            unsigned how, int timeout_ms, gpum__os_sock_owner_t *out);

/* One socket's line of /proc/net/tcp or /proc/net/tcp6. */
typedef struct {
  unsigned char local[16], remote[16]; /* addresses in network byte order (4 or 16 bytes) */
  uint16_t lport, rport;               /* ports in host byte order */
  unsigned alen;                       /* 4 (tcp) or 16 (tcp6): the address format of the line */
  unsigned state;                      /* TCP_ESTABLISHED (1) ... TCP_LISTEN (10) */
  uint32_t uid;
  uint64_t inode; /* 0 when no file holds the socket (TIME_WAIT, orphaned) */
} gpum__os_tcp_line_t;

/* Parses one line of /proc/net/tcp or tcp6 ("  0: 0100007F:1F90 0100007F:A2C4 01 ... UID
 * TIMEOUT INODE ..."; the kernel prints each 32-bit word of an address in hex as the host
 * reads it from memory). Returns 0, or -EINVAL for the header line or a malformed one. */
int gpum__os_parse_proc_net_tcp(const char *line, gpum__os_tcp_line_t *out);

#endif /* GPUM_OS_INTERNAL_H */
