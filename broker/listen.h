/* SPDX-License-Identifier: ISC */
/*
 * listen: egressd's Unix sockets. One listening socket per configured
 * instance, <[broker] instance_socket_dir>/<instance>.sock, mode 0660 and
 * chowned to the entry's socket_owner / socket_group (names or numeric
 * ids) when set; a connection accepted there is bound to that instance
 * for its whole life (the instance comes from the socket, never from
 * anything the client sends). listen_reconcile() creates the sockets of
 * new instances and removes those of removed ones after each reload. The
 * control socket ([broker] control_socket, mode 0600) answers every line
 * with {"error":"unknown command"} until its commands arrive. Every fd is
 * CLOEXEC; connections are capped (LISTEN_CONTROL_MAX control clients,
 * LISTEN_LINE_MAX bytes per control line; plugin connections are capped
 * by the accept callback's owner).
 */
#ifndef EGRESS_BROKER_LISTEN_H
#define EGRESS_BROKER_LISTEN_H

#include "conf/conf.h"

struct event_base;
struct listen_ctx;

#define LISTEN_CONTROL_MAX	16	/* control connections at once */
#define LISTEN_LINE_MAX		4096	/* bytes of one control line */
#define LISTEN_BACKLOG		128

/*
 * Called for each connection accepted on an instance socket. Takes
 * ownership of fd (connected, non-blocking, CLOEXEC). instance is
 * borrowed for the call: copy it.
 */
typedef void (*listen_accept_cb)(void *arg, int fd, const char *instance);

/*
 * Create an empty set of listeners on base (borrowed). Return 0 and write
 * *ret, or EGRESS_ERR_NOMEM.
 */
int listen_new(struct event_base *base, listen_accept_cb cb, void *arg,
    struct listen_ctx **ret);

/*
 * Make the instance sockets match snapshot s: create s's instance socket
 * folder if missing (mode 0755, one level), create a socket for every
 * instance that has none, apply socket_owner/socket_group and mode 0660
 * to every instance socket, and close and unlink the sockets of instances
 * no longer in s. A stale socket file at a path is replaced; any other
 * kind of file there is left alone and that instance gets no socket.
 * Problems are logged (egress.listen events) and counted. Return the
 * number of instances without a working socket (0 when all are fine).
 */
int listen_reconcile(struct listen_ctx *l, const struct conf_snapshot *s);

/*
 * Create the control socket at path (mode 0600; a stale socket file there
 * is replaced). Return 0, or EGRESS_ERR_IO / EGRESS_ERR_EXISTS (a file
 * that is not a socket is in the way) / EGRESS_ERR_TOO_BIG (path too long
 * for sun_path).
 */
int listen_control_open(struct listen_ctx *l, const char *path);

/*
 * Stop accepting on every socket (instance and control), close the
 * listeners and unlink their files. Open connections are not touched.
 */
void listen_stop(struct listen_ctx *l);

/* listen_stop() and free. NULL is a no-op. */
void listen_free(struct listen_ctx *l);

/* Return the number of instance sockets currently listening. */
size_t listen_count(const struct listen_ctx *l);

#endif /* EGRESS_BROKER_LISTEN_H */
