/* SPDX-License-Identifier: ISC */
/*
 * egress-ws-bench: WebSocket echo round trips for scripts/bench-ws.
 *
 *   egress-ws-bench serve -l PORT
 *       an echo server on 127.0.0.1:PORT (RFC 6455 handshake, frames by
 *       libwslay): every message comes back as it was sent. Runs until
 *       killed.
 *   egress-ws-bench -m direct|shim [-s SOCKET] [-c STREAMS] [-t SECONDS]
 *       [-z BYTES] [-l LABEL] PORT
 *       STREAMS WebSockets to ws://127.0.0.1:PORT/ (directly, with
 *       libwslay, or through the egressd instance socket SOCKET, one
 *       libegress client per WebSocket), each with one text message of
 *       BYTES (default 32) in flight: send, wait for its echo, again, for
 *       SECONDS (default 5). Prints one JSON line: streams, messages,
 *       messages/s, p50 and p99 round trip in microseconds, errors, and
 *       the client's own CPU time.
 *
 * One thread, one poll() set. Loopback only.
 */
#include <sys/resource.h>
#include <sys/socket.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <wslay/wslay.h>

#include <egress/egress.h>

#define WB_CONNS_MAX   1024
#define WB_HEAD_MAX    4096
#define WB_MSG_MAX     65536
#define WB_SAMPLES_MAX (1U << 22)
#define WB_GUID	       "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

struct wb_conn {
	int fd;
	wslay_event_context_ptr ctx;
	char head[WB_HEAD_MAX];
	size_t headlen;
	int open; /* the handshake is done */
	int dead;
	/* client side */
	struct egress_client *ec;
	struct egress_request *ws;
	double sent_at;
	int waiting;
	size_t got; /* bytes of the echo so far (shim) */
};

static uint8_t msg[WB_MSG_MAX];
static uint8_t rbuf[WB_MSG_MAX];
static size_t msg_len = 32;
static double *samples;
static size_t nsamples, errors;
static double deadline;

static void
usage(void)
{
	(void)fprintf(stderr,
	    "usage: egress-ws-bench serve -l PORT\n"
	    "       egress-ws-bench -m direct|shim [-s SOCKET] [-c STREAMS] "
	    "[-t SECONDS]\n"
	    "           [-z BYTES] [-l LABEL] PORT\n");
	exit(2);
}

static unsigned long
parse_num(const char *s, unsigned long min, unsigned long max)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno != 0 || *s < '0' || *s > '9' || *end != '\0' || v < min ||
	    v > max)
		usage();
	return v;
}

static double
now_s(void)
{
	struct timespec ts;

	(void)clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- libwslay plumbing, both sides ------------------------------------- */

static ssize_t
wb_recv_cb(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags,
    void *user)
{
	struct wb_conn *c = user;
	ssize_t n = read(c->fd, buf, len);

	(void)flags;
	if (n > 0)
		return n;
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
	else
		wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
	return -1;
}

static ssize_t
wb_send_cb(wslay_event_context_ptr ctx, const uint8_t *data, size_t len,
    int flags, void *user)
{
	struct wb_conn *c = user;
	ssize_t n = write(c->fd, data, len);

	(void)flags;
	if (n >= 0)
		return n;
	if (errno == EAGAIN || errno == EINTR)
		wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
	else
		wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
	return -1;
}

static int
wb_genmask_cb(wslay_event_context_ptr ctx, uint8_t *buf, size_t len,
    void *user)
{
	(void)ctx;
	(void)user;
	memset(buf, 0x5a, len); /* a benchmark: the mask need not be secret */
	return 0;
}

static void
wb_record(struct wb_conn *c)
{
	double t = now_s();

	if (nsamples < WB_SAMPLES_MAX)
		samples[nsamples++] = (t - c->sent_at) * 1e6;
	c->waiting = 0;
}

static void
wb_server_msg_cb(wslay_event_context_ptr ctx,
    const struct wslay_event_on_msg_recv_arg *a, void *user)
{
	struct wslay_event_msg m;

	(void)user;
	if (a->opcode != WSLAY_TEXT_FRAME && a->opcode != WSLAY_BINARY_FRAME)
		return;
	m.opcode = a->opcode;
	m.msg = a->msg;
	m.msg_length = a->msg_length;
	(void)wslay_event_queue_msg(ctx, &m);
}

static void
wb_client_msg_cb(wslay_event_context_ptr ctx,
    const struct wslay_event_on_msg_recv_arg *a, void *user)
{
	struct wb_conn *c = user;

	(void)ctx;
	if (a->opcode == WSLAY_TEXT_FRAME && a->msg_length == msg_len &&
	    c->waiting)
		wb_record(c);
	else if (a->opcode == WSLAY_CONNECTION_CLOSE)
		c->dead = 1;
}

static const struct wslay_event_callbacks server_cbs = {
	.recv_callback = wb_recv_cb,
	.send_callback = wb_send_cb,
	.on_msg_recv_callback = wb_server_msg_cb,
};

static const struct wslay_event_callbacks client_cbs = {
	.recv_callback = wb_recv_cb,
	.send_callback = wb_send_cb,
	.genmask_callback = wb_genmask_cb,
	.on_msg_recv_callback = wb_client_msg_cb,
};

/* Read the head into c->head; 1 once complete, 0 for more, -1 on error. */
static int
read_head(struct wb_conn *c)
{
	ssize_t n;

	while (c->headlen < sizeof(c->head) - 1) {
		n = read(c->fd, c->head + c->headlen, 1); /* never past it */
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return 0;
		if (n <= 0)
			return -1;
		c->head[++c->headlen] = '\0';
		if (c->headlen >= 4 &&
		    memcmp(c->head + c->headlen - 4, "\r\n\r\n", 4) == 0)
			return 1;
	}
	return -1;
}

/* ---- The echo server --------------------------------------------------- */

static int
server_handshake(struct wb_conn *c)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	char cat[128], acc[64], out[256];
	const char *k, *e;
	unsigned int mdlen = 0;
	size_t klen;
	int n;

	for (k = c->head; (k = strchr(k, '\n')) != NULL; k++)
		if (strncasecmp(k + 1, "Sec-WebSocket-Key:", 18) == 0)
			break;
	if (k == NULL)
		return -1;
	k += 19;
	while (*k == ' ')
		k++;
	if ((e = strchr(k, '\r')) == NULL ||
	    (klen = (size_t)(e - k)) + sizeof(WB_GUID) > sizeof(cat))
		return -1;
	memcpy(cat, k, klen);
	memcpy(cat + klen, WB_GUID, sizeof(WB_GUID));
	if (EVP_Digest(cat, strlen(cat), md, &mdlen, EVP_sha1(), NULL) != 1)
		return -1;
	(void)EVP_EncodeBlock((unsigned char *)acc, md, (int)mdlen);
	n = snprintf(out, sizeof(out),
	    "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
	    "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
	    acc);
	if (n < 0 || write(c->fd, out, (size_t)n) != n)
		return -1;
	if (wslay_event_context_server_init(&c->ctx, &server_cbs, c) != 0)
		return -1;
	c->open = 1;
	return 0;
}

static void
conn_close(struct wb_conn *c)
{
	if (c->ctx != NULL)
		wslay_event_context_free(c->ctx);
	c->ctx = NULL;
	if (c->fd >= 0)
		(void)close(c->fd);
	c->fd = -1;
	c->dead = 1;
}

/* Step one server connection after poll() said re. */
static void
serve_step(struct wb_conn *c, short re)
{
	if (!c->open) {
		int h;

		if (!(re & (POLLIN | POLLHUP | POLLERR)))
			return;
		h = read_head(c);
		if (h < 0 || (h == 1 && server_handshake(c) != 0))
			conn_close(c);
		return;
	}
	if ((re & (POLLIN | POLLHUP | POLLERR)) &&
	    wslay_event_recv(c->ctx) != 0)
		conn_close(c);
	else if (wslay_event_want_write(c->ctx) &&
	    wslay_event_send(c->ctx) != 0)
		conn_close(c);
	else if (!wslay_event_want_read(c->ctx) &&
	    !wslay_event_want_write(c->ctx))
		conn_close(c);
}

static int
serve(unsigned port)
{
	/* each connection its own object: libwslay keeps its address */
	static struct wb_conn *cs[WB_CONNS_MAX];
	static struct pollfd p[WB_CONNS_MAX + 1];
	struct sockaddr_in sin;
	int one = 1, lfd;
	size_t i, n = 0;

	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons((uint16_t)port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (lfd < 0 ||
	    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) !=
		0 ||
	    bind(lfd, (struct sockaddr *)&sin, sizeof(sin)) != 0 ||
	    listen(lfd, 1024) != 0) {
		perror("egress-ws-bench: listen");
		return 1;
	}
	(void)printf("listening\n");
	(void)fflush(stdout);
	for (;;) {
		p[0].fd = lfd;
		p[0].events = n < WB_CONNS_MAX ? POLLIN : 0;
		for (i = 0; i < n; i++) {
			p[i + 1].fd = cs[i]->fd;
			p[i + 1].events = POLLIN;
			if (cs[i]->open && wslay_event_want_write(cs[i]->ctx))
				p[i + 1].events |= POLLOUT;
		}
		if (poll(p, n + 1, -1) < 0) {
			if (errno == EINTR)
				continue;
			return 1;
		}
		for (i = n; i-- > 0;) {
			serve_step(cs[i], p[i + 1].revents);
			if (cs[i]->dead) {
				free(cs[i]);
				cs[i] = cs[--n];
			}
		}
		if (p[0].revents & POLLIN) {
			int fd = accept4(lfd, NULL, NULL,
			    SOCK_NONBLOCK | SOCK_CLOEXEC);

			if (fd < 0)
				continue;
			if ((cs[n] = calloc(1, sizeof(*cs[n]))) == NULL) {
				(void)close(fd);
				continue;
			}
			cs[n]->fd = fd;
			(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one,
			    sizeof(one));
			n++;
		}
	}
}

/* ---- The clients ------------------------------------------------------- */

static int
tcp_connect(unsigned port)
{
	struct sockaddr_in sin;
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons((uint16_t)port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0 ||
	    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0 ||
	    fcntl(fd, F_SETFL, O_NONBLOCK) != 0) {
		(void)close(fd);
		return -1;
	}
	return fd;
}

static void
client_fail(struct wb_conn *c)
{
	if (!c->dead)
		errors++;
	conn_close(c);
}

/* direct: send the next message through libwslay */
static void
direct_send(struct wb_conn *c)
{
	struct wslay_event_msg m = { WSLAY_TEXT_FRAME, msg, msg_len };

	if (c->waiting || c->dead || now_s() >= deadline)
		return;
	if (wslay_event_queue_msg(c->ctx, &m) != 0) {
		client_fail(c);
		return;
	}
	c->sent_at = now_s();
	c->waiting = 1;
}

static void
direct_step(struct wb_conn *c, short re)
{
	if (!c->open) {
		int h;

		if (!(re & (POLLIN | POLLHUP | POLLERR)))
			return;
		if ((h = read_head(c)) < 0 ||
		    (h == 1 && strncmp(c->head, "HTTP/1.1 101 ", 13) != 0)) {
			client_fail(c);
			return;
		}
		if (h == 0)
			return;
		if (wslay_event_context_client_init(&c->ctx, &client_cbs, c) !=
		    0) {
			client_fail(c);
			return;
		}
		c->open = 1;
	}
	if ((re & (POLLIN | POLLHUP | POLLERR)) &&
	    wslay_event_recv(c->ctx) != 0) {
		client_fail(c);
		return;
	}
	if (c->dead) {
		client_fail(c);
		return;
	}
	direct_send(c);
	if (wslay_event_want_write(c->ctx) && wslay_event_send(c->ctx) != 0)
		client_fail(c);
}

static int
direct_open(struct wb_conn *c, unsigned port)
{
	char req[256];
	int n;

	if ((c->fd = tcp_connect(port)) < 0)
		return -1;
	n = snprintf(req, sizeof(req),
	    "GET / HTTP/1.1\r\nHost: 127.0.0.1:%u\r\nUpgrade: websocket\r\n"
	    "Connection: Upgrade\r\nSec-WebSocket-Key: "
	    "dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
	    port);
	return n > 0 && write(c->fd, req, (size_t)n) == n ? 0 : -1;
}

/* shim: send the next message, read the echo */
static void
shim_step(struct wb_conn *c)
{
	struct egress_ws_frame f;
	int n;

	if (egress_client_step(c->ec) != 0) {
		client_fail(c);
		return;
	}
	if (!c->open) {
		n = egress_ws_wait(c->ws, EGRESS_NONBLOCK);
		if (n == EGRESS_ERR_AGAIN)
			return;
		if (n != 0) {
			client_fail(c);
			return;
		}
		c->open = 1;
	}
	for (;;) {
		if (!c->waiting) {
			if (now_s() >= deadline)
				return;
			n = egress_ws_write(c->ws, msg, msg_len,
			    EGRESS_WS_MSG_END | EGRESS_NONBLOCK);
			if (n == EGRESS_ERR_AGAIN)
				return;
			if (n != (int)msg_len) {
				client_fail(c);
				return;
			}
			c->sent_at = now_s();
			c->waiting = 1;
			c->got = 0;
			(void)egress_client_step(c->ec); /* send it now */
		}
		n = egress_ws_recv(c->ws, rbuf, sizeof(rbuf), &f,
		    EGRESS_NONBLOCK);
		if (n == EGRESS_ERR_AGAIN)
			return;
		if (n < 0 || f.kind == EGRESS_WS_CLOSE) {
			client_fail(c);
			return;
		}
		if (f.kind != EGRESS_WS_TEXT)
			continue;
		c->got += f.len;
		if (f.last && c->got == msg_len)
			wb_record(c);
	}
}

static int
shim_open(struct wb_conn *c, const char *sock, unsigned port)
{
	char url[64];
	int rv;

	(void)snprintf(url, sizeof(url), "ws://127.0.0.1:%u/", port);
	rv = egress_client_connect(sock, &c->ec);
	if (rv == 0)
		rv = egress_ws_open_profile(c->ec, url, NULL, NULL, 0, NULL,
		    NULL, NULL, &c->ws);
	if (rv != 0) {
		(void)fprintf(stderr, "egress-ws-bench: %s\n",
		    egress_strerror(rv));
		return -1;
	}
	c->fd = egress_client_fd(c->ec);
	return 0;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int
main(int argc, char *argv[])
{
	static struct wb_conn *cs[WB_CONNS_MAX];
	static struct pollfd p[WB_CONNS_MAX];
	const char *sock = NULL, *label = "";
	unsigned port;
	size_t i, n = 1, open;
	double t0, t1, secs = 5, p50 = 0, p99 = 0;
	struct rusage ru;
	int ch, shim = 0;

	(void)signal(SIGPIPE, SIG_IGN);
	if (argc > 1 && strcmp(argv[1], "serve") == 0) {
		unsigned lport = 0;

		optind = 2;
		while ((ch = getopt(argc, argv, "l:")) != -1) {
			if (ch != 'l')
				usage();
			lport = (unsigned)parse_num(optarg, 1, 65535);
		}
		if (lport == 0 || optind != argc)
			usage();
		return serve(lport);
	}
	while ((ch = getopt(argc, argv, "m:s:c:t:z:l:")) != -1) {
		switch (ch) {
		case 'm':
			if (strcmp(optarg, "direct") == 0)
				shim = 0;
			else if (strcmp(optarg, "shim") == 0)
				shim = 1;
			else
				usage();
			break;
		case 's':
			sock = optarg;
			break;
		case 'c':
			n = parse_num(optarg, 1, WB_CONNS_MAX);
			break;
		case 't':
			secs = (double)parse_num(optarg, 1, 3600);
			break;
		case 'z':
			msg_len = parse_num(optarg, 1, WB_MSG_MAX);
			break;
		case 'l':
			label = optarg;
			break;
		default:
			usage();
		}
	}
	if (optind != argc - 1 || (shim && sock == NULL) ||
	    strchr(label, '"') != NULL || strchr(label, '\\') != NULL)
		usage();
	port = (unsigned)parse_num(argv[optind], 1, 65535);
	memset(msg, 'm', sizeof(msg));
	if ((samples = calloc(WB_SAMPLES_MAX, sizeof(*samples))) == NULL)
		return 1;

	t0 = now_s();
	deadline = t0 + secs;
	for (i = 0; i < n; i++) {
		if ((cs[i] = calloc(1, sizeof(*cs[i]))) == NULL)
			return 1;
		cs[i]->fd = -1;
		if ((shim ? shim_open(cs[i], sock, port) :
			    direct_open(cs[i], port)) != 0)
			client_fail(cs[i]);
	}
	for (;;) {
		int timeout = 50;

		open = 0;
		for (i = 0; i < n; i++) {
			struct wb_conn *c = cs[i];

			p[i].fd = c->dead ? -1 : c->fd;
			p[i].events = POLLIN;
			if (!c->dead && shim &&
			    egress_client_want_write(c->ec))
				p[i].events |= POLLOUT;
			if (!c->dead && !shim && c->open &&
			    wslay_event_want_write(c->ctx))
				p[i].events |= POLLOUT;
			open += !c->dead && (c->waiting || now_s() < deadline);
		}
		if (open == 0)
			break;
		if (poll(p, n, timeout) < 0 && errno != EINTR)
			return 1;
		for (i = 0; i < n; i++) {
			if (cs[i]->dead)
				continue;
			if (shim)
				shim_step(cs[i]);
			else
				direct_step(cs[i], p[i].revents);
		}
	}
	t1 = now_s();
	(void)getrusage(RUSAGE_SELF, &ru);
	if (nsamples > 0) {
		qsort(samples, nsamples, sizeof(*samples), cmp_double);
		p50 = samples[nsamples / 2];
		p99 = samples[(nsamples * 99) / 100];
	}
	(void)printf("{\"label\":\"%s\",\"mode\":\"%s\",\"streams\":%zu,"
		     "\"messages\":%zu,\"seconds\":%.6f,\"msgs_per_s\":%.0f,"
		     "\"p50_us\":%.0f,\"p99_us\":%.0f,\"errors\":%zu,"
		     "\"client_cpu_s\":%.3f}\n",
	    label, shim ? "shim" : "direct", n, nsamples, t1 - t0,
	    t1 > t0 ? (double)nsamples / (t1 - t0) : 0.0, p50, p99, errors,
	    (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
		(double)ru.ru_stime.tv_sec +
		(double)ru.ru_stime.tv_usec / 1e6);
	for (i = 0; i < n; i++) {
		egress_request_free(cs[i]->ws);
		egress_client_free(cs[i]->ec);
		conn_close(cs[i]);
		free(cs[i]);
	}
	free(samples);
	return errors != 0;
}
