/* SPDX-License-Identifier: ISC */
/*
 * proxy_port: the loopback TCP ports of the proxy front. An entry with
 * proxy_listen = 127.0.0.1:PORT (or [::1]:PORT) gets a listening socket
 * there; each connection accepted on it is served by proxy_accept() for
 * that entry's instance (never one the client names), with every request
 * required to carry Proxy-Authorization: Basic with the entry's token
 * (proxy_token_file; checked per request against the snapshot in force,
 * so a new token applies at the next request) and origin-form refused.
 * proxy_ports_apply() follows each snapshot: ports of new entries are
 * bound, ports whose entry is gone or no longer has the key are closed,
 * a changed address is bound anew and the old one closed. Each change
 * is logged as an egress.listen event naming the instance and address.
 */
#ifndef EGRESS_BROKER_PROXY_PORT_H
#define EGRESS_BROKER_PROXY_PORT_H

#include "conf/conf.h"

struct broker;

/*
 * Make b's proxy ports those of snapshot s. A port that cannot be bound
 * is logged and left closed (its instance is then reachable only on its
 * Unix socket). Return 0, or the first bind error (every other port is
 * still applied).
 */
int proxy_ports_apply(struct broker *b, const struct conf_snapshot *s);

/*
 * A connection of instance's port stopped being unauthenticated (it was
 * authorized or closed): resume accepting on that port if it was paused.
 * A port stops accepting while PROXY_PREAUTH_MAX of its connections are
 * not yet authenticated, so that a burst of connections waits in the
 * listen backlog instead of being closed.
 */
void proxy_ports_resume(struct broker *b, const char *instance);

/* Close every proxy port (connections already accepted stay). */
void proxy_ports_free(struct broker *b);

#endif /* EGRESS_BROKER_PROXY_PORT_H */
