/* SPDX-License-Identifier: ISC */
/*
 * unixsock: connect to a Unix stream socket by path, for the broker's
 * command-line clients (egressctl's control front-ends, egress-sandbox).
 */
#ifndef EGRESS_UNIXSOCK_H
#define EGRESS_UNIXSOCK_H

/*
 * Connect a new SOCK_STREAM | SOCK_CLOEXEC AF_UNIX socket to path. Return
 * the fd (owned by the caller), or -1 with errno set (ENAMETOOLONG for a
 * path that does not fit sun_path).
 */
int unixsock_connect(const char *path);

#endif
