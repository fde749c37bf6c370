/* SPDX-License-Identifier: ISC */
/*
 * The scrape endpoint: one listening socket (loopback TCP or a Unix
 * path), accepted by hand so the connections can be counted and capped,
 * each connection a bufferevent that reads one bounded request head,
 * gets one response and is closed. See metrics_http.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include <egress/error.h>

#include "broker/metrics_http.h"

#define METRICS_HTTP_BACKLOG 16
#define METRICS_HTTP_CTYPE   "text/plain; version=0.0.4; charset=utf-8"

struct mconn {
	struct mconn *next, *prev;
	struct metrics_http *h;
	struct bufferevent *bev;
	struct event *deadline; /* the head's, then the response's */
};

struct metrics_http {
	struct event_base *base;
	metrics_http_render_fn render;
	void *arg;
	char *listen;
	char *path; /* Unix socket path, or NULL */
	int fd;
	struct event *ev;
	int paused; /* at the cap: ev not added */
	unsigned deadline_ms;
	struct mconn *conns;
	size_t nconns;
};

/* ---- Addresses ---------------------------------------------------------- */

static int
parse_port(const char *s, in_port_t *ret)
{
	unsigned long n = 0;
	size_t i;

	if (s[0] == '\0' || strlen(s) > 5)
		return -1;
	for (i = 0; s[i] != '\0'; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		n = n * 10 + (unsigned long)(s[i] - '0');
	}
	if (n == 0 || n > 65535)
		return -1;
	*ret = htons((in_port_t)n);
	return 0;
}

/* A loopback ADDR:PORT or [::1]:PORT, or an absolute path (AF_UNIX). */
static int
parse_listen(const char *s, struct sockaddr_storage *ss, socklen_t *len)
{
	struct sockaddr_in *in4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
	struct sockaddr_un *un = (struct sockaddr_un *)ss;
	char addr[INET_ADDRSTRLEN];
	const char *colon;

	memset(ss, 0, sizeof(*ss));
	if (s[0] == '/') {
		if (strlen(s) >= sizeof(un->sun_path))
			return -1;
		un->sun_family = AF_UNIX;
		memcpy(un->sun_path, s, strlen(s) + 1);
		*len = sizeof(*un);
		return 0;
	}
	if (strncmp(s, "[::1]:", 6) == 0) {
		in6->sin6_family = AF_INET6;
		in6->sin6_addr = in6addr_loopback;
		*len = sizeof(*in6);
		return parse_port(s + 6, &in6->sin6_port);
	}
	if ((colon = strchr(s, ':')) == NULL ||
	    (size_t)(colon - s) >= sizeof(addr))
		return -1;
	memcpy(addr, s, (size_t)(colon - s));
	addr[colon - s] = '\0';
	in4->sin_family = AF_INET;
	if (inet_pton(AF_INET, addr, &in4->sin_addr) != 1 ||
	    (ntohl(in4->sin_addr.s_addr) >> 24) != 127)
		return -1;
	*len = sizeof(*in4);
	return parse_port(colon + 1, &in4->sin_port);
}

/* Replace a socket left at path; refuse anything else there. */
static int
clear_path(const char *path)
{
	struct stat st;

	if (lstat(path, &st) != 0)
		return errno == ENOENT ? 0 : EGRESS_ERR_IO;
	if (!S_ISSOCK(st.st_mode))
		return EGRESS_ERR_EXISTS;
	return unlink(path) == 0 ? 0 : EGRESS_ERR_IO;
}

static int
bind_listen(const struct sockaddr_storage *ss, socklen_t len, int *ret_fd)
{
	int fd, one = 1, err = EGRESS_ERR_IO, e;

	fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
	    0);
	if (fd < 0)
		return EGRESS_ERR_IO;
	if (ss->ss_family == AF_INET6)
		(void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one,
		    sizeof(one));
	if (ss->ss_family != AF_UNIX)
		(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one,
		    sizeof(one));
	if (ss->ss_family == AF_UNIX &&
	    (err = clear_path(((const struct sockaddr_un *)ss)->sun_path)) !=
		0)
		goto fail;
	err = EGRESS_ERR_IO;
	if (bind(fd, (const struct sockaddr *)ss, len) != 0)
		goto fail;
	if (ss->ss_family == AF_UNIX &&
	    chmod(((const struct sockaddr_un *)ss)->sun_path, 0666) != 0)
		goto fail;
	if (listen(fd, METRICS_HTTP_BACKLOG) != 0)
		goto fail;
	*ret_fd = fd;
	return 0;
fail:
	e = errno;
	(void)close(fd);
	errno = e;
	return err;
}

/* ---- Connections ---------------------------------------------------------- */

static void accept_cb(evutil_socket_t fd, short what, void *arg);

static void
mconn_free(struct mconn *c)
{
	struct metrics_http *h = c->h;

	if (c->prev != NULL)
		c->prev->next = c->next;
	else
		h->conns = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
	h->nconns--;
	if (c->deadline != NULL)
		event_free(c->deadline);
	bufferevent_free(c->bev); /* closes the socket */
	free(c);
	if (h->paused && h->nconns < METRICS_HTTP_CONNS_MAX &&
	    event_add(h->ev, NULL) == 0)
		h->paused = 0;
}

static void
written_cb(struct bufferevent *bev, void *arg)
{
	mconn_free(arg);
}

static void
event_cb(struct bufferevent *bev, short what, void *arg)
{
	mconn_free(arg);
}

static void
deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	mconn_free(arg);
}

/* Arm c's deadline, h->deadline_ms from now. */
static int
deadline_arm(struct mconn *c)
{
	struct timeval tv = { (time_t)(c->h->deadline_ms / 1000),
		(suseconds_t)(c->h->deadline_ms % 1000) * 1000 };

	return evtimer_add(c->deadline, &tv);
}

/* Queue one response and close once it is sent. */
static void
respond(struct mconn *c, const char *status, const char *extra,
    const char *ctype, const char *body, size_t len, int head_only)
{
	struct evbuffer *out = bufferevent_get_output(c->bev);

	(void)bufferevent_disable(c->bev, EV_READ);
	bufferevent_setcb(c->bev, NULL, written_cb, event_cb, c);
	if (deadline_arm(c) != 0 ||
	    evbuffer_add_printf(out,
		"HTTP/1.1 %s\r\nContent-Type: %s\r\n"
		"Content-Length: %zu\r\n%sConnection: close\r\n\r\n",
		status, ctype, len, extra) < 0 ||
	    (!head_only && evbuffer_add(out, body, len) != 0) ||
	    bufferevent_enable(c->bev, EV_WRITE) != 0)
		mconn_free(c);
}

static void
respond_text(struct mconn *c, const char *status, const char *extra,
    const char *body)
{
	respond(c, status, extra, "text/plain; charset=utf-8", body,
	    strlen(body), 0);
}

/*
 * Is the Host of head (its lines after the request line, NUL-terminated)
 * loopback, or is there none? More than one is not, nor is any field
 * with whitespace before its colon (or a folded line).
 */
static int
host_ok(const char *head)
{
	const char *l = strchr(head, '\n'), *v, *e;
	char host[64];
	struct in_addr a;
	size_t n;
	int seen = 0;

	for (; l != NULL; l = strchr(l, '\n')) {
		l++;
		/* Whitespace before a field's colon hides its name from
		 * this look; RFC 9112 refuses it anyway. */
		if (l[strcspn(l, ":\r\n \t")] == ' ' ||
		    l[strcspn(l, ":\r\n \t")] == '\t')
			return 0;
		if (strncasecmp(l, "host:", 5) != 0)
			continue;
		if (seen++)
			return 0;
		for (v = l + 5; *v == ' ' || *v == '\t'; v++)
			;
		e = v + strcspn(v, "\r\n");
		while (e > v && (e[-1] == ' ' || e[-1] == '\t'))
			e--;
		if ((n = (size_t)(e - v)) == 0 || n >= sizeof(host))
			return 0;
		memcpy(host, v, n);
		host[n] = '\0';
		if (strncmp(host, "[::1]", 5) == 0 &&
		    (host[5] == '\0' || host[5] == ':'))
			continue;
		host[strcspn(host, ":")] = '\0';
		if (strcasecmp(host, "localhost") != 0 &&
		    (inet_pton(AF_INET, host, &a) != 1 ||
			(ntohl(a.s_addr) >> 24) != 127))
			return 0;
	}
	return 1;
}

/* Answer the request line: METHOD SP TARGET SP HTTP/1.x. */
static void
serve_line(struct mconn *c, char *line)
{
	char *target, *version, *q;
	size_t i;
	int get, head;
	char *text = NULL;
	size_t len = 0;

	if ((target = strchr(line, ' ')) == NULL)
		goto bad;
	*target++ = '\0';
	if ((version = strchr(target, ' ')) == NULL)
		goto bad;
	*version++ = '\0';
	if (line[0] == '\0' || strlen(line) > 16 || target[0] != '/' ||
	    (strcmp(version, "HTTP/1.1") != 0 &&
		strcmp(version, "HTTP/1.0") != 0))
		goto bad;
	for (i = 0; line[i] != '\0'; i++)
		if (line[i] < 'A' || line[i] > 'Z')
			goto bad;
	if ((q = strchr(target, '?')) != NULL)
		*q = '\0';
	if (strcmp(target, "/metrics") != 0) {
		respond_text(c, "404 Not Found", "",
		    "not found; try "
		    "/metrics\n");
		return;
	}
	get = strcmp(line, "GET") == 0;
	head = strcmp(line, "HEAD") == 0;
	if (!get && !head) {
		respond_text(c, "405 Method Not Allowed",
		    "Allow: GET, HEAD\r\n", "method not allowed\n");
		return;
	}
	if (c->h->render(c->h->arg, &text, &len) != 0) {
		respond_text(c, "500 Internal Server Error", "",
		    "cannot render the metrics\n");
		return;
	}
	respond(c, "200 OK", "", METRICS_HTTP_CTYPE, text, len, head);
	free(text);
	return;
bad:
	respond_text(c, "400 Bad Request", "", "bad request\n");
}

/* Wait for the whole head (bounded), then answer its first line. */
static void
read_cb(struct bufferevent *bev, void *arg)
{
	struct mconn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	char line[METRICS_HTTP_HEAD_MAX + 1];
	struct evbuffer_ptr p;
	size_t n = evbuffer_get_length(in);

	p = evbuffer_search(in, "\r\n\r\n", 4, NULL);
	if (p.pos < 0)
		p = evbuffer_search(in, "\n\n", 2, NULL);
	if (p.pos < 0) {
		if (n > METRICS_HTTP_HEAD_MAX)
			respond_text(c, "431 Request Header Fields Too Large",
			    "", "request head too large\n");
		return;
	}
	if ((size_t)p.pos > METRICS_HTTP_HEAD_MAX) {
		respond_text(c, "431 Request Header Fields Too Large", "",
		    "request head too large\n");
		return;
	}
	n = (size_t)p.pos;
	if (evbuffer_copyout(in, line, n) != (ev_ssize_t)n)
		n = 0;
	line[n] = '\0';
	if (memchr(line, '\0', n) != NULL) {
		respond_text(c, "400 Bad Request", "", "bad request\n");
		return;
	}
	if (c->h->path == NULL && !host_ok(line)) {
		respond_text(c, "421 Misdirected Request", "",
		    "the Host is not loopback\n");
		return;
	}
	line[strcspn(line, "\r\n")] = '\0';
	serve_line(c, line);
}

static void
mconn_new(struct metrics_http *h, int fd)
{
	struct timeval tv = { METRICS_HTTP_TIMEOUT_S, 0 };
	struct mconn *c;

	if ((c = calloc(1, sizeof(*c))) == NULL) {
		(void)close(fd);
		return;
	}
	c->h = h;
	c->bev = bufferevent_socket_new(h->base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (c->bev == NULL) {
		(void)close(fd);
		free(c);
		return;
	}
	c->next = h->conns;
	if (h->conns != NULL)
		h->conns->prev = c;
	h->conns = c;
	h->nconns++;
	bufferevent_setcb(c->bev, read_cb, NULL, event_cb, c);
	bufferevent_setwatermark(c->bev, EV_READ, 0,
	    METRICS_HTTP_HEAD_MAX + 1);
	(void)bufferevent_set_timeouts(c->bev, &tv, &tv);
	if ((c->deadline = evtimer_new(h->base, deadline_cb, c)) == NULL ||
	    deadline_arm(c) != 0 || bufferevent_enable(c->bev, EV_READ) != 0)
		mconn_free(c);
}

static void
accept_cb(evutil_socket_t lfd, short what, void *arg)
{
	struct metrics_http *h = arg;
	int fd;

	while (h->nconns < METRICS_HTTP_CONNS_MAX) {
		fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0)
			return; /* EAGAIN, or an error the next try sees */
		mconn_new(h, fd);
	}
	/* At the cap: leave the rest in the backlog until one closes. */
	if (event_del(h->ev) == 0)
		h->paused = 1;
}

/* ---- Endpoint --------------------------------------------------------------- */

int
metrics_http_new(struct event_base *base, const char *listen,
    metrics_http_render_fn render, void *arg, struct metrics_http **ret)
{
	struct sockaddr_storage ss;
	struct metrics_http *h;
	socklen_t len = 0;
	int err;

	if (listen == NULL || parse_listen(listen, &ss, &len) != 0)
		return EGRESS_ERR_INVALID;
	if ((h = calloc(1, sizeof(*h))) == NULL)
		return EGRESS_ERR_NOMEM;
	h->fd = -1;
	h->deadline_ms = METRICS_HTTP_TIMEOUT_S * 1000;
	h->base = base;
	h->render = render;
	h->arg = arg;
	if ((h->listen = strdup(listen)) == NULL ||
	    (listen[0] == '/' && (h->path = strdup(listen)) == NULL)) {
		metrics_http_free(h);
		return EGRESS_ERR_NOMEM;
	}
	if ((err = bind_listen(&ss, len, &h->fd)) != 0) {
		free(h->path); /* not ours to unlink */
		h->path = NULL;
		metrics_http_free(h);
		return err;
	}
	h->ev = event_new(base, h->fd, EV_READ | EV_PERSIST, accept_cb, h);
	if (h->ev == NULL || event_add(h->ev, NULL) != 0) {
		metrics_http_free(h);
		return EGRESS_ERR_NOMEM;
	}
	*ret = h;
	return 0;
}

void
metrics_http_set_deadline_ms(struct metrics_http *h, unsigned ms)
{
	h->deadline_ms = ms;
}

const char *
metrics_http_listen(const struct metrics_http *h)
{
	return h->listen;
}

void
metrics_http_free(struct metrics_http *h)
{
	if (h == NULL)
		return;
	while (h->conns != NULL)
		// NOLINTNEXTLINE(clang-analyzer-unix.Malloc): it unlinks the head
		mconn_free(h->conns);
	if (h->ev != NULL)
		event_free(h->ev);
	if (h->fd >= 0)
		(void)close(h->fd);
	if (h->path != NULL)
		(void)unlink(h->path);
	free(h->path);
#ifndef __clang__ /* gcc 12 -fanalyzer: a false double free */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wanalyzer-double-free"
#endif
	free(h->listen);
#ifndef __clang__
#pragma GCC diagnostic pop
#endif
	free(h);
}
