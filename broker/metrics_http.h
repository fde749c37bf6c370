/* SPDX-License-Identifier: ISC */
/*
 * metrics_http: the optional scrape endpoint of [metrics] listen, so that
 * Prometheus reads the metrics without access to the control socket. A
 * tiny HTTP/1.x server on a libevent base: GET and HEAD of /metrics are
 * answered 200 with the exposition (Content-Type text/plain;
 * version=0.0.4), any other path 404, any other method 405, a malformed
 * or over-long request head 400 (431 past METRICS_HTTP_HEAD_MAX bytes),
 * and on a TCP port a Host that is not loopback (localhost, 127.0.0.0/8,
 * [::1], with any port; none is taken) 421, so that a web page whose name
 * was rebound to 127.0.0.1 cannot read it from a browser on the host;
 * every response closes its connection. Only a loopback address or a
 * Unix socket path is ever bound (the configuration refuses the rest and
 * this module checks again). At most METRICS_HTTP_CONNS_MAX connections
 * are open at once: at the cap the listening socket is not read until
 * one closes (the kernel backlog holds the rest); a connection that does
 * not finish its request head within METRICS_HTTP_TIMEOUT_S seconds of
 * its accept, however often bytes arrive, is closed, and so is one that
 * has not read its whole response within as long again. Every
 * descriptor is CLOEXEC. Logs nothing: errors are returned.
 *
 * libevent's evhttp has no connection limit in 2.1 (nor a hook at
 * connection close), hence this server of its own on bufferevents.
 */
#ifndef EGRESS_BROKER_METRICS_HTTP_H
#define EGRESS_BROKER_METRICS_HTTP_H

#include <stddef.h>

struct event_base;
struct metrics_http;

#define METRICS_HTTP_CONNS_MAX 8
#define METRICS_HTTP_HEAD_MAX  4096 /* bytes of a request head */
#define METRICS_HTTP_TIMEOUT_S 10

/*
 * Produce the exposition: write a malloc'd text (the endpoint frees it)
 * to *ret_text and its length to *ret_len. Return 0 or a negative error
 * (the request is then answered 500).
 */
typedef int (*metrics_http_render_fn)(void *arg, char **ret_text,
    size_t *ret_len);

/*
 * Bind listen (a [metrics] listen value: 127.0.0.0/8 as ADDR:PORT,
 * [::1]:PORT, or an absolute Unix socket path, which is replaced if a
 * socket is already there and made mode 0666, as reachable as loopback)
 * and serve it on base, rendering each response with render(arg). Write
 * the new endpoint to *ret. Return 0, EGRESS_ERR_INVALID (not loopback,
 * not a path, or malformed), EGRESS_ERR_IO (bind or listen failed, errno
 * kept) or EGRESS_ERR_NOMEM.
 */
int metrics_http_new(struct event_base *base, const char *listen,
    metrics_http_render_fn render, void *arg, struct metrics_http **ret);

/* Set h's deadlines (for tests; default METRICS_HTTP_TIMEOUT_S s). */
void metrics_http_set_deadline_ms(struct metrics_http *h, unsigned ms);

/* The listen value the endpoint was created with (borrowed). */
const char *metrics_http_listen(const struct metrics_http *h);

/*
 * Close the listening socket (and unlink its path) and every connection,
 * and free h. NULL is a no-op.
 */
void metrics_http_free(struct metrics_http *h);

#endif /* EGRESS_BROKER_METRICS_HTTP_H */
