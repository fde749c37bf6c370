/* SPDX-License-Identifier: ISC */
/*
 * Unit tests for broker/metrics and broker/metrics_http: the exposition
 * with fixed facts (build, configuration state, decisions by verdict and
 * reason, process metrics), its shape (one HELP and TYPE per family, no
 * empty line, no OpenMetrics "# EOF"), label escaping checked by
 * promtool and Python's prometheus_client parser, the process metrics
 * read from /proc, and the scrape endpoint over a Unix socket: routes,
 * methods, bounded heads, the connection cap, CLOEXEC, and the refusal
 * of every address that is not loopback.
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <egress/error.h>
#include <event2/event.h>

#include "broker/broker.h"
#include "broker/metrics.h"
#include "broker/metrics_http.h"

static const struct metrics_process fixed_proc = {
	.cpu_seconds = 1.25,
	.resident_bytes = 4096000,
	.virtual_bytes = 8192000,
	.open_fds = 12,
	.max_fds = 1024,
	.start_time = 1700000000.5,
};

/* An exposition of fixed counters and facts; the caller frees it. */
static char *
fixed_text(int valid, const char *instance)
{
	static const struct metrics_gauge leases[1] = { { "weather", 2 } };
	struct metrics_facts f = {
		.version = "0.1.0",
		.config_valid = valid,
		.config_generation = 4,
		.config_loaded_unix = 1700000100,
		.config_reloads = 3,
		.config_reload_failures = 2,
		.leases = leases,
		.nleases = 1,
		.upstream_max = 32736,
		.log_queued = 5,
		.log_backlogs = 6,
		.poll_hits = 41,
		.poll_us = 2500000,
		.process = &fixed_proc,
	};
	struct metrics *m = metrics_new();
	char *text = NULL;
	size_t len = 0;

	cr_assert(m != NULL);
	metrics_decision(m, instance, 1, NULL, 300);
	metrics_decision(m, instance, 1, "ignored-on-allow", 300);
	metrics_decision(m, instance, 0, "not-granted", 700);
	metrics_decision(m, instance, 0, "policy-unavailable", 700);
	metrics_bytes(m, instance, 100, 7);
	metrics_dns(m, "ok", 1200);
	metrics_upstream_error(m, "timeout");
	metrics_connect(m, 800);
	cr_assert_eq(metrics_format(m, &f, &text, &len), 0);
	cr_assert_eq(strlen(text), len);
	metrics_free(m);
	return text;
}

struct line_case {
	int valid;
	char want[160]; /* one whole line */
};

static struct line_case line_cases[] = {
	{ 1, "egressd_build_info{version=\"0.1.0\"} 1" },
	{ 1, "# TYPE egressd_build_info gauge" },
	{ 1, "egressd_config_valid 1" },
	{ 0, "egressd_config_valid 0" },
	{ 1, "# TYPE egressd_config_valid gauge" },
	{ 1, "egressd_config_generation 4" },
	{ 1,
	    "egressd_config_last_reload_success_timestamp_seconds "
	    "1700000100" },
	{ 1, "egressd_config_reloads_total 3" },
	{ 1, "egressd_config_reload_failures_total 2" },
	{ 1, "# TYPE egressd_config_reload_failures_total counter" },
	{ 1,
	    "egressd_decisions_total{instance=\"weather\",verdict=\"allow\","
	    "reason=\"granted\"} 2" },
	{ 1,
	    "egressd_decisions_total{instance=\"weather\",verdict=\"deny\","
	    "reason=\"not-granted\"} 1" },
	{ 1,
	    "egressd_decisions_total{instance=\"weather\",verdict=\"deny\","
	    "reason=\"policy-unavailable\"} 1" },
	{ 1, "egressd_leases_in_use{instance=\"weather\"} 2" },
	{ 1, "egressd_upstream_connections_max 32736" },
	{ 1, "# TYPE egressd_upstream_connections_max gauge" },
	{ 1, "egressd_log_queued_lines 5" },
	{ 1, "egressd_log_backlogs_total 6" },
	{ 1, "# TYPE egressd_log_backlogs_total counter" },
	{ 1, "egressd_busy_poll_hits_total 41" },
	{ 1, "# TYPE egressd_busy_poll_hits_total counter" },
	{ 1, "egressd_busy_poll_seconds_total 2.50" },
	{ 1, "# TYPE egressd_busy_poll_seconds_total counter" },
	{ 1, "egressd_upstream_errors_total{code=\"timeout\"} 1" },
	{ 1, "egressd_bytes_total{instance=\"weather\",direction=\"out\"} 7" },
	{ 1, "process_cpu_seconds_total 1.25" },
	{ 1, "# TYPE process_cpu_seconds_total counter" },
	{ 1, "process_open_fds 12" },
	{ 1, "process_max_fds 1024" },
	{ 1, "process_resident_memory_bytes 4096000" },
	{ 1, "process_virtual_memory_bytes 8192000" },
	{ 1, "process_start_time_seconds 1700000000.50" },
};

ParameterizedTestParameters(broker_metrics_text, lines)
{
	return cr_make_param_array(struct line_case, line_cases,
	    sizeof(line_cases) / sizeof(line_cases[0]));
}

ParameterizedTest(struct line_case *c, broker_metrics_text, lines)
{
	char *text = fixed_text(c->valid, "weather"), *want;

	cr_assert(asprintf(&want, "\n%s\n", c->want) > 0);
	cr_assert(strstr(text, want) != NULL, "want '%s' in:\n%s", c->want,
	    text);
	free(want);
	free(text);
}

/* Every sample's family was announced by one HELP and one TYPE line. */
Test(broker_metrics_text, shape)
{
	char *text = fixed_text(1, "weather"), *save = NULL, *l, *copy;
	char fam[128], seen[4096] = " ";

	cr_assert(strstr(text, "# EOF") == NULL);
	cr_assert(strstr(text, "\n\n") == NULL, "no empty line");
	cr_assert(text[strlen(text) - 1] == '\n');
	cr_assert(strstr(text, "reason=\"allow\"") == NULL);
	copy = strdup(text);
	for (l = strtok_r(copy, "\n", &save); l != NULL;
	     l = strtok_r(NULL, "\n", &save)) {
		char key[140];

		if (sscanf(l, "# HELP %127s", fam) == 1) {
			(void)snprintf(key, sizeof(key), " %s ", fam);
			cr_assert(strstr(seen, key) == NULL, "two HELP: %s",
			    fam);
			cr_assert(strlen(seen) + strlen(key) < sizeof(seen));
			strcat(seen, key + 1);
			continue;
		}
		if (l[0] == '#')
			continue;
		(void)sscanf(l, "%127[a-z_]", fam);
		(void)snprintf(key, sizeof(key), " %s ", fam);
		if (strstr(seen, key) != NULL)
			continue;
		/* A histogram's _bucket, _sum and _count samples. */
		*strrchr(fam, '_') = '\0';
		(void)snprintf(key, sizeof(key), " %s ", fam);
		cr_assert(strstr(seen, key) != NULL, "no HELP for %s", l);
	}
	free(copy);
	free(text);
}

static int
write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (f == NULL)
		return -1;
	(void)fputs(text, f);
	return fclose(f);
}

/*
 * promtool and prometheus_client read the exposition of an instance
 * whose name needs every escape; the parser gives the name back.
 */
Test(broker_metrics_text, promtool_and_python)
{
	static const char odd[] = "we\"ath\\er\nx";
	char dir[] = "/tmp/metrics-test-XXXXXX", path[64], cmd[1024];
	char *text;

	cr_assert(mkdtemp(dir) != NULL);
	(void)snprintf(path, sizeof(path), "%s/m.txt", dir);
	text = fixed_text(1, odd);
	cr_assert(strstr(text, "instance=\"we\\\"ath\\\\er\\nx\"") != NULL,
	    "%s", text);
	cr_assert_eq(write_file(path, text), 0);
	free(text);
	(void)snprintf(cmd, sizeof(cmd), "promtool check metrics < %s", path);
	// NOLINTNEXTLINE(cert-env33-c): the test runs its own shell command
	cr_assert_eq(system(cmd), 0,
	    "promtool check metrics (install: "
	    "scripts/bootstrap)");
	(void)snprintf(cmd, sizeof(cmd),
	    "/usr/bin/python3 -c '"
	    "import sys\n"
	    "from prometheus_client.parser import "
	    "text_string_to_metric_families as p\n"
	    "fams = {f.name: f for f in p(open(sys.argv[1]).read())}\n"
	    "d = fams[\"egressd_decisions\"]\n"
	    "assert d.type == \"counter\", d.type\n"
	    "s = [x for x in d.samples if x.labels[\"verdict\"] == \"deny\"]\n"
	    "assert len(s) == 2, s\n"
	    "assert s[0].labels[\"instance\"] == \"we\\\"ath\\\\er\\nx\", s\n"
	    "assert fams[\"process_open_fds\"].samples[0].value == 12\n"
	    "assert fams[\"egressd_build_info\"].type == \"gauge\"\n"
	    "' %s",
	    path);
	// NOLINTNEXTLINE(cert-env33-c): the test runs its own shell command
	cr_assert_eq(system(cmd), 0,
	    "prometheus_client parser (install: "
	    "scripts/bootstrap)");
	(void)unlink(path);
	(void)rmdir(dir);
}

Test(broker_metrics_text, process_read)
{
	struct metrics_process p;
	int fd = dup(0);

	cr_assert_eq(metrics_process_read(&p), 0);
	cr_assert(p.open_fds >= 4, "%llu", (unsigned long long)p.open_fds);
	cr_assert(p.resident_bytes > 0);
	cr_assert(p.virtual_bytes >= p.resident_bytes);
	cr_assert(p.max_fds >= p.open_fds);
	cr_assert(p.start_time > 1e9 &&
	    p.start_time <= (double)time(NULL) + 1);
	{
		struct metrics_process q;

		(void)close(fd);
		cr_assert_eq(metrics_process_read(&q), 0);
		cr_assert_eq(q.open_fds + 1, p.open_fds, "one fd closed");
	}
}

/* ---- The scrape endpoint ------------------------------------------------ */

static struct event_base *base;
static struct metrics_http *ep;
static char sdir[] = "/tmp/metrics-http-XXXXXX";
static char spath[128];

static int
render(void *arg, char **ret_text, size_t *ret_len)
{
	const char *s = "egressd_build_info{version=\"t\"} 1\n";

	*ret_text = strdup(s);
	*ret_len = strlen(s);
	return *ret_text != NULL ? 0 : EGRESS_ERR_NOMEM;
}

static void
ep_setup(void)
{
	memcpy(sdir, "/tmp/metrics-http-XXXXXX", sizeof(sdir));
	cr_assert(mkdtemp(sdir) != NULL);
	(void)snprintf(spath, sizeof(spath), "%s/metrics.sock", sdir);
	cr_assert((base = broker_base_new()) != NULL);
	cr_assert_eq(metrics_http_new(base, spath, render, NULL, &ep), 0);
}

static void
ep_teardown(void)
{
	/* Also after tcp_setup(): sdir is then no folder, and stays so. */
	metrics_http_free(ep);
	ep = NULL;
	event_base_free(base);
	(void)rmdir(sdir);
}

static int
client(void)
{
	struct sockaddr_un sun;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	cr_assert(fd >= 0);
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	memcpy(sun.sun_path, spath, strlen(spath) + 1);
	cr_assert_eq(connect(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	return fd;
}

static void
turn(void)
{
	/* A bound on a test that would otherwise hang; not a timing check. */
	struct timeval guard = { 5, 0 };

	(void)event_base_loopexit(base, &guard);
	(void)event_base_loop(base, EVLOOP_ONCE);
}

/* Run the loop until the server closed fd; return what it sent. */
static char *
response(int fd)
{
	static char buf[65536];
	size_t n = 0;
	ssize_t k;
	int i;

	for (i = 0; i < 1000; i++) {
		struct pollfd p = { fd, POLLIN, 0 };

		if (poll(&p, 1, 0) == 1) {
			k = read(fd, buf + n, sizeof(buf) - 1 - n);
			if (k <= 0)
				break;
			n += (size_t)k;
			continue;
		}
		turn();
	}
	buf[n] = '\0';
	(void)close(fd);
	return buf;
}

static char *
ask(const char *req, size_t len)
{
	int fd = client();

	cr_assert_eq(write(fd, req, len), (ssize_t)len);
	return response(fd);
}

struct http_case {
	char req[128];
	char status[64];
	char want[96]; /* a substring of the response */
	char unwanted[64];
};

static struct http_case http_cases[] = {
	{ "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1 200 OK\r\n",
	    "\r\n\r\negressd_build_info{version=\"t\"} 1\n", "" },
	{ "GET /metrics HTTP/1.1\r\n\r\n", "HTTP/1.1 200 OK\r\n",
	    "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n", "" },
	{ "GET /metrics?x=1 HTTP/1.0\n\n", "HTTP/1.1 200 OK\r\n",
	    "Connection: close\r\n", "" },
	{ "HEAD /metrics HTTP/1.1\r\n\r\n", "HTTP/1.1 200 OK\r\n",
	    "Content-Length: 34\r\n", "egressd_build_info" },
	{ "GET / HTTP/1.1\r\n\r\n", "HTTP/1.1 404 Not Found\r\n", "", "" },
	{ "GET /metrics/x HTTP/1.1\r\n\r\n", "HTTP/1.1 404", "", "" },
	{ "POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
	    "HTTP/1.1 405 Method Not Allowed\r\n", "Allow: GET, HEAD\r\n",
	    "egressd_" },
	{ "DELETE /metrics HTTP/1.1\r\n\r\n", "HTTP/1.1 405", "", "" },
	{ "get /metrics HTTP/1.1\r\n\r\n", "HTTP/1.1 400", "", "" },
	{ "GET /metrics HTTP/2.0\r\n\r\n", "HTTP/1.1 400", "", "" },
	{ "GET metrics HTTP/1.1\r\n\r\n", "HTTP/1.1 400", "", "" },
	{ "GET\r\n\r\n", "HTTP/1.1 400", "", "" },
};

ParameterizedTestParameters(broker_metrics_http, routes)
{
	return cr_make_param_array(struct http_case, http_cases,
	    sizeof(http_cases) / sizeof(http_cases[0]));
}

ParameterizedTest(struct http_case *c, broker_metrics_http, routes,
    .init = ep_setup, .fini = ep_teardown)
{
	char *r = ask(c->req, strlen(c->req));

	cr_assert(strncmp(r, c->status, strlen(c->status)) == 0, "'%s': %s",
	    c->req, r);
	cr_assert(strstr(r, c->want) != NULL, "'%s': %s", c->req, r);
	if (c->unwanted[0] != '\0')
		cr_assert(strstr(r, c->unwanted) == NULL, "'%s': %s", c->req,
		    r);
}

Test(broker_metrics_http, head_too_large, .init = ep_setup,
    .fini = ep_teardown)
{
	static char req[METRICS_HTTP_HEAD_MAX + 64];
	size_t n;

	n = (size_t)snprintf(req, sizeof(req), "GET /metrics HTTP/1.1\r\n");
	memset(req + n, 'a', sizeof(req) - n - 1);
	cr_assert(strncmp(ask(req, sizeof(req) - 1), "HTTP/1.1 431", 12) == 0);
}

/* At the cap the next connection waits in the backlog until one closes. */
Test(broker_metrics_http, connection_cap, .init = ep_setup,
    .fini = ep_teardown)
{
	static const char req[] = "GET /metrics HTTP/1.1\r\n\r\n";
	int idle[METRICS_HTTP_CONNS_MAX], fd, i;
	struct pollfd p;

	for (i = 0; i < METRICS_HTTP_CONNS_MAX; i++)
		idle[i] = client();
	fd = client();
	cr_assert_eq(write(fd, req, sizeof(req) - 1),
	    (ssize_t)sizeof(req) - 1);
	/* Everything ready has run: the accepts and nothing more. */
	for (i = 0; i < 20; i++)
		(void)event_base_loop(base, EVLOOP_NONBLOCK);
	p = (struct pollfd){ fd, POLLIN, 0 };
	cr_assert_eq(poll(&p, 1, 0), 0, "served past the cap");
	(void)close(idle[0]);
	cr_assert(strncmp(response(fd), "HTTP/1.1 200 OK", 15) == 0);
	for (i = 1; i < METRICS_HTTP_CONNS_MAX; i++)
		(void)close(idle[i]);
}

/* Every descriptor the endpoint opened is CLOEXEC; the socket is 0666. */
Test(broker_metrics_http, cloexec)
{
	struct event_base *b = broker_base_new();
	struct metrics_http *h = NULL;
	char dir[] = "/tmp/metrics-fd-XXXXXX", path[64];
	int before[1024] = { 0 }, fd, nnew = 0;
	struct stat st;

	cr_assert(b != NULL && mkdtemp(dir) != NULL);
	(void)snprintf(path, sizeof(path), "%s/m.sock", dir);
	for (fd = 0; fd < 1024; fd++)
		before[fd] = fcntl(fd, F_GETFD) >= 0;
	cr_assert_eq(metrics_http_new(b, path, render, NULL, &h), 0);
	for (fd = 0; fd < 1024; fd++) {
		int fl = fcntl(fd, F_GETFD);

		if (before[fd] || fl < 0)
			continue;
		nnew++;
		cr_assert(fl & FD_CLOEXEC, "fd %d without CLOEXEC", fd);
	}
	cr_assert(nnew >= 1);
	cr_assert_eq(stat(path, &st), 0);
	cr_assert(S_ISSOCK(st.st_mode) && (st.st_mode & 0777) == 0666);
	metrics_http_free(h);
	cr_assert(stat(path, &st) != 0 && errno == ENOENT, "unlinked");
	event_base_free(b);
	(void)rmdir(dir);
}

struct listen_case {
	char listen[64];
	int err;
};

static struct listen_case listen_cases[] = {
	{ "0.0.0.0:9464", EGRESS_ERR_INVALID },
	{ "10.0.0.1:9464", EGRESS_ERR_INVALID },
	{ "[::]:9464", EGRESS_ERR_INVALID },
	{ "[::ffff:127.0.0.1]:9464", EGRESS_ERR_INVALID },
	{ "localhost:9464", EGRESS_ERR_INVALID },
	{ "127.0.0.1", EGRESS_ERR_INVALID },
	{ "127.0.0.1:0", EGRESS_ERR_INVALID },
	{ "127.0.0.1:65536", EGRESS_ERR_INVALID },
	{ "metrics.sock", EGRESS_ERR_INVALID },
	{ "", EGRESS_ERR_INVALID },
};

ParameterizedTestParameters(broker_metrics_http, refused)
{
	return cr_make_param_array(struct listen_case, listen_cases,
	    sizeof(listen_cases) / sizeof(listen_cases[0]));
}

ParameterizedTest(struct listen_case *c, broker_metrics_http, refused)
{
	struct event_base *b = broker_base_new();
	struct metrics_http *h = NULL;

	cr_assert_eq(metrics_http_new(b, c->listen, render, NULL, &h), c->err,
	    "'%s'", c->listen);
	cr_assert(h == NULL);
	event_base_free(b);
}

/* A loopback TCP port the kernel picked free, then released. */
static int
free_port(void)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sin);
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	sin.sin_addr.s_addr = htonl(0x7f000001);
	cr_assert(s >= 0 &&
	    bind(s, (struct sockaddr *)&sin, sizeof(sin)) == 0);
	cr_assert_eq(getsockname(s, (struct sockaddr *)&sin, &sl), 0);
	(void)close(s);
	return ntohs(sin.sin_port);
}

Test(broker_metrics_http, loopback_tcp)
{
	struct event_base *b = broker_base_new();
	struct metrics_http *h = NULL;
	char listen[32];

	(void)snprintf(listen, sizeof(listen), "127.0.0.1:%d", free_port());
	cr_assert_eq(metrics_http_new(b, listen, render, NULL, &h), 0);
	cr_assert_str_eq(metrics_http_listen(h), listen);
	metrics_http_free(h);
	event_base_free(b);
}

/* ---- Deadlines and the Host check --------------------------------------- */

/* Run the loop for about ms milliseconds (a step of a bounded wait). */
static void
run_for(unsigned ms)
{
	struct timeval tv = { 0, (suseconds_t)ms * 1000 };

	(void)event_base_loopexit(base, &tv);
	(void)event_base_dispatch(base);
}

/* Has the server closed its end of fd? (A send to a Unix socket whose
 * peer is gone fails with EPIPE.) */
static int
peer_closed(int fd)
{
	return send(fd, "a", 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 &&
	    errno == EPIPE;
}

/*
 * A head dripped a byte at a time never finishes: it is closed at its
 * deadline from the accept, however often bytes arrive (an inactivity
 * timeout alone would hold it, and 8 such would lock the endpoint).
 */
Test(broker_metrics_http, a_dripped_head_is_closed_at_its_deadline,
    .init = ep_setup, .fini = ep_teardown)
{
	static const char start[] = "GET /metrics HTTP/1.1\r\nX-Slow: ";
	int fd = client(), i;

	metrics_http_set_deadline_ms(ep, 200);
	cr_assert_eq(write(fd, start, sizeof(start) - 1),
	    (ssize_t)sizeof(start) - 1);
	/* A bound of 10 s on the wait, twice the inactivity timeout. */
	for (i = 0; i < 500 && !peer_closed(fd); i++)
		run_for(20);
	cr_assert_lt(i, 500, "the dripping connection is still open");
	(void)close(fd);
}

static int
render_big(void *arg, char **ret_text, size_t *ret_len)
{
	size_t n = 16u << 20;

	if ((*ret_text = malloc(n)) == NULL)
		return EGRESS_ERR_NOMEM;
	memset(*ret_text, '#', n);
	*ret_len = n;
	return 0;
}

/* A client that reads its response a trickle at a time (each read
 * enough for the server's writes to go on) does not hold its connection
 * past the response's deadline. */
Test(broker_metrics_http, a_slowly_read_response_is_closed_at_its_deadline,
    .init = ep_setup, .fini = ep_teardown)
{
	static const char req[] = "GET /metrics HTTP/1.1\r\n\r\n";
	struct metrics_http *big = NULL;
	char path[160], buf[512];
	int fd, i;
	struct sockaddr_un sun;

	(void)snprintf(path, sizeof(path), "%s/big.sock", sdir);
	cr_assert_eq(metrics_http_new(base, path, render_big, NULL, &big), 0);
	metrics_http_set_deadline_ms(big, 200);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	memcpy(sun.sun_path, path, strlen(path) + 1);
	cr_assert_eq(connect(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	cr_assert_eq(write(fd, req, sizeof(req) - 1),
	    (ssize_t)sizeof(req) - 1);
	for (i = 0; i < 500 && !peer_closed(fd); i++) {
		(void)recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		run_for(20);
	}
	cr_assert_lt(i, 500, "the slowly read response's connection is open");
	(void)close(fd);
	metrics_http_free(big);
}

/* The endpoint on a loopback TCP port, as ep_setup() makes it on a path. */
static int tport;

static void
tcp_setup(void)
{
	char listen[32];

	cr_assert((base = broker_base_new()) != NULL);
	tport = free_port();
	(void)snprintf(listen, sizeof(listen), "127.0.0.1:%d", tport);
	cr_assert_eq(metrics_http_new(base, listen, render, NULL, &ep), 0);
}

static char *
tcp_ask_n(const char *req, size_t n)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	sin.sin_addr.s_addr = htonl(0x7f000001);
	sin.sin_port = htons((uint16_t)tport);
	cr_assert(fd >= 0);
	cr_assert_eq(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	cr_assert_eq(write(fd, req, n), (ssize_t)n);
	return response(fd);
}

static char *
tcp_ask(const char *req)
{
	return tcp_ask_n(req, strlen(req));
}

/*
 * On a TCP port only a loopback Host is served: a web page whose name
 * was rebound to 127.0.0.1 sends its own name, and a browser on the host
 * would otherwise hand it the metrics.
 */
Test(broker_metrics_http, a_host_that_is_not_loopback_is_refused,
    .init = tcp_setup, .fini = ep_teardown)
{
	static const struct {
		const char *host; /* the request's Host lines */
		const char *status;
	} cases[] = {
		{ "Host: attacker.example\r\n", "HTTP/1.1 421" },
		{ "Host: attacker.example:9464\r\n", "HTTP/1.1 421" },
		{ "Host: 127.evil.example\r\n", "HTTP/1.1 421" },
		{ "Host: 10.0.0.1:9464\r\n", "HTTP/1.1 421" },
		{ "Host: [::2]:9464\r\n", "HTTP/1.1 421" },
		{ "Host: 127.0.0.1\r\nHost: attacker.example\r\n",
		    "HTTP/1.1 421" },
		{ "host:\r\n", "HTTP/1.1 421" },
		/* A Host this look would not see as one. */
		{ "Host : attacker.example\r\n", "HTTP/1.1 421" },
		{ "X-A: a\r\n Host: attacker.example\r\n", "HTTP/1.1 421" },
		{ "Host: 127.0.0.1:9464\r\n", "HTTP/1.1 200" },
		{ "Host: 127.1.2.3\r\n", "HTTP/1.1 200" },
		{ "Host: localhost:9464\r\n", "HTTP/1.1 200" },
		{ "HOST: LocalHost\r\n", "HTTP/1.1 200" },
		{ "Host: [::1]:9464\r\n", "HTTP/1.1 200" },
		{ "", "HTTP/1.1 200" },
	};
	char req[256];
	const char *r;
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		(void)snprintf(req, sizeof(req),
		    "GET /metrics HTTP/1.1\r\n%s\r\n", cases[i].host);
		r = tcp_ask(req);
		cr_assert(strncmp(r, cases[i].status,
			      strlen(cases[i].status)) == 0,
		    "'%s': %s", cases[i].host, r);
	}
	/* A NUL would end the look before a Host behind it. */
	static const char nul[] = "GET /metrics HTTP/1.1\r\nX-A: a\0b\r\n"
				  "Host: attacker.example\r\n\r\n";
	r = tcp_ask_n(nul, sizeof(nul) - 1);
	cr_assert(strncmp(r, "HTTP/1.1 400", 12) == 0, "%s", r);
}
