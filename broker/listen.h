/* SPDX-License-Identifier: ISC */
/*
 * listen: egressd's Unix sockets. One listening socket per configured
 * instance, <[broker] instance_socket_dir>/<instance>.sock, mode 0660 and
 * chowned to the entry's socket_owner / socket_group (names or numeric
 * ids) when set; a connection accepted there is bound to that instance
 * for its whole life (the instance comes from the socket, never from
 * anything the client sends). listen_reconcile() creates the sockets of
 * new instances and removes those of removed ones after each reload. The
 * control socket ([broker] control_socket) hands each accepted connection
 * to the control callback (broker/control.c checks the peer with
 * SO_PEERCRED and serves it); its mode lets exactly the configured peers
 * reach it: 0600 (root only, the default), 0660 with the group
 * control_gids[0] when control_gids is set, 0666 when control_uids names a
 * uid other than 0 (then SO_PEERCRED alone decides). Every fd is CLOEXEC;
 * connections are capped by the callbacks' owners.
 */
#ifndef EGRESS_BROKER_LISTEN_H
#define EGRESS_BROKER_LISTEN_H

#include <sys/types.h>

#include "conf/conf.h"

struct event_base;
struct listen_ctx;

#define LISTEN_BACKLOG 128

/*
 * Called for each connection accepted on an instance socket. Takes
 * ownership of fd (connected, non-blocking, CLOEXEC). instance is
 * borrowed for the call: copy it.
 */
typedef void (*listen_accept_cb)(void *arg, int fd, const char *instance);

/*
 * Called for each connection accepted on the control socket. Takes
 * ownership of fd (connected, non-blocking, CLOEXEC).
 */
typedef void (*listen_control_cb)(void *arg, int fd);

/*
 * Called from listen_reconcile() when the owner or group of an existing
 * instance socket changed (or could no longer be applied, leaving it at
 * 0600): the connections accepted on it under the old permissions should
 * be closed. instance is borrowed for the call. Called inside
 * listen_reconcile(): the callee must not free sessions that may be on
 * the call stack (defer the closing).
 */
typedef void (*listen_revoke_cb)(void *arg, const char *instance);

/*
 * Create an empty set of listeners on base (borrowed); cb and ccb (NULL:
 * control connections are closed at once) are called with arg. Return 0
 * and write *ret, or EGRESS_ERR_NOMEM.
 */
int listen_new(struct event_base *base, listen_accept_cb cb,
    listen_control_cb ccb, void *arg, struct listen_ctx **ret);

/*
 * Set the callback (NULL: none) that listen_reconcile() calls, with the
 * arg of listen_new(), when an instance socket's owner or group changes.
 */
void listen_set_revoke_cb(struct listen_ctx *l, listen_revoke_cb rcb);

/*
 * Make the instance sockets match snapshot s. Open s's instance socket
 * folder one component at a time from "/" (a relative one from the
 * working folder) without following any symlink, creating the last one
 * if missing (mode 0755, one level). Refuse it unless every component is
 * a folder owned by root or the broker's euid and not group- or
 * world-writable (a non-final folder with the sticky bit may be): log
 * the path and the component at fault, close the listeners in that
 * folder without unlinking their files, and return s->ninstances.
 * Otherwise create a socket for every instance that has none, apply
 * socket_owner/socket_group (unset: the broker's own euid/egid, so
 * removing the line revokes the old owner's or group's access) and mode
 * 0660 to every instance socket (0600 and the broker's own owner and
 * group when they cannot be applied; closed when not even that can), call
 * the revoke callback for each existing socket whose owner or group
 * changed, and close and unlink the sockets of instances no longer in s.
 * A stale socket file at a path is replaced; any other kind of file
 * there is left alone and that instance gets no socket. Problems are
 * logged (egress.listen events) and counted. Return the number of
 * instances without a working socket (0 when all are fine).
 */
int listen_reconcile(struct listen_ctx *l, const struct conf_snapshot *s);

/*
 * Write the control socket's mode and group (-1: unchanged) for snapshot
 * s: 0666 when control_uids names a uid other than 0, else 0660 and
 * control_gids[0] when control_gids is set, else 0600.
 */
void listen_control_mode(const struct conf_snapshot *s, mode_t *ret_mode,
    gid_t *ret_gid);

/*
 * Create the control socket at s->control_socket unless it already
 * listens there (bound under umask 0177; a stale socket file there is
 * replaced; a socket at an old path is closed and unlinked), then apply
 * listen_control_mode(s). A group that cannot be set (the broker lacks
 * CAP_CHOWN and is not a member of it) is logged and leaves the socket
 * at 0600. Return 0, or EGRESS_ERR_IO / EGRESS_ERR_EXISTS (a file that is
 * not a socket is in the way) / EGRESS_ERR_TOO_BIG (path too long for
 * sun_path).
 */
int listen_control_open(struct listen_ctx *l, const struct conf_snapshot *s);

/*
 * After a socket could not be created: the system call that failed
 * ("bind", "listen", ...; borrowed, static) and its errno.
 */
void listen_last_error(const struct listen_ctx *l, const char **ret_call,
    int *ret_errno);

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
