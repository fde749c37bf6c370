/* SPDX-License-Identifier: ISC */
/*
 * egress-connect: an nc-like client of egressd over libegress. It opens
 * one WebSocket (ws:// or wss:// URL: connect_ws.c) or one tcp or tls
 * stream (URL tcp://HOST:PORT or tls://HOST:PORT) through
 * an instance socket (--socket PATH, or the inherited connection named by
 * EGRESS_FD), relays stdin to the destination and the destination to
 * stdout, half-closes the stream when stdin ends, and exits once both
 * directions ended; with --starttls smtp a tcp stream first speaks
 * SMTP up to STARTTLS and is upgraded (connect_smtp.c). One thread, one poll(2) loop over stdin and the
 * broker connection, driven by egress_client_step(). Exit status as
 * egress-fetch's: 0 when both directions ended cleanly, 10..19 for the
 * guest-visible error codes (docs/shim.md), 2 for usage errors, 1 for any
 * other local failure; errors print "egress-connect: CODE: message".
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include <egress/egress.h>

#include "shim/connect_smtp.h"
#include "shim/connect_ws.h"
#include "shim/tool.h"

#define CHUNK	    (64 * 1024)
#define HEADERS_MAX 64

static void
print_usage(FILE *f)
{
	fprintf(f,
	    "usage: egress-connect --socket PATH [--profile NAME] URL\n"
	    "       egress-connect --socket PATH [--profile NAME] "
	    "--starttls smtp tcp://HOST:PORT\n"
	    "       egress-connect --socket PATH [--profile NAME] "
	    "[-H 'NAME: VALUE']...\n"
	    "                      [--subprotocol P]... [--binary] [--ping] "
	    "ws://... | wss://...\n"
	    "       egress-connect --help | --version\n"
	    "       (URL is tcp://HOST:PORT or tls://HOST:PORT; "
	    "EGRESS_FD=N may replace --socket)\n");
}

static void
die_usage(const char *what, const char *arg)
{
	fprintf(stderr, "egress-connect: %s%s%s\n", what, arg ? ": " : "",
	    arg ? arg : "");
	exit(TOOL_EXIT_USAGE);
}

static void
die_err(int err, const char *msg)
{
	const char *code = tool_err_text(err, msg, &msg);

	fprintf(stderr, "egress-connect: %s: %s\n", code, msg);
	exit(tool_exit_code(err));
}

static void
die_stream(struct egress_request *s, int err)
{
	die_err(err, egress_request_message(s));
}

static void
die_local(const char *what)
{
	fprintf(stderr, "egress-connect: error: %s: %s\n", what,
	    strerror(errno));
	exit(TOOL_EXIT_LOCAL);
}

/* Split URL into its transport and authority (borrowed from url). */
static void
parse_url(const char *url, int *ret_transport, const char **ret_authority)
{
	const char *a;

	if (strncmp(url, "tcp://", 6) == 0)
		*ret_transport = EGRESS_STREAM_TCP;
	else if (strncmp(url, "tls://", 6) == 0)
		*ret_transport = EGRESS_STREAM_TLS;
	else
		die_usage("URL must be tcp://HOST:PORT or tls://HOST:PORT",
		    url);
	a = url + 6;
	if (*a == '\0' || strpbrk(a, "/?#@") != NULL)
		die_usage("URL must be tcp://HOST:PORT or tls://HOST:PORT",
		    url);
	*ret_authority = a;
}

static struct egress_client *
open_client(const char *path)
{
	struct egress_client *c = NULL;
	struct stat st;
	int rv;

	if (path != NULL) {
		if (stat(path, &st) == 0 && !S_ISSOCK(st.st_mode)) {
			fprintf(stderr,
			    "egress-connect: unavailable: %s: not a socket\n",
			    path);
			exit(tool_exit_code(EGRESS_ERR_UNAVAILABLE));
		}
		rv = egress_client_connect(path, &c);
	} else
		rv = egress_client_from_env(&c);
	if (rv < 0)
		die_err(rv == EGRESS_ERR_INVALID ||
			    rv == EGRESS_ERR_NOT_FOUND ?
			EGRESS_ERR_UNAVAILABLE :
			rv,
		    NULL);
	return c;
}

static void
write_all(int fd, const char *buf, size_t n)
{
	ssize_t k;

	while (n > 0) {
		k = write(fd, buf, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			die_local("stdout");
		buf += k;
		n -= (size_t)k;
	}
}

/* The relay state of main's loop. */
struct relay {
	struct egress_client *c;
	struct egress_request *s;
	char in[CHUNK]; /* read from stdin, not yet written */
	size_t off, len;
	int in_eof;  /* stdin ended */
	int shut;    /* ... and the stream's write side with it */
	int out_eof; /* the destination ended its side */
	char out[CHUNK];
};

/* Move what can move without blocking; return 1 once both ended. */
static int
relay_step(struct relay *r)
{
	int n;

	while (r->len > 0) {
		n = egress_stream_write(r->s, r->in + r->off, r->len,
		    EGRESS_NONBLOCK);
		if (n == EGRESS_ERR_AGAIN)
			break;
		if (n < 0)
			die_stream(r->s, n);
		r->off += (size_t)n;
		r->len -= (size_t)n;
	}
	if (r->in_eof && r->len == 0 && !r->shut) {
		if ((n = egress_stream_shutdown(r->s)) < 0)
			die_stream(r->s, n);
		r->shut = 1;
	}
	while (!r->out_eof) {
		n = egress_stream_read(r->s, r->out, sizeof(r->out),
		    EGRESS_NONBLOCK);
		if (n == EGRESS_ERR_AGAIN)
			break;
		if (n < 0)
			die_stream(r->s, n);
		if (n == 0)
			r->out_eof = 1;
		else
			write_all(STDOUT_FILENO, r->out, (size_t)n);
	}
	return r->shut && r->out_eof;
}

static void
relay_stdin(struct relay *r)
{
	ssize_t k = read(STDIN_FILENO, r->in, sizeof(r->in));

	if (k < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (k < 0)
		die_local("stdin");
	if (k == 0)
		r->in_eof = 1;
	r->off = 0;
	r->len = (size_t)k;
}

/* -H NAME: VALUE, or --subprotocol P: one more handshake header. */
static void
add_header(struct egress_header *hs, size_t *nh, int ch, char *arg)
{
	struct egress_header *h = &hs[*nh];
	char *colon;

	if (*nh == HEADERS_MAX)
		die_usage("too many headers", arg);
	if (ch == 'P') {
		h->name = "Sec-WebSocket-Protocol";
		h->value = arg;
	} else {
		if ((colon = strchr(arg, ':')) == NULL || colon == arg)
			die_usage("a header is NAME: VALUE", arg);
		*colon = '\0';
		h->name = arg;
		for (colon++; *colon == ' ' || *colon == '\t';)
			colon++;
		h->value = colon;
	}
	h->name_len = strlen(h->name);
	h->value_len = strlen(h->value);
	(*nh)++;
}

/* A tcp or tls stream to url (--starttls smtp: upgraded first); stdin
 * and stdout relayed until both ended. Return 0 (errors exit). */
static int
connect_stream(const char *path, const char *url, const char *profile,
    int starttls)
{
	static struct relay r;
	const char *authority, *msg;
	struct pollfd pfd[2];
	int transport, rv, timeout;
	nfds_t n;

	parse_url(url, &transport, &authority);
	(void)signal(SIGPIPE, SIG_IGN); /* a closed stdout is EPIPE */
	r.c = open_client(path);
	/* With --starttls the profile is the upgrade's. */
	rv = egress_stream_open_profile(r.c, transport, authority,
	    starttls ? NULL : profile, NULL, NULL, NULL, &r.s);
	if (rv < 0)
		die_err(rv == EGRESS_ERR_INVALID || rv == EGRESS_ERR_TOO_BIG ?
			EGRESS_ERR_INVALID_REQUEST :
			rv,
		    NULL);
	if ((rv = egress_stream_wait(r.s, 0)) < 0)
		die_stream(r.s, rv);
	if (starttls && (rv = connect_smtp(r.s, profile, &msg)) < 0)
		die_err(rv,
		    msg != NULL && egress_request_error(r.s) == 0 ?
			msg :
			egress_request_message(r.s));
	while (!relay_step(&r)) {
		pfd[0].fd = egress_client_fd(r.c);
		pfd[0].events = POLLIN |
		    (egress_client_want_write(r.c) ? POLLOUT : 0);
		pfd[1].fd = STDIN_FILENO;
		pfd[1].events = POLLIN;
		pfd[0].revents = pfd[1].revents = 0;
		/* stdin only when the last chunk went out. */
		n = !r.in_eof && r.len == 0 ? 2 : 1;
		timeout = egress_client_timeout_ms(r.c);
		if (poll(pfd, n, timeout) < 0 && errno != EINTR)
			die_local("poll");
		if (n == 2 && (pfd[1].revents & (POLLIN | POLLHUP | POLLERR)))
			relay_stdin(&r);
		if ((rv = egress_client_step(r.c)) < 0)
			die_err(rv, NULL);
	}
	/* What is queued (the last bytes, the end) reaches the broker
	 * before the connection closes. */
	while (egress_client_want_write(r.c)) {
		pfd[0].fd = egress_client_fd(r.c);
		pfd[0].events = POLLIN | POLLOUT;
		pfd[0].revents = 0;
		if (poll(pfd, 1, -1) < 0 && errno != EINTR)
			die_local("poll");
		if ((rv = egress_client_step(r.c)) < 0)
			die_err(rv, NULL);
	}
	egress_request_free(r.s);
	egress_client_free(r.c);
	return 0;
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "profile", required_argument, NULL, 'r' },
		{ "header", required_argument, NULL, 'H' },
		{ "subprotocol", required_argument, NULL, 'P' },
		{ "binary", no_argument, NULL, 'b' },
		{ "ping", no_argument, NULL, 'p' },
		{ "starttls", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	static struct egress_header hs[HEADERS_MAX];
	struct egress_client *c;
	size_t nh = 0;
	int binary = 0, ping = 0, starttls = 0;
	const char *path = NULL, *profile = NULL;
	int ch, rv;

	while ((ch = getopt_long(argc, argv, "VH:", longopts, NULL)) != -1) {
		switch (ch) {
		case 's':
			path = optarg;
			break;
		case 'r':
			profile = optarg;
			break;
		case 'H':
		case 'P':
			add_header(hs, &nh, ch, optarg);
			break;
		case 'b':
			binary = 1;
			break;
		case 'p':
			ping = 1;
			break;
		case 't':
			if (strcmp(optarg, "smtp") != 0)
				die_usage("--starttls knows only smtp",
				    optarg);
			starttls = 1;
			break;
		case 'h':
			print_usage(stdout);
			return 0;
		case 'V':
			printf("egress-connect %s\n", EGRESS_SHIM_VERSION);
			return 0;
		default:
			print_usage(stderr);
			return TOOL_EXIT_USAGE;
		}
	}
	if (optind != argc - 1) {
		print_usage(stderr);
		return TOOL_EXIT_USAGE;
	}
	if (strncmp(argv[optind], "ws://", 5) == 0 ||
	    strncmp(argv[optind], "wss://", 6) == 0) {
		(void)signal(SIGPIPE, SIG_IGN);
		c = open_client(path);
		rv = connect_ws(c, argv[optind], profile, hs, nh, binary,
		    ping);
		egress_client_free(c);
		return rv;
	}
	if (starttls && strncmp(argv[optind], "tcp://", 6) != 0)
		die_usage("--starttls is for tcp:// URLs", argv[optind]);
	if (nh > 0 || binary || ping)
		die_usage("-H, --subprotocol, --binary and --ping are for "
			  "ws:// and wss:// URLs",
		    NULL);
	return connect_stream(path, argv[optind], profile, starttls);
}
