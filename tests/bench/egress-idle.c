/* SPDX-License-Identifier: ISC */
/*
 * egress-idle: hold many idle shim connections open for scripts/bench-idle.
 * It opens N libegress clients spread round robin over M instance sockets
 * (connection i goes to socket i mod M), waits until the broker has
 * answered every HELLO (it peeks at the first frame on each connection,
 * without consuming it, and libegress then reads it) and, with -u, until
 * each connection has also carried one complete 2xx request (at most -c
 * of them in flight at once, so the upstream is not flooded), so that
 * every connection is a real session the broker has served and that now
 * sits idle. It prints one JSON line when all are established, then
 * holds them, stepping any that become readable, until SIGTERM, SIGINT,
 * the -t hold time or the loss of the last one, closes them all and
 * prints a second JSON line (connections lost while held). One thread,
 * one epoll set; non-blocking connects, so a full listen backlog is
 * retried instead of blocking. The file-descriptor limit
 * is raised (two per client: the socket and libegress's eventfd). Only
 * loopback destinations are accepted for -u, and it talks to nothing but
 * the Unix sockets it is given. With -w instead of -u, the probe is a
 * WebSocket opened on each connection (ws://, loopback only; -s of them
 * per connection, default 1) that stays open while held: a message, a
 * close or an error on one (a ping is fine) counts that connection as
 * lost.
 */
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <egress/egress.h>

#include "proto/proto.h"

#define IDLE_CONN_MAX	 100000
#define IDLE_SOCKETS_MAX 4096
#define IDLE_HOLD_MAX	 86400
#define IDLE_FDS_SPARE	 64 /* stdio, epoll, slack */
#define IDLE_EVENTS	 256
#define IDLE_BATCH	 64 /* connects between two event checks */
#define IDLE_ERRMSG_MAX	 5
#define IDLE_AUTH_MAX	 256
#define IDLE_PATH_MAX	 1024
#define IDLE_PROBES	 32 /* default probes in flight */
#define IDLE_URL_MAX	 (IDLE_AUTH_MAX + IDLE_PATH_MAX + 8)
#define IDLE_WS_PER_MAX	 64 /* -s: bits of a uint64_t */

enum ic_state {
	IC_NEW,	   /* not connected yet */
	IC_HELLO,  /* HELLO sent, the broker's not seen yet */
	IC_QUEUED, /* HELLO answered, waiting for a probe slot */
	IC_PROBE,  /* the probe request is in flight */
	IC_IDLE,   /* established and idle */
	IC_DEAD,   /* refused, failed or lost */
};

struct idle;

struct ic {
	struct idle *id;
	struct egress_client *ec;
	struct egress_request *req;
	int fd;
	int wantw; /* EPOLLOUT registered */
	enum ic_state st;
	int status;
	int probe_end; /* 1: the probe ended; its error or 0 */
	int probe_err;
	struct egress_request **ws; /* -w: its WebSockets */
	uint64_t ws_answered;	    /* -w: bit i: ws[i] got its answer */
	uint64_t ws_open;	    /* -w: bit i: ws[i] is open */
	int ws_gone; /* -w: one received something, closed or failed */
};

struct idle {
	struct ic *c;
	size_t n;
	char **socks;
	size_t nsocks;
	int ep;
	int probe;
	int ws;	       /* -w: the probe is WebSockets kept open */
	size_t ws_per; /* -s: WebSockets per connection */
	char url[IDLE_URL_MAX];
	size_t probe_max; /* probes in flight at once */
	size_t inflight;
	size_t *queue; /* IC_QUEUED connections, FIFO */
	size_t qhead, qtail;
	char scheme[8];
	char authority[IDLE_AUTH_MAX];
	char path[IDLE_PATH_MAX];
	size_t next;	    /* next connection to open */
	size_t pending;	    /* connected, not yet established or dead */
	size_t established; /* HELLO answered (and probe done, with -u) */
	size_t hellos;
	size_t probed;
	size_t refused; /* closed or failed before established */
	size_t lost;	/* closed while held */
	size_t retries; /* connect() found the backlog full */
	int holding;
	int nerrmsg;
};

static uint8_t scratch[65536];
static volatile sig_atomic_t stop_sig;

static void errmsg(struct idle *id, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
errmsg(struct idle *id, const char *fmt, ...)
{
	va_list ap;

	if (id->nerrmsg >= IDLE_ERRMSG_MAX)
		return;
	id->nerrmsg++;
	va_start(ap, fmt);
	(void)fputs("egress-idle: ", stderr);
	(void)vfprintf(stderr, fmt, ap);
	(void)fputc('\n', stderr);
	va_end(ap);
}

static void
usage(void)
{
	(void)fprintf(stderr,
	    "usage: egress-idle [-n CONNECTIONS] [-u URL | -w WSURL [-s N]] "
	    "[-c PROBES]\n"
	    "           [-t HOLD_SECONDS] [-T ESTABLISH_SECONDS] SOCKET...\n");
	exit(2);
}

static double
now_s(void)
{
	struct timespec ts;

	(void)clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void
on_signal(int sig)
{
	stop_sig = sig;
}

static unsigned long
parse_ulong(const char *s, unsigned long min, unsigned long max)
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

/* The probe goes to a loopback destination only: 127/8, ::1, localhost. */
static int
host_is_loopback(const char *auth)
{
	char host[IDLE_AUTH_MAX];
	struct in6_addr a6;
	struct in_addr a4;
	const char *end;
	size_t n;

	if (auth[0] == '[') {
		if ((end = strchr(auth, ']')) == NULL)
			return 0;
		auth++;
	} else if ((end = strchr(auth, ':')) == NULL)
		end = auth + strlen(auth);
	n = (size_t)(end - auth);
	if (n == 0 || n >= sizeof(host))
		return 0;
	memcpy(host, auth, n);
	host[n] = '\0';
	if (strcmp(host, "localhost") == 0)
		return 1;
	if (inet_pton(AF_INET, host, &a4) == 1)
		return (ntohl(a4.s_addr) >> 24) == 127;
	if (inet_pton(AF_INET6, host, &a6) == 1)
		return IN6_IS_ADDR_LOOPBACK(&a6);
	return 0;
}

static int
parse_url(struct idle *id, const char *url)
{
	const char *p, *slash;
	size_t i, n;

	for (i = 0; url[i] != '\0'; i++)
		if ((unsigned char)url[i] <= 0x20 ||
		    (unsigned char)url[i] >= 0x7f || url[i] == '"' ||
		    url[i] == '\\')
			return -1;
	if (!id->ws && strncmp(url, "http://", 7) == 0) {
		(void)strcpy(id->scheme, "http");
		p = url + 7;
	} else if (!id->ws && strncmp(url, "https://", 8) == 0) {
		(void)strcpy(id->scheme, "https");
		p = url + 8;
	} else if (id->ws && strncmp(url, "ws://", 5) == 0) {
		(void)strcpy(id->scheme, "ws");
		p = url + 5;
	} else
		return -1;
	if (strlen(url) >= sizeof(id->url))
		return -1;
	(void)strcpy(id->url, url);
	if ((slash = strchr(p, '/')) == NULL)
		slash = p + strlen(p);
	n = (size_t)(slash - p);
	if (n == 0 || n >= sizeof(id->authority) ||
	    strlen(slash) >= sizeof(id->path))
		return -1;
	memcpy(id->authority, p, n);
	id->authority[n] = '\0';
	(void)snprintf(id->path, sizeof(id->path), "%s",
	    *slash == '\0' ? "/" : slash);
	return host_is_loopback(id->authority) ? 0 : -1;
}

/* Two descriptors per client and some spare; raise both limits if need be. */
static int
raise_nofile(size_t n)
{
	struct rlimit rl;
	rlim_t need = (rlim_t)(2 * n + IDLE_FDS_SPARE);

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return -1;
	if (rl.rlim_cur >= need)
		return 0;
	if (rl.rlim_max < need) {
		rl.rlim_max = need; /* needs CAP_SYS_RESOURCE */
		rl.rlim_cur = need;
		if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
			return 0;
		(void)fprintf(stderr,
		    "egress-idle: %zu connections need "
		    "%lu descriptors, the hard limit is lower: run it under "
		    "prlimit --nofile=%lu\n",
		    n, (unsigned long)need, (unsigned long)need);
		return -1;
	}
	rl.rlim_cur = need;
	return setrlimit(RLIMIT_NOFILE, &rl);
}

static void
ic_epoll(struct ic *c)
{
	struct epoll_event ev;
	int w;

	if (c->ec == NULL)
		return;
	w = egress_client_want_write(c->ec);
	if (w == c->wantw)
		return;
	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLIN | (w ? EPOLLOUT : 0);
	ev.data.ptr = c;
	if (epoll_ctl(c->id->ep, EPOLL_CTL_MOD, c->fd, &ev) == 0)
		c->wantw = w;
}

/* -w: free c's WebSockets. */
static void
ws_free(struct ic *c)
{
	size_t i;

	if (c->ws == NULL)
		return;
	for (i = 0; i < c->id->ws_per; i++)
		egress_request_free(c->ws[i]);
	free(c->ws);
	c->ws = NULL;
}

/* c is finished with: close it and count why. */
static void
ic_kill(struct ic *c, const char *why, int err)
{
	struct idle *id = c->id;

	if (c->st == IC_DEAD)
		return;
	if (c->st == IC_PROBE)
		id->inflight--;
	if (c->st == IC_IDLE) {
		id->lost++;
		id->established--;
		errmsg(id, "an established connection closed: %s", why);
	} else {
		id->refused++;
		id->pending--;
		errmsg(id, "connection %zu: %s%s%s", (size_t)(c - id->c), why,
		    err != 0 ? ": " : "",
		    err != 0 ? egress_strerror(err) : "");
	}
	c->st = IC_DEAD;
	if (c->ec != NULL) {
		(void)epoll_ctl(id->ep, EPOLL_CTL_DEL, c->fd, NULL);
		egress_request_free(c->req);
		c->req = NULL;
		ws_free(c);
		egress_client_free(c->ec);
		c->ec = NULL;
	}
}

static void
ic_established(struct ic *c)
{
	c->st = IC_IDLE;
	c->id->pending--;
	c->id->established++;
}

/*
 * -w: wait for the handshake's answer; once open, anything that arrives
 * (a message, a close, an error) marks the WebSocket gone.
 */
static void
ws_probe_cb(struct ic *c, struct egress_request *req)
{
	struct egress_ws_frame f;
	uint64_t bit, all;
	size_t i;
	int n;

	for (i = 0; i < c->id->ws_per && c->ws[i] != req; i++)
		;
	if (i == c->id->ws_per)
		return;
	bit = (uint64_t)1 << i;
	all = c->id->ws_per == 64 ? ~(uint64_t)0 :
				    ((uint64_t)1 << c->id->ws_per) - 1;
	if (c->ws_open & bit) {
		/* a keepalive ping (the broker answers it) is no loss */
		while ((n = egress_ws_recv(req, scratch, sizeof(scratch), &f,
			    EGRESS_NONBLOCK)) >= 0 &&
		    f.kind == EGRESS_WS_PING)
			;
		if (n != EGRESS_ERR_AGAIN)
			c->ws_gone = 1;
		return;
	}
	if (c->ws_answered & bit)
		return;
	n = egress_ws_wait(req, EGRESS_NONBLOCK);
	if (n == EGRESS_ERR_AGAIN)
		return;
	c->ws_answered |= bit;
	if (n < 0 && c->probe_err == 0)
		c->probe_err = n;
	else if (n > 0)
		c->status = n; /* refused with this status */
	else if (n == 0)
		c->ws_open |= bit;
	if (c->ws_answered == all) {
		c->probe_end = 1;
		if (c->ws_open == all)
			c->status = 101;
	}
}

/*
 * The probe request's callback: read its body to the end. It runs inside
 * egress_client_step(), so it only records the outcome; ic_ready() acts.
 */
static void
probe_cb(struct egress_request *req, unsigned int events, void *arg)
{
	struct ic *c = arg;
	int n;

	(void)events;
	if (c->id->ws) {
		ws_probe_cb(c, req);
		return;
	}
	if (c->probe_end)
		return;
	if (c->status == 0) {
		n = egress_response_wait(req, EGRESS_NONBLOCK);
		if (n == EGRESS_ERR_AGAIN)
			return;
		if (n < 0) {
			c->probe_end = 1;
			c->probe_err = n;
			return;
		}
		c->status = n;
	}
	for (;;) {
		n = egress_response_read(req, scratch, sizeof(scratch),
		    EGRESS_NONBLOCK);
		if (n > 0)
			continue;
		if (n == EGRESS_ERR_AGAIN)
			return;
		c->probe_end = 1;
		c->probe_err = n; /* 0: the complete body */
		return;
	}
}

/* The probe ended: count the connection as established, or kill it. */
static void
probe_done(struct ic *c)
{
	c->id->inflight--;
	c->st = IC_QUEUED;	     /* no longer in flight, not established */
	egress_request_free(c->req); /* NULL with -w */
	c->req = NULL;
	if (c->probe_err != 0) {
		ic_kill(c, "probe request failed", c->probe_err);
		return;
	}
	if (c->id->ws ? c->status != 101 :
			(c->status < 200 || c->status > 299)) {
		errmsg(c->id, "probe status %d", c->status);
		ic_kill(c, "probe refused", 0);
		return;
	}
	c->id->probed++;
	ic_established(c);
}

static void
probe_start(struct ic *c)
{
	struct idle *id = c->id;
	struct egress_header h[1] = { {
	    "User-Agent",
	    10,
	    "egress-idle",
	    11,
	} };
	struct egress_request_head head;
	int rv;

	memset(&head, 0, sizeof(head));
	head.method = "GET";
	head.scheme = id->scheme;
	head.authority = id->authority;
	head.path = id->path;
	head.headers = h;
	head.nheaders = 1;
	c->st = IC_PROBE;
	id->inflight++;
	if (id->ws) {
		size_t i;

		rv = (c->ws = calloc(id->ws_per,
			  sizeof(struct egress_request *))) == NULL ?
		    EGRESS_ERR_NOMEM :
		    0;
		for (i = 0; rv == 0 && i < id->ws_per; i++)
			rv = egress_ws_open_profile(c->ec, id->url, NULL, h, 1,
			    NULL, probe_cb, c, &c->ws[i]);
	} else {
		rv = egress_request_start(c->ec, &head, probe_cb, c, &c->req);
		if (rv == 0)
			rv = egress_request_finish(c->req, NULL, 0);
	}
	if (rv != 0) {
		ic_kill(c, "probe start", rv);
		return;
	}
	rv = egress_client_step(c->ec); /* send it */
	if (rv != 0) {
		ic_kill(c, "connection failed", rv);
		return;
	}
	if (c->probe_end)
		probe_done(c);
	else
		ic_epoll(c);
}

/*
 * Start queued probes while fewer than probe_max are in flight, so that
 * the upstream never sees more than that many at once from here.
 */
static void
probe_pump(struct idle *id)
{
	struct ic *c;

	while (id->inflight < id->probe_max && id->qhead != id->qtail) {
		c = &id->c[id->queue[id->qhead++]];
		if (c->st == IC_QUEUED)
			probe_start(c);
	}
}

/*
 * The broker's first frame on a fresh connection is its HELLO (or an
 * ERROR, or nothing: a refused connection is closed). Peek at its header
 * before libegress consumes it. Return 1 for a HELLO, 0 when nothing has
 * arrived, 2 for part of a header, -1 for a close or any other frame.
 */
static int
peek_hello(struct ic *c)
{
	uint8_t hb[PROTO_HDR_SIZE];
	struct proto_hdr h;
	ssize_t n;

	n = recv(c->fd, hb, sizeof(hb), MSG_PEEK | MSG_DONTWAIT);
	if (n == 0)
		return -1; /* closed: refused */
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -1;
	if ((size_t)n < sizeof(hb))
		return 2; /* part of a header: wait for the rest */
	if (proto_hdr_decode(hb, sizeof(hb), &h, NULL) != PROTO_HDR_SIZE ||
	    h.type != PROTO_MSG_HELLO)
		return -1;
	return 1;
}

/* Step c after its fd became ready, and move it along its states. */
static void
ic_ready(struct ic *c)
{
	int rv, hello = 0;

	if (c->st == IC_HELLO) {
		hello = peek_hello(c);
		if (hello < 0) {
			ic_kill(c,
			    "refused by the broker (closed, or no "
			    "HELLO)",
			    0);
			return;
		}
		if (hello == 2)
			return; /* libegress must not take half of it */
	}
	rv = egress_client_step(c->ec); /* may run probe_cb */
	if (rv != 0) {
		ic_kill(c, "connection failed", rv);
		return;
	}
	if (hello == 1) {
		c->id->hellos++;
		if (!c->id->probe)
			ic_established(c);
		else {
			c->st = IC_QUEUED;
			c->id->queue[c->id->qtail++] = (size_t)(c - c->id->c);
		}
	}
	if (c->st == IC_PROBE && c->probe_end)
		probe_done(c);
	if (c->st == IC_IDLE && c->ws_gone) {
		ic_kill(c, "the WebSocket received data, closed or failed", 0);
		return;
	}
	if (c->st != IC_DEAD)
		ic_epoll(c);
	probe_pump(c->id);
}

/*
 * Open connection c on its socket without blocking. Return 1 when it is
 * open (or failed for good, counted), 0 when the backlog is full (retry).
 */
static int
ic_open(struct ic *c, const char *path)
{
	struct idle *id = c->id;
	struct sockaddr_un sun;
	struct epoll_event ev;
	int fd, rv;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	(void)snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		errmsg(id, "socket: %s", strerror(errno));
		id->refused++;
		c->st = IC_DEAD;
		return 1;
	}
	while ((rv = connect(fd, (struct sockaddr *)&sun, sizeof(sun))) != 0 &&
	    errno == EINTR)
		;
	if (rv != 0) {
		int e = errno;

		(void)close(fd);
		if (e == EAGAIN) {
			id->retries++;
			return 0; /* backlog full */
		}
		errmsg(id, "%s: %s", path, strerror(e));
		id->refused++;
		c->st = IC_DEAD;
		return 1;
	}
	rv = egress_client_from_fd(fd, &c->ec);
	if (rv != 0) {
		(void)close(fd);
		errmsg(id, "egress_client_from_fd: %s", egress_strerror(rv));
		id->refused++;
		c->st = IC_DEAD;
		return 1;
	}
	c->fd = fd;
	c->st = IC_HELLO;
	id->pending++;
	memset(&ev, 0, sizeof(ev));
	c->wantw = egress_client_want_write(c->ec);
	ev.events = EPOLLIN | (c->wantw ? EPOLLOUT : 0);
	ev.data.ptr = c;
	if (epoll_ctl(id->ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
		errmsg(id, "epoll_ctl: %s", strerror(errno));
		ic_kill(c, "epoll", 0);
	}
	return 1;
}

/* Wait up to ms for events and handle them; -1 when interrupted. */
static int
poll_once(struct idle *id, int ms, const sigset_t *mask)
{
	struct epoll_event ev[IDLE_EVENTS];
	int i, n;

	n = epoll_pwait(id->ep, ev, IDLE_EVENTS, ms, mask);
	if (n < 0)
		return errno == EINTR ? -1 : 0;
	for (i = 0; i < n; i++)
		ic_ready(ev[i].data.ptr);
	return n;
}

int
main(int argc, char *argv[])
{
	struct idle id;
	struct sigaction sa;
	sigset_t block, wait_mask;
	const char *url = NULL;
	double t0, t_est, deadline, hold_end, hold = 600, est_max = 120;
	size_t i, k;
	int ch, rc = 0, timed_out = 0;

	memset(&id, 0, sizeof(id));
	id.n = 10000;
	id.probe_max = IDLE_PROBES;
	while ((ch = getopt(argc, argv, "n:u:w:s:c:t:T:")) != -1) {
		switch (ch) {
		case 'c':
			id.probe_max = parse_ulong(optarg, 1, IDLE_CONN_MAX);
			break;
		case 'n':
			id.n = parse_ulong(optarg, 1, IDLE_CONN_MAX);
			break;
		case 'u':
		case 'w':
			if (url != NULL)
				usage(); /* one probe URL */
			url = optarg;
			id.ws = ch == 'w';
			break;
		case 's':
			id.ws_per = parse_ulong(optarg, 1, IDLE_WS_PER_MAX);
			break;
		case 't':
			hold = (double)parse_ulong(optarg, 0, IDLE_HOLD_MAX);
			break;
		case 'T':
			est_max = (double)parse_ulong(optarg, 1,
			    IDLE_HOLD_MAX);
			break;
		default:
			usage();
		}
	}
	if (optind >= argc || argc - optind > IDLE_SOCKETS_MAX)
		usage();
	id.socks = argv + optind;
	id.nsocks = (size_t)(argc - optind);
	for (i = 0; i < id.nsocks; i++)
		if (strlen(id.socks[i]) >=
		    sizeof(((struct sockaddr_un *)0)->sun_path)) {
			(void)fprintf(stderr,
			    "egress-idle: socket path too "
			    "long: %s\n",
			    id.socks[i]);
			return 2;
		}
	if (url != NULL) {
		if (parse_url(&id, url) != 0) {
			(void)fprintf(stderr,
			    "egress-idle: -u needs an http or https "
			    "URL, -w a ws URL, on a loopback address\n");
			return 2;
		}
		id.probe = 1;
	}
	if (id.ws_per != 0 && !id.ws)
		usage(); /* -s only with -w */
	if (id.ws_per == 0)
		id.ws_per = 1;
	if (raise_nofile(id.n) != 0)
		return 2;
	if ((id.c = calloc(id.n, sizeof(*id.c))) == NULL ||
	    (id.queue = calloc(id.n, sizeof(*id.queue))) == NULL)
		return 2; // NOLINT(clang-analyzer-unix.Malloc): exits
	if ((id.ep = epoll_create1(EPOLL_CLOEXEC)) < 0)
		return 2; // NOLINT(clang-analyzer-unix.Malloc): exits

	/* SIGTERM and SIGINT are taken only inside epoll_pwait(). */
	(void)signal(SIGPIPE, SIG_IGN);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	(void)sigemptyset(&sa.sa_mask);
	(void)sigaction(SIGTERM, &sa, NULL);
	(void)sigaction(SIGINT, &sa, NULL);
	(void)sigemptyset(&block);
	(void)sigaddset(&block, SIGTERM);
	(void)sigaddset(&block, SIGINT);
	(void)sigprocmask(SIG_BLOCK, &block, &wait_mask);
	(void)sigdelset(&wait_mask, SIGTERM);
	(void)sigdelset(&wait_mask, SIGINT);

	for (i = 0; i < id.n; i++) {
		id.c[i].id = &id;
		id.c[i].fd = -1;
		id.c[i].st = IC_NEW;
	}
	t0 = now_s();
	deadline = t0 + est_max;
	/* Open them all, servicing answers between batches. */
	while (!stop_sig && (id.next < id.n || id.pending > 0)) {
		if (now_s() > deadline) {
			timed_out = 1;
			break;
		}
		for (k = 0; k < IDLE_BATCH && id.next < id.n; k++) {
			struct ic *c = &id.c[id.next];

			if (ic_open(c, id.socks[id.next % id.nsocks]) == 0)
				break;
			id.next++;
		}
		(void)poll_once(&id,
		    k < IDLE_BATCH && id.next < id.n ? 1 :
			id.next < id.n		     ? 0 :
						       100,
		    &wait_mask);
	}
	t_est = now_s();
	(void)printf(
	    "{\"event\":\"established\",\"connections\":%zu,"
	    "\"sockets\":%zu,\"established\":%zu,\"hellos\":%zu,"
	    "\"probed\":%zu,\"refused\":%zu,\"not_answered\":%zu,"
	    "\"not_opened\":%zu,\"backlog_retries\":%zu,\"timed_out\":%s,"
	    "\"elapsed_s\":%.3f}\n",
	    id.n, id.nsocks, id.established, id.hellos, id.probed, id.refused,
	    id.pending, id.n - id.next, id.retries,
	    timed_out ? "true" : "false", t_est - t0);
	(void)fflush(stdout);
	if (id.established != id.n)
		rc = 1;

	/* Hold: step whatever the broker sends, count what it closes. */
	id.holding = 1;
	hold_end = t_est + hold;
	while (!stop_sig) {
		double left = hold_end - now_s();

		if (left <= 0 || id.established == 0)
			break; /* over, or nothing left to hold */
		(void)poll_once(&id, left > 1 ? 1000 : (int)(left * 1000) + 1,
		    &wait_mask);
	}

	for (i = 0; i < id.n; i++) {
		egress_request_free(id.c[i].req);
		ws_free(&id.c[i]);
		egress_client_free(id.c[i].ec);
	}
	(void)printf("{\"event\":\"closed\",\"held_s\":%.3f,\"lost\":%zu,"
		     "\"signal\":%d}\n",
	    now_s() - t_est, id.lost, (int)stop_sig);
	(void)fflush(stdout);
	if (id.lost > 0)
		rc = 1;
	(void)close(id.ep);
	free(id.c);
	free(id.queue);
	return rc;
}
