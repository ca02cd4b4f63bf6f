/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the OS layer (src/common/os.c) and the JSON escaping every hand-written JSON
 * of gpum shares (src/lib/core/strbuf.c): the clocks, /proc/PID/stat parsing (a command name
 * with spaces and ')', malformed lines) and reading (this process, a missing pid), the
 * /proc/net/tcp line parser (IPv4, IPv6, TIME_WAIT, the header, malformed lines), the owner of
 * a loopback TCP peer found through sock_diag and through /proc/net/tcp alike (this process's
 * uid and the peer socket's inode; none once the peer closed), and the escape of every byte
 * class.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include <gpum/clock.h>

#include "core/options_internal.h"
#include "os_internal.h"

static void test_clocks(void **state) {
  (void)state;
  uint64_t a = gpum__os_mono_ns(), b = gpum_clock_mono_ns();
  assert_true(b >= a);
  assert_true(gpum__os_mono_ms() * 1000000u <= gpum__os_mono_ns());
  uint64_t real = gpum_clock_real_ns();
  assert_true(real > 1700000000ull * 1000000000ull); /* after November 2023 */
  assert_true(gpum__os_real_ns() >= real);
}

static void test_parse_proc_stat(void **state) {
  (void)state;
  gpum__os_proc_stat_t st;
  static const char line[] =
      "4242 (my (odd) cmd) S 17 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 "
      "12345 67 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";
  assert_int_equal(gpum__os_parse_proc_stat(line, &st), 0);
  assert_int_equal(st.state, 'S');
  assert_int_equal(st.ppid, 17);
  assert_int_equal(st.start_time, 987654);
  assert_int_equal(gpum__os_parse_proc_stat("12 (x) S 1 2 3", &st), -EINVAL); /* short */
  assert_int_equal(gpum__os_parse_proc_stat("12 x S 1", &st), -EINVAL);       /* no ')' */
  assert_int_equal(gpum__os_parse_proc_stat("12 (x)", &st), -EINVAL);
  static const char bad[] = "1 (x) R q 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0\n";
  assert_int_equal(gpum__os_parse_proc_stat(bad, &st), -EINVAL); /* ppid not a number */
}

static void test_read_proc_stat(void **state) {
  (void)state;
  gpum__os_proc_stat_t me, again;
  assert_int_equal(gpum__os_proc_stat((int)getpid(), &me), 0);
  assert_int_equal(me.ppid, (int)getppid());
  assert_true(me.state == 'R' || me.state == 'S');
  assert_true(me.start_time > 0);
  assert_int_equal(gpum__os_proc_stat((int)getpid(), &again), 0);
  assert_int_equal(again.start_time, me.start_time); /* with the pid, it names the process */
  assert_int_equal(gpum__os_proc_stat(0x7ffffff0, &me), -ENOENT);
}

/* A line as the kernel prints it: each 32-bit word of the address in hex as the host reads it. */
static void tcp_line(char *buf, size_t len, const char *local, uint16_t lport, const char *remote,
                     uint16_t rport, unsigned state, unsigned uid, unsigned long inode) {
  struct in_addr l, r;
  assert_int_equal(inet_pton(AF_INET, local, &l), 1);
  assert_int_equal(inet_pton(AF_INET, remote, &r), 1);
  snprintf(buf, len,
           "   7: %08X:%04X %08X:%04X %02X 00000000:00000000 00:00000000 00000000 %5u        0 "
           "%lu 1 0000000000000000 20 4 30 10 -1                     \n",
           (unsigned)l.s_addr, lport, (unsigned)r.s_addr, rport, state, uid, inode);
}

static void test_parse_proc_net_tcp(void **state) {
  (void)state;
  gpum__os_tcp_line_t t;
  char line[256];
  static const unsigned char lo4[4] = {127, 0, 0, 1}, ten[4] = {10, 1, 2, 3};
  tcp_line(line, sizeof line, "127.0.0.1", 8642, "10.1.2.3", 41668, 1, 1000, 9830787);
  assert_int_equal(gpum__os_parse_proc_net_tcp(line, &t), 0);
  assert_int_equal(t.alen, 4);
  assert_memory_equal(t.local, lo4, 4);
  assert_memory_equal(t.remote, ten, 4);
  assert_int_equal(t.lport, 8642);
  assert_int_equal(t.rport, 41668);
  assert_int_equal(t.state, 1);
  assert_int_equal(t.uid, 1000);
  assert_int_equal(t.inode, 9830787);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  /* Lines copied from a little-endian host: a listener, and a TIME_WAIT socket (no inode). */
  static const char listen[] = "   0: 0100007F:92E3 00000000:0000 0A 00000000:00000046 "
                               "00:00000000 00000000     0        0 9830787 72 "
                               "0000000039116262 100 0 0 10 0                  \n";
  assert_int_equal(gpum__os_parse_proc_net_tcp(listen, &t), 0);
  assert_memory_equal(t.local, lo4, 4);
  assert_int_equal(t.lport, 0x92E3);
  assert_int_equal(t.rport, 0);
  assert_int_equal(t.state, 10);
  assert_int_equal(t.inode, 9830787);
  static const char tw[] = "  12: 0100007F:A2C4 0100007F:21C2 06 00000000:00000000 03:00001234 "
                           "00000000     0        0 0 3 0000000000000000\n";
  assert_int_equal(gpum__os_parse_proc_net_tcp(tw, &t), 0);
  assert_int_equal(t.state, 6);
  assert_int_equal(t.uid, 0);
  assert_int_equal(t.inode, 0);
  assert_int_equal(t.rport, 8642);
  /* /proc/net/tcp6: ::1 is the word 0x01000000 last. */
  static const char v6[] =
      "   3: 00000000000000000000000001000000:1F90 00000000000000000000000001000000:D2F0 01 "
      "00000000:00000000 00:00000000 00000000 65534        0 123456 1 0000000000000000 20 4 "
      "30 10 -1\n";
  static const unsigned char lo6[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  assert_int_equal(gpum__os_parse_proc_net_tcp(v6, &t), 0);
  assert_int_equal(t.alen, 16);
  assert_memory_equal(t.local, lo6, 16);
  assert_memory_equal(t.remote, lo6, 16);
  assert_int_equal(t.lport, 8080);
  assert_int_equal(t.rport, 0xD2F0);
  assert_int_equal(t.uid, 65534);
  assert_int_equal(t.inode, 123456);
#endif
  static const char header[] = "  sl  local_address rem_address   st tx_queue rx_queue tr "
                               "tm->when retrnsmt   uid  timeout inode\n";
  assert_int_equal(gpum__os_parse_proc_net_tcp(header, &t), -EINVAL);
  static const char *const bad[] = {
      "",
      "   0: 0100007F:1F90\n", /* short */
      "   0: 0100007G:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 1\n",
      "   0: 100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 1\n",
      "   0: 0100007F:1F90 00000000000000000000000001000000:0000 0A 0:0 0:0 0 0 0 1\n",
      "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000 x 0 1\n",
      "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0\n",
      "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 -1\n",
      "   0: 0100007F:1F90 00000000:0000 0A 0:0 0:0 0 4294967296 0 1\n", /* uid over 32 bits */
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    assert_int_equal(gpum__os_parse_proc_net_tcp(bad[i], &t), -EINVAL);
}

/* A loopback TCP connection in this process: the listener's address family (AF_INET on
 * 127.0.0.1, AF_INET6 on ::1), its client and the accepted end. false when the family cannot
 * be used here (no IPv6). */
static bool loopback_pair(int family, int *client, int *server) {
  struct sockaddr_storage ss;
  memset(&ss, 0, sizeof ss);
  socklen_t len = family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
  if (family == AF_INET) {
    struct sockaddr_in *in = (struct sockaddr_in *)&ss;
    in->sin_family = AF_INET;
    in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  } else {
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
    in6->sin6_family = AF_INET6;
    in6->sin6_addr = in6addr_loopback;
  }
  int l = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (l < 0 || bind(l, (struct sockaddr *)&ss, len) != 0 || listen(l, 1) != 0 ||
      getsockname(l, (struct sockaddr *)&ss, &len) != 0) {
    if (l >= 0)
      close(l);
    return false;
  }
  *client = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(*client >= 0);
  assert_int_equal(connect(*client, (struct sockaddr *)&ss, len), 0);
  *server = accept(l, NULL, NULL);
  assert_true(*server >= 0);
  close(l);
  return true;
}

/* The owner of fd's peer socket, looked up as how says. */
static int peer_owner(int fd, unsigned how, gpum__os_sock_owner_t *o) {
  struct sockaddr_storage local, remote;
  socklen_t llen = sizeof local, rlen = sizeof remote;
  assert_int_equal(getsockname(fd, (struct sockaddr *)&local, &llen), 0);
  assert_int_equal(getpeername(fd, (struct sockaddr *)&remote, &rlen), 0);
  return gpum__os_tcp_peer_owner((struct sockaddr *)&local, (struct sockaddr *)&remote, how, 100,
                                 o);
}

static void test_tcp_peer_owner(void **state) {
  (void)state;
  static const unsigned ways[] = {GPUM__OS_SOCK_NETLINK, GPUM__OS_SOCK_PROC,
                                  GPUM__OS_SOCK_NETLINK | GPUM__OS_SOCK_PROC};
  static const int families[] = {AF_INET, AF_INET6};
  for (size_t f = 0; f < 2; f++) {
    int client = -1, server = -1;
    if (!loopback_pair(families[f], &client, &server)) {
      assert_int_equal(families[f], AF_INET6); /* IPv4 loopback is always there */
      continue;
    }
    struct stat cst, sst;
    assert_int_equal(fstat(client, &cst), 0);
    assert_int_equal(fstat(server, &sst), 0);
    for (size_t w = 0; w < 3; w++) {
      gpum__os_sock_owner_t o = {0};
      /* From the accepted end: the client socket, this process's. */
      assert_int_equal(peer_owner(server, ways[w], &o), 0);
      assert_int_equal(o.uid, (uint32_t)getuid());
      assert_int_equal(o.inode, (uint64_t)cst.st_ino);
      /* And the other way round. */
      assert_int_equal(peer_owner(client, ways[w], &o), 0);
      assert_int_equal(o.inode, (uint64_t)sst.st_ino);
    }
    /* Once the client closed, its socket (orphaned, FIN_WAIT2) has no owner to go by. */
    struct sockaddr_storage local, remote;
    socklen_t llen = sizeof local, rlen = sizeof remote;
    assert_int_equal(getsockname(server, (struct sockaddr *)&local, &llen), 0);
    assert_int_equal(getpeername(server, (struct sockaddr *)&remote, &rlen), 0);
    close(client);
    for (size_t w = 0; w < 3; w++) {
      gpum__os_sock_owner_t o = {0};
      assert_int_equal(gpum__os_tcp_peer_owner((struct sockaddr *)&local,
                                               (struct sockaddr *)&remote, ways[w], 100, &o),
                       -ENOENT);
    }
    close(server);
  }
  /* Not a pair of IP addresses, or no way to look. */
  struct sockaddr_un un = {.sun_family = AF_UNIX};
  struct sockaddr_in in = {.sin_family = AF_INET};
  gpum__os_sock_owner_t o;
  assert_int_equal(gpum__os_tcp_peer_owner((struct sockaddr *)&un, (struct sockaddr *)&in,
                                           GPUM__OS_SOCK_PROC, 100, &o),
                   -EAFNOSUPPORT);
  assert_int_equal(
      gpum__os_tcp_peer_owner((struct sockaddr *)&in, (struct sockaddr *)&in, 0, 100, &o), -EINVAL);
}

static void test_json_escape(void **state) {
  (void)state;
  char esc[6];
  assert_int_equal(gpum__json_escape('a', esc), 0);
  assert_int_equal(gpum__json_escape(0xc3, esc), 0); /* UTF-8 goes as it is */
  assert_int_equal(gpum__json_escape('"', esc), 2);
  assert_memory_equal(esc, "\\\"", 2);
  assert_int_equal(gpum__json_escape('\n', esc), 2);
  assert_memory_equal(esc, "\\n", 2);
  assert_int_equal(gpum__json_escape(0x1f, esc), 6);
  assert_memory_equal(esc, "\\u001F", 6);
  gpum__strbuf_t b = {0};
  static const char in[] = "a\"b\\c\td\x01\xc3\xa9";
  gpum__strbuf_json(&b, in, sizeof in - 1);
  char *out = NULL;
  assert_int_equal(gpum__strbuf_finish(&b, &out), 0);
  assert_string_equal(out, "\"a\\\"b\\\\c\\td\\u0001\xc3\xa9\"");
  free(out);
  gpum__strbuf_t e = {0};
  gpum__strbuf_json(&e, "", 0);
  assert_int_equal(gpum__strbuf_finish(&e, &out), 0);
  assert_string_equal(out, "\"\"");
  free(out);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_clocks),         cmocka_unit_test(test_parse_proc_stat),
      cmocka_unit_test(test_read_proc_stat), cmocka_unit_test(test_parse_proc_net_tcp),
      cmocka_unit_test(test_tcp_peer_owner), cmocka_unit_test(test_json_escape),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
