/* SPDX-License-Identifier: ISC */
/*
 * alisten: attached listeners. A launcher (egress-sandbox --net) opens
 * listening TCP sockets on loopback inside a network namespace of its
 * own and hands them to the broker over the control socket
 * (`attach-listener INSTANCE`, the descriptors by SCM_RIGHTS). Each
 * connection accepted on one of them is handed to the same accept
 * callback as a connection on the instance's Unix socket, bound to that
 * instance (never to anything the client sends), and so counted against
 * the same session caps and shares. The listeners of one attach form a
 * group that lives until alisten_detach() (the launcher's control
 * connection closed) or alisten_reconcile() (the instance left the
 * configuration); either closes them and logs one egress.listen event
 * naming the instance. Caps: ALISTEN_PER_ATTACH descriptors per attach,
 * ALISTEN_PER_INSTANCE listeners per instance, ALISTEN_MAX in all.
 */
#ifndef EGRESS_BROKER_ALISTEN_H
#define EGRESS_BROKER_ALISTEN_H

#include <stddef.h>
#include <stdint.h>

#include "conf/conf.h"

struct event_base;
struct alisten;

#define ALISTEN_PER_ATTACH   4	 /* descriptors in one attach-listener */
#define ALISTEN_PER_INSTANCE 32	 /* listeners of one instance */
#define ALISTEN_MAX	     512 /* listeners in all */

/*
 * Called for each connection accepted on an attached listener. Takes
 * ownership of fd (connected, non-blocking, CLOEXEC). instance is
 * borrowed for the call: copy it.
 */
typedef void (*alisten_accept_cb)(void *arg, int fd, const char *instance);

/*
 * Create an empty set on base (borrowed); cb is called with arg. Return 0
 * and write *ret, or EGRESS_ERR_NOMEM.
 */
int alisten_new(struct event_base *base, alisten_accept_cb cb, void *arg,
    struct alisten **ret);

/*
 * Serve the listening sockets fds[0..nfds) for instance. Takes ownership
 * of every fd, whatever the outcome. Each must be a listening TCP socket
 * (SOCK_STREAM, IPPROTO_TCP) bound to a loopback address (127.0.0.0/8 or
 * ::1) of another network namespace than the broker's (its own
 * loopback is open to every local user, and such a listener asks no
 * token; told apart by SO_NETNS_COOKIE, so refused where the kernel
 * cannot tell); nfds is 1..ALISTEN_PER_ATTACH. Log one egress.listen event
 * ("attached") and write the group's id (never 0) to *ret_id. Return 0,
 * EGRESS_ERR_INVALID (a descriptor that is not such a socket, or a bad
 * count), EGRESS_ERR_TOO_BIG (over ALISTEN_PER_INSTANCE or ALISTEN_MAX)
 * or EGRESS_ERR_NOMEM; on error *reterr_msg (static) says why.
 */
int alisten_attach(struct alisten *a, const char *instance, int *fds,
    size_t nfds, uint64_t *ret_id, const char **reterr_msg);

/*
 * Close the listeners of group id and log one egress.listen event
 * ("closed") naming the instance, with why (borrowed). Connections
 * already accepted are not touched. An unknown id (already closed) is a
 * no-op.
 */
void alisten_detach(struct alisten *a, uint64_t id, const char *why);

/*
 * Close (as alisten_detach) every group whose instance snapshot s no
 * longer names.
 */
void alisten_reconcile(struct alisten *a, const struct conf_snapshot *s);

/* Return the number of listeners of instance (NULL: in all). */
size_t alisten_count(const struct alisten *a, const char *instance);

/* Close every group without logging and free a. NULL is a no-op. */
void alisten_free(struct alisten *a);

#endif /* EGRESS_BROKER_ALISTEN_H */
