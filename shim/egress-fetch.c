/* SPDX-License-Identifier: ISC */
/*
 * egress-fetch: a curl-like client of egressd over libegress. It sends one
 * request through an instance socket (--socket PATH, or the inherited
 * connection named by EGRESS_FD), streams the response body to stdout or
 * a file, and with -L follows redirects itself: each hop is a new request
 * on the same broker connection, so it passes the whole policy again.
 * curl's -s, -S, -v, -f, -w and -m mean what they mean there. Exit
 * status: 0 when a response arrived (whatever its status, unless -f),
 * 10..19 for the guest-visible error codes (docs/shim.md), 22 for an HTTP
 * status of 400 or more under -f, 2 for usage errors, 1 for any other
 * local failure. Errors print "egress-fetch: CODE: message" on stderr,
 * with the broker's masked message, unless -s.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <sys/stat.h>

#include <egress/egress.h>

#include "shim/tool.h"
#include "shim/shim.h"
#include "shim/url.h"

#define EXIT_HTTP_FAIL 22 /* curl's: -f and a status of 400 or more */
#define BODY_MAX       (256UL * 1024 * 1024) /* request body in memory */
#define DRAIN_MAX      (64 * 1024)	     /* redirect body read, at most */

struct opts {
	const char *socket;
	const char *method;
	struct egress_header headers[EGRESS_HEADERS_MAX];
	size_t nheaders;
	char *body;
	size_t body_len;
	int has_body;
	int include;
	const char *output;
	int follow;
	long max_redirs;
	uint64_t timeout_ms;
	const char *url;
	int verbose;
	int fail;
	const char *write_out;
	const char *profile; /* --profile: a tls profile, or NULL */
};

/* -s without -S: error messages are not printed (the status still says). */
static int quiet;

static void
print_usage(FILE *f)
{
	fprintf(f,
	    "usage: egress-fetch --socket PATH [-X METHOD] "
	    "[-H 'Name: value']...\n"
	    "           [-d DATA | --data-binary @FILE] [-i] [-o FILE] "
	    "[-L [--max-redirs N]]\n"
	    "           [-m SECONDS] [-s [-S]] [-v] [-f] [-w FORMAT] "
	    "[--profile NAME] URL\n"
	    "       egress-fetch --help | --version\n"
	    "       (EGRESS_FD=N may replace --socket)\n");
}

static void
usage(void)
{
	print_usage(stderr);
	exit(TOOL_EXIT_USAGE);
}

static void
die_usage(const char *what, const char *arg)
{
	fprintf(stderr, "egress-fetch: %s%s%s\n", what, arg ? ": " : "",
	    arg ? arg : "");
	exit(TOOL_EXIT_USAGE);
}

static void
die_err(int err, const char *msg)
{
	const char *code = tool_err_text(err, msg, &msg);

	if (!quiet)
		fprintf(stderr, "egress-fetch: %s: %s\n", code, msg);
	exit(tool_exit_code(err));
}

static void
die_local(const char *what, const char *detail)
{
	if (!quiet)
		fprintf(stderr, "egress-fetch: error: %s%s%s\n", what,
		    detail ? ": " : "", detail ? detail : "");
	exit(TOOL_EXIT_LOCAL);
}

static void
add_header(struct opts *o, const char *arg)
{
	const char *colon = strchr(arg, ':');
	const char *v;

	if (colon == NULL || colon == arg)
		die_usage("-H wants 'Name: value'", arg);
	if (o->nheaders >= EGRESS_HEADERS_MAX)
		die_usage("too many -H options", NULL);
	v = colon + 1;
	while (*v == ' ' || *v == '\t')
		v++;
	o->headers[o->nheaders].name = arg;
	o->headers[o->nheaders].name_len = (size_t)(colon - arg);
	o->headers[o->nheaders].value = v;
	o->headers[o->nheaders].value_len = strlen(v);
	o->nheaders++;
}

static void
append_body(struct opts *o, const char *p, size_t n, int sep)
{
	size_t need = o->body_len + n + (sep ? 1 : 0);
	char *b;

	if (need > BODY_MAX)
		die_local("request body too large", NULL);
	b = realloc(o->body, need + 1);
	if (b == NULL)
		die_local("out of memory", NULL);
	o->body = b;
	if (sep)
		o->body[o->body_len++] = '&';
	memcpy(o->body + o->body_len, p, n);
	o->body_len += n;
	o->has_body = 1;
}

static void
read_body_file(struct opts *o, const char *path)
{
	char buf[65536];
	ssize_t n;
	int fd;

	if (strcmp(path, "-") == 0)
		fd = STDIN_FILENO;
	else if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		die_local(path, strerror(errno));
	o->has_body = 1;
	for (;;) {
		n = read(fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			die_local(path, strerror(errno));
		if (n == 0)
			break;
		append_body(o, buf, (size_t)n, 0);
	}
	if (fd != STDIN_FILENO)
		(void)close(fd);
}

static long
parse_long(const char *s, long min, long max, const char *what)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < min || v > max)
		die_usage(what, s);
	return v;
}

static uint64_t
parse_seconds(const char *s)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno != 0 || end == s || *end != '\0' || !(v > 0) ||
	    v > 86400.0 * 365)
		die_usage("-m/--max-time wants a positive number of seconds",
		    s);
	return (uint64_t)(v * 1000.0 + 0.999);
}

static void check_args(int argc, char **argv, struct opts *o);

static void
parse_args(int argc, char **argv, struct opts *o)
{
	enum {
		OPT_SOCKET = 256,
		OPT_DATA_BINARY,
		OPT_MAX_REDIRS,
		OPT_TIMEOUT,
		OPT_VERSION,
		OPT_PROFILE
	};
	static const struct option longopts[] = {
		{ "socket", required_argument, NULL, OPT_SOCKET },
		{ "profile", required_argument, NULL, OPT_PROFILE },
		{ "request", required_argument, NULL, 'X' },
		{ "header", required_argument, NULL, 'H' },
		{ "data", required_argument, NULL, 'd' },
		{ "data-binary", required_argument, NULL, OPT_DATA_BINARY },
		{ "include", no_argument, NULL, 'i' },
		{ "output", required_argument, NULL, 'o' },
		{ "location", no_argument, NULL, 'L' },
		{ "max-redirs", required_argument, NULL, OPT_MAX_REDIRS },
		{ "timeout", required_argument, NULL, OPT_TIMEOUT },
		{ "max-time", required_argument, NULL, 'm' },
		{ "silent", no_argument, NULL, 's' },
		{ "show-error", no_argument, NULL, 'S' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "fail", no_argument, NULL, 'f' },
		{ "write-out", required_argument, NULL, 'w' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	int ch, data_kind = 0, silent = 0, show_error = 0;

	memset(o, 0, sizeof(*o));
	o->max_redirs = 10;
	while ((ch = getopt_long(argc, argv, "X:H:d:io:Lhm:sSvfw:V", longopts,
		    NULL)) != -1) {
		switch (ch) {
		case 'h':
			print_usage(stdout);
			exit(0);
		case 'V':
			printf("egress-fetch %s\n", EGRESSD_VERSION);
			exit(0);
		case 's':
			silent = 1;
			break;
		case 'S':
			show_error = 1;
			break;
		case 'v':
			o->verbose = 1;
			break;
		case 'f':
			o->fail = 1;
			break;
		case 'w':
			o->write_out = optarg;
			break;
		case OPT_SOCKET:
			o->socket = optarg;
			break;
		case OPT_PROFILE:
			o->profile = optarg;
			break;
		case 'X':
			o->method = optarg;
			break;
		case 'H':
			add_header(o, optarg);
			break;
		case 'd':
			if (data_kind == 2)
				die_usage("-d and --data-binary exclude each "
					  "other",
				    NULL);
			append_body(o, optarg, strlen(optarg), data_kind == 1);
			data_kind = 1;
			break;
		case OPT_DATA_BINARY:
			if (data_kind != 0)
				die_usage("one -d or --data-binary only",
				    NULL);
			data_kind = 2;
			if (optarg[0] == '@')
				read_body_file(o, optarg + 1);
			else
				append_body(o, optarg, strlen(optarg), 0);
			break;
		case 'i':
			o->include = 1;
			break;
		case 'o':
			o->output = optarg;
			break;
		case 'L':
			o->follow = 1;
			break;
		case OPT_MAX_REDIRS:
			o->max_redirs = parse_long(optarg, 0, 1000,
			    "--max-redirs wants 0..1000");
			break;
		case 'm':
		case OPT_TIMEOUT:
			o->timeout_ms = parse_seconds(optarg);
			break;
		default:
			usage();
		}
	}
	quiet = silent && !show_error;
	check_args(argc, argv, o);
}

/* The URL and what the options left unsaid. */
static void
check_args(int argc, char **argv, struct opts *o)
{
	if (optind == argc)
		die_usage("missing URL", NULL);
	if (optind < argc - 1)
		die_usage("unexpected argument", argv[optind + 1]);
	o->url = argv[optind];
	if (o->method == NULL)
		o->method = o->has_body ? "POST" : "GET";
	if (o->socket == NULL && getenv(EGRESS_FD_ENV) == NULL)
		die_usage("--socket PATH (or EGRESS_FD) is required", NULL);
}

static int
has_header(const struct egress_header *h, size_t n, const char *name)
{
	size_t i, len = strlen(name);

	for (i = 0; i < n; i++)
		if (h[i].name_len == len &&
		    strncasecmp(h[i].name, name, len) == 0)
			return 1;
	return 0;
}

static const char *
find_header(const struct egress_header *h, size_t n, const char *name)
{
	size_t i, len = strlen(name);

	for (i = 0; i < n; i++)
		if (h[i].name_len == len &&
		    strncasecmp(h[i].name, name, len) == 0)
			return h[i].value;
	return NULL;
}

static void
write_all(int fd, const void *p, size_t n)
{
	const char *s = p;
	ssize_t w;

	while (n > 0) {
		w = write(fd, s, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			die_local("write", strerror(errno));
		s += w;
		n -= (size_t)w;
	}
}

/* The reason phrase of a status (RFC 9110, 15); the broker relays
 * the status code only, so the phrase is the standard one. */
static const char *
reason_phrase(int status)
{
	static const struct {
		int code;
		const char *phrase;
	} t[] = {
		{ 100, "Continue" },
		{ 101, "Switching Protocols" },
		{ 200, "OK" },
		{ 201, "Created" },
		{ 202, "Accepted" },
		{ 203, "Non-Authoritative Information" },
		{ 204, "No Content" },
		{ 205, "Reset Content" },
		{ 206, "Partial Content" },
		{ 300, "Multiple Choices" },
		{ 301, "Moved Permanently" },
		{ 302, "Found" },
		{ 303, "See Other" },
		{ 304, "Not Modified" },
		{ 307, "Temporary Redirect" },
		{ 308, "Permanent Redirect" },
		{ 400, "Bad Request" },
		{ 401, "Unauthorized" },
		{ 402, "Payment Required" },
		{ 403, "Forbidden" },
		{ 404, "Not Found" },
		{ 405, "Method Not Allowed" },
		{ 406, "Not Acceptable" },
		{ 408, "Request Timeout" },
		{ 409, "Conflict" },
		{ 410, "Gone" },
		{ 411, "Length Required" },
		{ 412, "Precondition Failed" },
		{ 413, "Content Too Large" },
		{ 414, "URI Too Long" },
		{ 415, "Unsupported Media Type" },
		{ 416, "Range Not Satisfiable" },
		{ 417, "Expectation Failed" },
		{ 421, "Misdirected Request" },
		{ 422, "Unprocessable Content" },
		{ 426, "Upgrade Required" },
		{ 428, "Precondition Required" },
		{ 429, "Too Many Requests" },
		{ 431, "Request Header Fields Too Large" },
		{ 500, "Internal Server Error" },
		{ 501, "Not Implemented" },
		{ 502, "Bad Gateway" },
		{ 503, "Service Unavailable" },
		{ 504, "Gateway Timeout" },
		{ 505, "HTTP Version Not Supported" },
	};
	size_t i;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (t[i].code == status)
			return t[i].phrase;
	return "";
}

/* Write the head, each line prefixed with prefix ("" for -i, "< " for
 * -v on stderr). */
static void
print_head(int fd, const char *prefix, int status,
    const struct egress_header *h, size_t n)
{
	const char *rp = reason_phrase(status);
	const char *eol = prefix[0] ? "\n" : "\r\n";
	char line[128];
	size_t i;
	int len;

	len = snprintf(line, sizeof(line), "%sHTTP/1.1 %d%s%s%s", prefix,
	    status, rp[0] ? " " : "", rp, eol);
	write_all(fd, line, (size_t)len);
	for (i = 0; i < n; i++) {
		write_all(fd, prefix, strlen(prefix));
		write_all(fd, h[i].name, h[i].name_len);
		write_all(fd, ": ", 2);
		write_all(fd, h[i].value, h[i].value_len);
		write_all(fd, eol, strlen(eol));
	}
	write_all(fd, prefix, strlen(prefix));
	write_all(fd, eol, strlen(eol));
}

/* -v: the request head as handed to the broker, "> " lines on stderr. */
static void
print_request(const struct egress_request_head *h)
{
	size_t i;

	fprintf(stderr, "> %s %s HTTP/1.1\n> Host: %s\n", h->method, h->path,
	    h->authority);
	for (i = 0; i < h->nheaders; i++)
		fprintf(stderr, "> %.*s: %.*s\n", (int)h->headers[i].name_len,
		    h->headers[i].name, (int)h->headers[i].value_len,
		    h->headers[i].value);
	fprintf(stderr, ">\n");
}

/*
 * -w FORMAT, after the body: %{http_code}, %{url_effective},
 * %{num_redirects}, %% and the escapes \n, \t, \r; any other %{...}
 * is printed as is.
 */
static void
write_out(const char *f, int status, const char *url, long redirs)
{
	for (; *f; f++) {
		if (*f == '\\' &&
		    (f[1] == 'n' || f[1] == 't' || f[1] == 'r')) {
			f++;
			putchar(*f == 'n' ? '\n' : *f == 't' ? '\t' : '\r');
		} else if (*f == '%' && f[1] == '%') {
			f++;
			putchar('%');
		} else if (strncmp(f, "%{http_code}", 12) == 0) {
			printf("%03d", status);
			f += 11;
		} else if (strncmp(f, "%{response_code}", 16) == 0) {
			printf("%03d", status);
			f += 15;
		} else if (strncmp(f, "%{url_effective}", 16) == 0) {
			fputs(url, stdout);
			f += 15;
		} else if (strncmp(f, "%{num_redirects}", 16) == 0) {
			printf("%ld", redirs);
			f += 15;
		} else
			putchar(*f);
	}
	(void)fflush(stdout);
}

static int
is_redirect(int status)
{
	return status == 301 || status == 302 || status == 303 ||
	    status == 307 || status == 308;
}

/* The state of one hop: what to send. */
struct hop {
	char *url;
	const char *method;
	int send_body;
	int same_origin; /* user headers naming credentials kept */
};

/*
 * Build the header list of a hop: the user's, minus credentials and Host
 * after an origin change, minus the body's headers when the body was
 * dropped, plus Content-Length and a default Content-Type for a body.
 */
static size_t
hop_headers(const struct opts *o, const struct hop *h,
    struct egress_header *out, char *clen, size_t clen_size)
{
	static const char *const cred[] = {
		"authorization",
		"cookie",
		"proxy-authorization",
		"host",
	};
	static const char *const bodyhdr[] = {
		"content-type",
		"content-length",
		"content-encoding",
	};
	size_t i, j, n = 0;
	int drop;

	for (i = 0; i < o->nheaders; i++) {
		drop = 0;
		for (j = 0; !h->same_origin && j < 4; j++)
			drop |= has_header(&o->headers[i], 1, cred[j]);
		for (j = 0; !h->send_body && o->has_body && j < 3; j++)
			drop |= has_header(&o->headers[i], 1, bodyhdr[j]);
		if (!drop && n < EGRESS_HEADERS_MAX)
			out[n++] = o->headers[i];
	}
	if (h->send_body && n + 2 <= EGRESS_HEADERS_MAX) {
		if (!has_header(out, n, "content-length")) {
			(void)snprintf(clen, clen_size, "%zu", o->body_len);
			out[n++] = (struct egress_header){ "Content-Length",
				14, clen, strlen(clen) };
		}
		if (!has_header(out, n, "content-type"))
			out[n++] = (struct egress_header){ "Content-Type", 12,
				"application/x-www-form-urlencoded", 33 };
	}
	return n;
}

static int
origin_eq(const struct url *a, const struct url *b)
{
	return strcmp(a->scheme, b->scheme) == 0 &&
	    strcasecmp(a->authority, b->authority) == 0;
}

/* Connect to the broker: --socket PATH, or the environment's. */
static struct egress_client *
connect_broker(const struct opts *o)
{
	struct egress_client *c = NULL;
	struct stat st;
	int rv;

	if (o->socket != NULL) {
		if (stat(o->socket, &st) != 0 && errno == ENOENT) {
			if (!quiet)
				fprintf(stderr,
				    "egress-fetch: unavailable: %s: "
				    "the socket does not exist (is egressd "
				    "running, and is the instance in its "
				    "configuration?)\n",
				    o->socket);
			exit(tool_exit_code(EGRESS_ERR_UNAVAILABLE));
		}
		if (stat(o->socket, &st) == 0 && !S_ISSOCK(st.st_mode)) {
			if (!quiet)
				fprintf(stderr,
				    "egress-fetch: unavailable: %s: "
				    "not a socket\n",
				    o->socket);
			exit(tool_exit_code(EGRESS_ERR_UNAVAILABLE));
		}
		rv = egress_client_connect(o->socket, &c);
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

/* With -v, the response trailers on stderr ("< Name: value"). */
static void
print_trailers(struct egress_request *req)
{
	const struct egress_header *t;
	size_t i, n;

	if ((t = egress_response_trailers(req, &n)) == NULL)
		return;
	for (i = 0; i < n; i++)
		fprintf(stderr, "< %.*s: %.*s\n", (int)t[i].name_len,
		    t[i].name, (int)t[i].value_len, t[i].value);
}

/* The final response: -f refuses a 4xx/5xx; else the body to out_fd,
 * the trailers with -v, and -w's report. */
static void
deliver(const struct opts *o, struct egress_request *req, int out_fd,
    int status, const char *url, long redirs)
{
	static char buf[65536];
	int rv;

	if (o->fail && status >= 400) {
		if (!quiet)
			fprintf(stderr,
			    "egress-fetch: the server returned HTTP "
			    "%d%s%s\n",
			    status, reason_phrase(status)[0] ? " " : "",
			    reason_phrase(status));
		if (o->write_out != NULL)
			write_out(o->write_out, status, url, redirs);
		exit(EXIT_HTTP_FAIL);
	}
	for (;;) {
		rv = egress_response_read(req, buf, sizeof(buf), 0);
		if (rv < 0)
			die_err(rv, egress_request_message(req));
		if (rv == 0)
			break;
		write_all(out_fd, buf, (size_t)rv);
	}
	if (o->verbose)
		print_trailers(req);
	if (o->write_out != NULL)
		write_out(o->write_out, status, url, redirs);
}

/* Start one request of the fetch, under --profile when given. */
static int
start_request(struct egress_client *c, const struct egress_request_head *h,
    const struct opts *o, struct egress_request **ret)
{
	return egress_request_start_profile(c, h, o->profile, NULL, NULL, ret);
}

int
main(int argc, char **argv)
{
	static struct egress_header hdrs[EGRESS_HEADERS_MAX];
	static char buf[65536];
	struct egress_client *c;
	struct egress_request *req;
	struct egress_request_head head;
	const struct egress_header *rh;
	const char *loc;
	struct url u, first;
	struct opts o;
	struct hop h;
	char clen[32], *next;
	uint64_t deadline = 0, now;
	size_t nrh, drained;
	long redirs = 0;
	int rv, out_fd = STDOUT_FILENO, status;

	parse_args(argc, argv, &o);
	if (url_parse(o.url, &first) != 0)
		die_usage("not an absolute http(s) URL", o.url);
	if (o.timeout_ms > 0)
		deadline = shim_now_ms() + o.timeout_ms;
	c = connect_broker(&o);
	if (o.output != NULL) {
		out_fd = open(o.output,
		    O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
		if (out_fd < 0)
			die_local(o.output, strerror(errno));
	}

	h.url = strdup(o.url);
	if (h.url == NULL)
		die_local("out of memory", NULL);
	h.method = o.method;
	h.send_body = o.has_body;
	h.same_origin = 1;
	u = first;
	for (;;) {
		memset(&head, 0, sizeof(head));
		head.method = h.method;
		head.scheme = u.scheme;
		head.authority = u.authority;
		head.path = u.target;
		head.headers = hdrs;
		head.nheaders = hop_headers(&o, &h, hdrs, clen, sizeof(clen));
		if (deadline != 0) {
			now = shim_now_ms();
			if (now >= deadline)
				die_err(EGRESS_ERR_TIMEOUT, NULL);
			head.timeouts.total_ms = (uint32_t)(deadline - now >
				    UINT32_MAX ?
				UINT32_MAX :
				deadline - now);
		}
		if (o.verbose)
			print_request(&head);
		rv = start_request(c, &head, &o, &req);
		if (rv < 0)
			die_err(rv, NULL);
		if (h.send_body && o.body_len > 0 &&
		    (rv = egress_request_write(req, o.body, o.body_len, 0)) <
			0)
			die_err(rv, egress_request_message(req));
		rv = egress_request_finish(req, NULL, 0);
		if (rv < 0)
			die_err(rv, egress_request_message(req));
		status = egress_response_wait(req, 0);
		if (status < 0)
			die_err(status, egress_request_message(req));
		rh = egress_response_headers(req, &nrh);
		loc = find_header(rh, nrh, "location");
		if (o.verbose)
			print_head(STDERR_FILENO, "< ", status, rh, nrh);
		if (o.include)
			print_head(out_fd, "", status, rh, nrh);
		if (!o.follow || !is_redirect(status) || loc == NULL)
			break;

		/* Chase it: a new request for the resolved Location. */
		if (redirs >= o.max_redirs) {
			if (!quiet)
				fprintf(stderr,
				    "egress-fetch: error: maximum "
				    "(%ld) redirects followed\n",
				    o.max_redirs);
			exit(TOOL_EXIT_LOCAL);
		}
		redirs++;
		if (url_resolve(h.url, loc, &next) != 0)
			die_local("redirect with an invalid Location", NULL);
		for (drained = 0; drained < DRAIN_MAX; drained += (size_t)rv) {
			rv = egress_response_read(req, buf, sizeof(buf), 0);
			if (rv <= 0)
				break;
		}
		egress_request_free(req);
		free(h.url);
		h.url = next;
		if (u.scheme != first.scheme)
			url_done(&u);
		{
			struct url nu;

			if (url_parse(h.url, &nu) != 0)
				die_local("redirect to a URL without an "
					  "authority",
				    NULL);
			h.same_origin = h.same_origin &&
			    origin_eq(&first, &nu);
			u = nu;
		}
		if (status != 307 && status != 308 &&
		    strcmp(h.method, "GET") != 0 &&
		    strcmp(h.method, "HEAD") != 0) {
			h.method = "GET";
			h.send_body = 0;
		}
	}

	deliver(&o, req, out_fd, status, h.url, redirs);
	if (out_fd != STDOUT_FILENO && close(out_fd) != 0)
		die_local(o.output, strerror(errno));
	egress_request_free(req);
	egress_client_free(c);
	free(h.url);
	if (u.scheme != first.scheme)
		url_done(&u);
	url_done(&first);
	return 0;
}
