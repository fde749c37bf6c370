/* SPDX-License-Identifier: ISC */
/*
 * sandbox: what the parts of egress-sandbox share: exit statuses, dying
 * with a message, the control socket exchange, and the --net mode
 * (sandbox_net.c): a network namespace with only lo, no DNS, and loopback
 * proxy listeners handed to the broker.
 */
#ifndef EGRESS_SANDBOX_SANDBOX_H
#define EGRESS_SANDBOX_SANDBOX_H

#include <stddef.h>

#include <seccomp.h>

#define EXIT_USAGE	   2
#define EXIT_ATTACH	   3
#define EXIT_SANDBOX	   4
#define EXIT_EXEC	   127

/* The proxy port inside a --net sandbox, on 127.0.0.1 and ::1. */
#define SANDBOX_PROXY_PORT 3128
#define SANDBOX_PROXY_URL  "http://127.0.0.1:3128"

/* Print "egress-sandbox: what: detail" on stderr and exit with code. */
_Noreturn void sandbox_die(int code, const char *what, const char *detail);

/*
 * Send the command line req (ending in LF) to the control socket at path,
 * with fds[0..nfds) by SCM_RIGHTS along with its bytes, and read the
 * one-line JSON reply; exit with EXIT_ATTACH unless its object has the
 * member ok_key (the broker's error is printed). Write the descriptor the
 * reply carried (CLOEXEC, or -1 when none) to *ret_fd when ret_fd is not
 * NULL (otherwise one is closed), and when ret_ca is not NULL the reply's
 * inspect_ca string to *ret_ca (malloc'd; NULL when it has none). Return
 * the control connection (CLOEXEC; the caller closes it).
 */
int sandbox_control(const char *path, const char *req, const int *fds,
    size_t nfds, const char *ok_key, int *ret_fd, char **ret_ca);

/*
 * Enter the --net sandbox: a new network namespace (as root; otherwise
 * inside a new user namespace mapping only the caller's uid and gid, if
 * the kernel allows it) holding only lo, brought up; a private mount
 * namespace where /etc/resolv.conf is covered, read-only, by a file that
 * names only an unroutable nameserver; listening sockets on
 * 127.0.0.1:SANDBOX_PROXY_PORT and [::1] (when IPv6 is there), handed to
 * the broker at control by `attach-listener instance`. Set the proxy
 * variables in the environment. With inspect, the broker must inspect
 * the instance's TLS (its reply carries the inspection CA, else exit
 * EXIT_ATTACH): write the system roots and that CA to a new file in /tmp
 * (mode 0444) and set SSL_CERT_FILE, CURL_CA_BUNDLE, REQUESTS_CA_BUNDLE,
 * GIT_SSL_CAINFO, PIP_CERT and NODE_EXTRA_CA_CERTS to it. Set *ret_userns
 * to 1 when a user namespace was made (0 as root). Return the
 * control connection, which keeps the listeners served until it is
 * closed. Exit on any failure (EXIT_SANDBOX, EXIT_ATTACH when the broker
 * refuses).
 */
int sandbox_net_enter(const char *control, const char *instance, int root,
    int inspect, int *ret_userns);

/* Remove what sandbox_net_enter() left on disk (the --inspect bundle on a
 * system without a root bundle of its own), once the command ended. */
void sandbox_net_leave(void);

/*
 * Add to ctx the socket rules of the --net filter: connect, bind, listen,
 * accept, accept4, sendto, sendmsg and sendmmsg; socket only for AF_INET
 * and AF_INET6 streams and datagrams; socketpair only for AF_UNIX.
 * Return 0 or -1.
 */
int sandbox_net_rules(scmp_filter_ctx ctx);

#endif /* EGRESS_SANDBOX_SANDBOX_H */
