/* SPDX-License-Identifier: ISC */
/*
 * egress-stream-bench: bulk TCP throughput for scripts/bench-stream.
 *
 *   egress-stream-bench serve -l PORT -b BYTES
 *       a source on 127.0.0.1:PORT: every connection gets BYTES bytes,
 *       then the server's end of file; it reads and drops what the client
 *       sends, and closes once the client ended too. Runs until killed.
 *   egress-stream-bench -m direct|shim|proxy [-s SOCKET] [-p PROXYPORT]
 *       [-c STREAMS] [-l LABEL] PORT
 *       STREAMS streams at once (default 1) each read everything the
 *       source on 127.0.0.1:PORT sends, to its end of file: direct (a TCP
 *       connection), shim (a tcp stream of one libegress client per
 *       stream, through the egressd instance socket SOCKET) or proxy (a
 *       CONNECT tunnel through the forward proxy on 127.0.0.1:PROXYPORT,
 *       such as squid). Prints one JSON line: streams, bytes, seconds,
 *       bytes/s, errors, and the client's own CPU time.
 *
 * One thread, one poll() set; reads of 256 KiB, so the client is never
 * the slower party. Loopback only.
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
#include <time.h>
#include <unistd.h>

#include <egress/egress.h>

#define SB_STREAMS_MAX 1024
#define SB_READ	       (256 * 1024)
#define SB_HEAD_MAX    1024

enum sb_mode { SB_DIRECT, SB_SHIM, SB_PROXY };

struct sb_stream {
	int fd;			   /* direct, proxy; -1 when done */
	struct egress_client *ec;  /* shim */
	struct egress_request *rq; /* shim */
	int done;
	int failed;
	int tunnel; /* proxy: the CONNECT answer was read */
	char head[SB_HEAD_MAX];
	size_t headlen;
	uint64_t bytes;
};

static uint8_t buf[SB_READ];

static void
usage(void)
{
	(void)fprintf(stderr,
	    "usage: egress-stream-bench serve -l PORT -b BYTES\n"
	    "       egress-stream-bench -m direct|shim|proxy [-s SOCKET] "
	    "[-p PROXYPORT]\n"
	    "           [-c STREAMS] [-l LABEL] PORT\n");
	exit(2);
}

static unsigned long long
parse_num(const char *s, unsigned long long min, unsigned long long max)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
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

static int
tcp_connect(unsigned port)
{
	struct sockaddr_in sin;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons((uint16_t)port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0 ||
	    fcntl(fd, F_SETFL, O_NONBLOCK) != 0) {
		(void)close(fd);
		return -1;
	}
	return fd;
}

/* ---- The source -------------------------------------------------------- */

struct src_conn {
	int fd;
	uint64_t left;
	int shut;
};

static int
serve(unsigned port, uint64_t bytes)
{
	static struct src_conn c[SB_STREAMS_MAX];
	static struct pollfd p[SB_STREAMS_MAX + 1];
	struct sockaddr_in sin;
	int one = 1, lfd;
	size_t i, n = 0;

	memset(buf, 's', sizeof(buf));
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
		perror("egress-stream-bench: listen");
		return 1;
	}
	(void)printf("listening\n");
	(void)fflush(stdout);
	for (;;) {
		p[0].fd = lfd;
		p[0].events = n < SB_STREAMS_MAX ? POLLIN : 0;
		for (i = 0; i < n; i++) {
			p[i + 1].fd = c[i].fd;
			p[i + 1].events = POLLIN | (c[i].shut ? 0 : POLLOUT);
		}
		if (poll(p, n + 1, -1) < 0) {
			if (errno == EINTR)
				continue;
			return 1;
		}
		for (i = n; i-- > 0;) {
			struct src_conn *s = &c[i];
			short re = p[i + 1].revents;
			ssize_t k;
			int gone = 0;

			if (re & POLLOUT) {
				size_t want = s->left < sizeof(buf) ?
				    (size_t)s->left :
				    sizeof(buf);

				k = write(s->fd, buf, want);
				if (k < 0 && errno != EAGAIN && errno != EINTR)
					gone = 1;
				if (k > 0)
					s->left -= (uint64_t)k;
				if (!gone && s->left == 0) {
					(void)shutdown(s->fd, SHUT_WR);
					s->shut = 1;
				}
			}
			if (!gone && (re & (POLLIN | POLLHUP | POLLERR))) {
				k = read(s->fd, buf, sizeof(buf));
				if (k == 0 ||
				    (k < 0 && errno != EAGAIN &&
					errno != EINTR))
					gone = 1;
			}
			if (gone) {
				(void)close(s->fd);
				c[i] = c[--n];
			}
		}
		if (p[0].revents & POLLIN) {
			int fd = accept4(lfd, NULL, NULL,
			    SOCK_NONBLOCK | SOCK_CLOEXEC);

			if (fd >= 0) {
				c[n].fd = fd;
				c[n].left = bytes;
				c[n].shut = 0;
				if (bytes == 0) {
					(void)shutdown(fd, SHUT_WR);
					c[n].shut = 1;
				}
				n++;
			}
		}
	}
}

/* ---- The clients ------------------------------------------------------- */

static void
sb_finish(struct sb_stream *s, int failed)
{
	s->done = 1;
	s->failed = failed;
	if (s->fd >= 0)
		(void)close(s->fd);
	s->fd = -1;
}

/* proxy: read the CONNECT answer; 1 once the tunnel is up, -1 on error */
static int
proxy_head(struct sb_stream *s)
{
	ssize_t k;

	while (s->headlen < sizeof(s->head) - 1) {
		k = read(s->fd, s->head + s->headlen, 1); /* never past it */
		if (k < 0 && (errno == EAGAIN || errno == EINTR))
			return 0;
		if (k <= 0)
			return -1;
		s->headlen++;
		s->head[s->headlen] = '\0';
		if (strstr(s->head, "\r\n\r\n") != NULL)
			return strncmp(s->head, "HTTP/1.1 200", 12) == 0 ||
				strncmp(s->head, "HTTP/1.0 200", 12) == 0 ?
			    1 :
			    -1;
	}
	return -1;
}

static void
fd_step(struct sb_stream *s)
{
	ssize_t k;
	int rv;

	if (!s->tunnel) {
		rv = proxy_head(s);
		if (rv < 0)
			sb_finish(s, 1);
		if (rv <= 0)
			return;
		s->tunnel = 1;
	}
	for (;;) {
		k = read(s->fd, buf, sizeof(buf));
		if (k > 0) {
			s->bytes += (uint64_t)k;
			continue;
		}
		if (k < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		sb_finish(s, k < 0);
		return;
	}
}

static void
shim_step(struct sb_stream *s)
{
	int n;

	if (egress_client_step(s->ec) != 0) {
		sb_finish(s, 1);
		return;
	}
	for (;;) {
		n = egress_stream_read(s->rq, buf, sizeof(buf),
		    EGRESS_NONBLOCK);
		if (n > 0) {
			s->bytes += (uint64_t)n;
			continue;
		}
		if (n == EGRESS_ERR_AGAIN)
			return;
		if (n < 0)
			(void)fprintf(stderr, "egress-stream-bench: %s\n",
			    egress_strerror(n));
		sb_finish(s, n < 0);
		return;
	}
}

static int
sb_open(struct sb_stream *s, enum sb_mode mode, const char *sock,
    unsigned port, unsigned proxy_port)
{
	char auth[64];
	int fd, rv;

	s->fd = -1;
	(void)snprintf(auth, sizeof(auth), "127.0.0.1:%u", port);
	switch (mode) {
	case SB_DIRECT:
	case SB_PROXY:
		fd = tcp_connect(mode == SB_DIRECT ? port : proxy_port);
		if (fd < 0)
			return -1;
		if (mode == SB_PROXY) {
			char req[160];
			int len = snprintf(req, sizeof(req),
			    "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", auth,
			    auth);

			if (write(fd, req, (size_t)len) != len) {
				(void)close(fd);
				return -1;
			}
		} else
			s->tunnel = 1;
		s->fd = fd;
		return 0;
	case SB_SHIM:
		rv = egress_client_connect(sock, &s->ec);
		if (rv == 0)
			rv = egress_stream_open(s->ec, EGRESS_STREAM_TCP, auth,
			    NULL, NULL, NULL, &s->rq);
		if (rv != 0) {
			(void)fprintf(stderr, "egress-stream-bench: %s\n",
			    egress_strerror(rv));
			return -1;
		}
		s->fd = egress_client_fd(s->ec);
		return 0;
	}
	return -1;
}

int
main(int argc, char *argv[])
{
	static struct sb_stream ss[SB_STREAMS_MAX];
	static struct pollfd p[SB_STREAMS_MAX];
	enum sb_mode mode = SB_DIRECT;
	const char *sock = NULL, *label = "";
	unsigned port, proxy_port = 0;
	size_t i, n = 1, left, errors = 0;
	uint64_t total = 0;
	struct rusage ru;
	double t0, t1;
	int ch;

	(void)signal(SIGPIPE, SIG_IGN);
	if (argc > 1 && strcmp(argv[1], "serve") == 0) {
		unsigned long long bytes = 0;
		unsigned lport = 0;

		optind = 2;
		while ((ch = getopt(argc, argv, "l:b:")) != -1) {
			if (ch == 'l')
				lport = (unsigned)parse_num(optarg, 1, 65535);
			else if (ch == 'b')
				bytes = parse_num(optarg, 0, 1ULL << 50);
			else
				usage();
		}
		if (lport == 0 || optind != argc)
			usage();
		return serve(lport, bytes);
	}
	while ((ch = getopt(argc, argv, "m:s:p:c:l:")) != -1) {
		switch (ch) {
		case 'm':
			if (strcmp(optarg, "direct") == 0)
				mode = SB_DIRECT;
			else if (strcmp(optarg, "shim") == 0)
				mode = SB_SHIM;
			else if (strcmp(optarg, "proxy") == 0)
				mode = SB_PROXY;
			else
				usage();
			break;
		case 's':
			sock = optarg;
			break;
		case 'p':
			proxy_port = (unsigned)parse_num(optarg, 1, 65535);
			break;
		case 'c':
			n = (size_t)parse_num(optarg, 1, SB_STREAMS_MAX);
			break;
		case 'l':
			label = optarg;
			break;
		default:
			usage();
		}
	}
	if (optind != argc - 1 || (mode == SB_SHIM && sock == NULL) ||
	    (mode == SB_PROXY && proxy_port == 0))
		usage();
	port = (unsigned)parse_num(argv[optind], 1, 65535);
	if (strchr(label, '"') != NULL || strchr(label, '\\') != NULL)
		usage();

	t0 = now_s();
	for (i = 0; i < n; i++)
		if (sb_open(&ss[i], mode, sock, port, proxy_port) != 0)
			sb_finish(&ss[i], 1);
	for (;;) {
		int timeout = -1;

		left = 0;
		for (i = 0; i < n; i++) {
			p[i].fd = ss[i].done ? -1 : ss[i].fd;
			p[i].events = POLLIN;
			if (!ss[i].done && ss[i].ec != NULL) {
				int t = egress_client_timeout_ms(ss[i].ec);

				if (egress_client_want_write(ss[i].ec))
					p[i].events |= POLLOUT;
				if (t >= 0 && (timeout < 0 || t < timeout))
					timeout = t;
			}
			left += !ss[i].done;
		}
		if (left == 0)
			break;
		if (poll(p, n, timeout) < 0 && errno != EINTR)
			return 1;
		for (i = 0; i < n; i++) {
			if (ss[i].done)
				continue;
			if (ss[i].ec != NULL)
				shim_step(&ss[i]);
			else if (p[i].revents != 0)
				fd_step(&ss[i]);
		}
	}
	t1 = now_s();
	(void)getrusage(RUSAGE_SELF, &ru);
	for (i = 0; i < n; i++) {
		total += ss[i].bytes;
		errors += (size_t)ss[i].failed;
		egress_request_free(ss[i].rq);
		egress_client_free(ss[i].ec);
	}
	(void)printf("{\"label\":\"%s\",\"mode\":\"%s\",\"streams\":%zu,"
		     "\"bytes\":%llu,\"seconds\":%.6f,\"bytes_per_s\":%.0f,"
		     "\"errors\":%zu,\"client_cpu_s\":%.3f}\n",
	    label,
	    mode == SB_DIRECT	? "direct" :
		mode == SB_SHIM ? "shim" :
				  "proxy",
	    n, (unsigned long long)total, t1 - t0,
	    t1 > t0 ? (double)total / (t1 - t0) : 0.0, errors,
	    (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
		(double)ru.ru_stime.tv_sec +
		(double)ru.ru_stime.tv_usec / 1e6);
	return errors != 0;
}
