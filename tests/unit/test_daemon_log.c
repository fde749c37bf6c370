/* SPDX-License-Identifier: ISC */
/*
 * Unit tests for broker/log: the bounding of guest-controlled strings
 * (printable ASCII kept, every other byte as \xNN, cut at LOG_STR_MAX on
 * a character boundary with the truncation marker), and the two request
 * events written to a pipe and parsed back with jansson: every field of
 * egress.decision and egress.close, "reason" only on a deny, JSON nulls
 * for unknown values, one line per event, hostile host bytes escaped.
 * And the fair queues: with a destination that takes nothing (a pipe
 * nobody reads), an instance flooding decisions is backlogged past its
 * share while another's events still queue, the queues drain
 * round-robin (the other's lines come out interleaved, not after the
 * flood), the waiter is woken, and every event comes out exactly once;
 * and a model test over random interleavings of events from several
 * instances and partial reads of the destination. Held lines (log_hold)
 * wait for the flush and go out in one write, in order, to the
 * destination they were made for.
 */
#include <sys/socket.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <event2/event.h>
#include <jansson.h>

#include "broker/broker.h"
#include "broker/log.h"
#include "policy/policy.h"

/* ---- log_bound --------------------------------------------------------- */

struct bound_case {
	char in[600];
	size_t in_len;	/* 0: strlen(in) */
	size_t repeat;	/* >0: in[0] repeated this many times */
	char want[400]; /* "": check want_len and the marker only */
	size_t want_len;
	int truncated;
};

static struct bound_case bound_cases[] = {
	{ "api.weather.example", 0, 0, "api.weather.example", 19, 0 },
	{ "", 0, 0, "", 0, 0 },
	{ "a\r\nb", 0, 0, "a\\x0d\\x0ab", 10, 0 },
	{ "nul\0x", 5, 0, "nul\\x00x", 8, 0 },
	{ "\xff\xfe", 0, 0, "\\xff\\xfe", 8, 0 },
	/* The backslash is escaped too, so that every one in the output
	 * starts an escape: text that spells one is not taken for it. */
	{ "q\"\\", 0, 0, "q\"\\x5c", 6, 0 },
	{ "evil\\x0a", 0, 0, "evil\\x5cx0a", 11, 0 },
	{ "a", 0, LOG_STR_MAX, "", LOG_STR_MAX, 0 },
	{ "a", 0, LOG_STR_MAX + 1, "",
	    LOG_STR_MAX + sizeof(LOG_TRUNC_MARK) - 1, 1 },
	/* 64 escapes fill 256 bytes exactly; a 65th is cut whole. */
	{ "\x01", 0, 64, "", LOG_STR_MAX, 0 },
	{ "\x01", 0, 65, "", LOG_STR_MAX + sizeof(LOG_TRUNC_MARK) - 1, 1 },
};

ParameterizedTestParameters(log, bound)
{
	return cr_make_param_array(struct bound_case, bound_cases,
	    sizeof(bound_cases) / sizeof(bound_cases[0]));
}

ParameterizedTest(struct bound_case *c, log, bound)
{
	char in[2048], out[LOG_STR_MAX + sizeof(LOG_TRUNC_MARK)];
	size_t n, i;
	int len;

	if (c->repeat > 0) {
		for (i = 0; i < c->repeat; i++)
			in[i] = c->in[0];
		n = c->repeat;
	} else {
		n = c->in_len != 0 ? c->in_len : strlen(c->in);
		memcpy(in, c->in, n);
	}
	len = log_bound(in, n, out, sizeof(out));
	cr_assert_eq(len, (int)c->want_len, "length %d, want %zu", len,
	    c->want_len);
	cr_assert_eq(strlen(out), (size_t)len);
	if (c->want[0] != '\0' || c->want_len == 0)
		cr_assert_str_eq(out, c->want);
	for (i = 0; i < (size_t)len; i++)
		cr_assert(out[i] >= 0x20 && out[i] <= 0x7e,
		    "unprintable byte at %zu", i);
	if (c->truncated)
		cr_assert_str_eq(out + len - (sizeof(LOG_TRUNC_MARK) - 1),
		    LOG_TRUNC_MARK);
	else
		cr_assert_null(strstr(out, LOG_TRUNC_MARK));
}

Test(log, bound_small_buffer)
{
	char out[16];

	cr_assert_lt(log_bound("x", 1, out, sizeof(out)), 0);
}

/* ---- events -------------------------------------------------------------- */

/* Run fn with the log on a pipe; return the lines it wrote (malloc'd). */
static char *
capture(void (*fn)(const void *), const void *arg)
{
	static char buf[1 << 16];
	int p[2];
	ssize_t n;
	char *s;

	cr_assert_eq(pipe(p), 0);
	log_set_fd(p[1]);
	fn(arg);
	log_set_fd(-1);
	(void)close(p[1]);
	n = read(p[0], buf, sizeof(buf) - 1);
	(void)close(p[0]);
	cr_assert_gt(n, 0);
	buf[n] = '\0';
	s = strdup(buf);
	cr_assert_not_null(s);
	return s;
}

static json_t *
parse_one(const char *text)
{
	json_error_t e;
	json_t *o;
	const char *nl = strchr(text, '\n');

	cr_assert_not_null(nl, "no newline");
	cr_assert_eq(nl[1], '\0', "more than one line: %s", text);
	o = json_loadb(text, (size_t)(nl - text), 0, &e);
	cr_assert_not_null(o, "not JSON: %s (%s)", text, e.text);
	return o;
}

static void
emit_decision(const void *arg)
{
	log_decision(arg);
}

static void
emit_close(const void *arg)
{
	log_close_event(arg);
}

struct decision_case {
	char host[300];
	int allow;
	char reason[32];
	unsigned port;
	char want_host[300];
	int naddrs;
};

static struct decision_case decision_cases[] = {
	{ "api.weather.example", 1, "", 443, "api.weather.example", 2 },
	{ "api.weather.example", 0, "not-granted", 80, "api.weather.example",
	    0 },
	{ "evil\r\n{\"x\":1}", 0, "invalid-request", 0,
	    "evil\\x0d\\x0a{\"x\":1}", 0 },
};

ParameterizedTestParameters(log, decision)
{
	return cr_make_param_array(struct decision_case, decision_cases,
	    sizeof(decision_cases) / sizeof(decision_cases[0]));
}

ParameterizedTest(struct decision_case *c, log, decision)
{
	struct policy_addr a[2];
	struct log_decision d;
	json_t *o, *addrs;
	char *text;

	cr_assert_eq(policy_addr_parse("93.184.216.34", &a[0]), 0);
	cr_assert_eq(policy_addr_parse("2001:db8::1", &a[1]), 0);
	memset(&d, 0, sizeof(d));
	d.request_id = "abcd-1";
	d.instance = "weather";
	d.plugin = c->allow ? "weather" : NULL;
	d.transport = "http";
	d.host = c->host;
	d.host_len = strlen(c->host);
	d.port = c->port;
	d.allow = c->allow;
	d.reason = c->reason;
	d.addrs = a;
	d.naddrs = (size_t)c->naddrs;
	text = capture(emit_decision, &d);
	o = parse_one(text);
	cr_assert_str_eq(json_string_value(json_object_get(o, "event")),
	    "egress.decision");
	cr_assert(json_is_string(json_object_get(o, "ts")));
	cr_assert_str_eq(json_string_value(json_object_get(o, "request_id")),
	    "abcd-1");
	cr_assert_str_eq(json_string_value(json_object_get(o, "instance")),
	    "weather");
	cr_assert_str_eq(json_string_value(json_object_get(o, "transport")),
	    "http");
	cr_assert_str_eq(json_string_value(json_object_get(o, "host")),
	    c->want_host);
	cr_assert_str_eq(json_string_value(json_object_get(o, "verdict")),
	    c->allow ? "allow" : "deny");
	if (c->allow) {
		cr_assert_null(json_object_get(o, "reason"));
		cr_assert_str_eq(json_string_value(json_object_get(o,
				     "plugin")),
		    "weather");
	} else {
		cr_assert_str_eq(json_string_value(json_object_get(o,
				     "reason")),
		    c->reason);
		cr_assert(json_is_null(json_object_get(o, "plugin")));
	}
	if (c->port != 0)
		cr_assert_eq(json_integer_value(json_object_get(o, "port")),
		    c->port);
	else
		cr_assert(json_is_null(json_object_get(o, "port")));
	addrs = json_object_get(o, "addresses");
	cr_assert(json_is_array(addrs));
	cr_assert_eq(json_array_size(addrs), (size_t)c->naddrs);
	if (c->naddrs == 2) {
		cr_assert_str_eq(json_string_value(json_array_get(addrs, 0)),
		    "93.184.216.34");
		cr_assert_str_eq(json_string_value(json_array_get(addrs, 1)),
		    "2001:db8::1");
	}
	json_decref(o);
	free(text);
}

Test(log, close_fields)
{
	struct policy_addr a;
	struct log_close c;
	json_t *o;
	char *text;

	cr_assert_eq(policy_addr_parse("10.0.0.7", &a), 0);
	memset(&c, 0, sizeof(c));
	c.request_id = "abcd-2";
	c.instance = "radar";
	c.transport = "tcp";
	c.connected = &a;
	c.status = 200;
	c.bytes_in = 52428800;
	c.bytes_out = 7;
	c.duration_ms = 1234;
	text = capture(emit_close, &c);
	o = parse_one(text);
	cr_assert_str_eq(json_string_value(json_object_get(o, "event")),
	    "egress.close");
	cr_assert_str_eq(json_string_value(json_object_get(o, "transport")),
	    "tcp");
	cr_assert_str_eq(json_string_value(json_object_get(o, "connected")),
	    "10.0.0.7");
	cr_assert_eq(json_integer_value(json_object_get(o, "status")), 200);
	cr_assert(json_is_null(json_object_get(o, "error")));
	cr_assert_eq(json_integer_value(json_object_get(o, "bytes_in")),
	    52428800);
	cr_assert_eq(json_integer_value(json_object_get(o, "bytes_out")), 7);
	cr_assert_eq(json_integer_value(json_object_get(o, "duration_ms")),
	    1234);
	json_decref(o);
	free(text);
}

/* Every string field is escaped, whatever its bytes: the line parses,
 * and each value comes back as written (bytes >= 0x80 as U+0080..U+00FF). */
Test(log, strings_escaped)
{
	struct log_close c;
	json_t *o;
	char *text;

	memset(&c, 0, sizeof(c));
	c.request_id = "id\"q\\b";
	c.instance = "in\x01\x1f\x7f/";
	c.error = "\xff";
	c.status = -3;
	text = capture(emit_close, &c);
	cr_assert_eq(
	    strspn(text,
		" !\"#$%&'()*+,-./0123456789:;<=>?@"
		"ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrstuvwxyz{|}~"),
	    strlen(text) - 1, "not printable ASCII: %s", text);
	o = parse_one(text);
	cr_assert_str_eq(json_string_value(json_object_get(o, "request_id")),
	    "id\"q\\b");
	cr_assert_str_eq(json_string_value(json_object_get(o, "instance")),
	    "in\x01\x1f\x7f/");
	cr_assert_str_eq(json_string_value(json_object_get(o, "error")),
	    "\xc3\xbf");
	cr_assert_eq(json_integer_value(json_object_get(o, "status")), -3);
	json_decref(o);
	free(text);
}

/* The keys, in order: "ts" and "event" first, then the event's own. */
Test(log, key_order)
{
	static const char *want[] = { "ts", "event", "request_id", "instance",
		"plugin", "transport", "host", "port", "verdict", "reason",
		"addresses" };
	struct log_decision d;
	const char *p;
	char *text, key[32];
	size_t i;

	memset(&d, 0, sizeof(d));
	d.request_id = "r";
	d.instance = "i";
	d.transport = "http";
	d.reason = "not-granted";
	text = capture(emit_decision, &d);
	p = text;
	for (i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		(void)snprintf(key, sizeof(key), "\"%s\":", want[i]);
		p = strstr(p, key);
		cr_assert_not_null(p, "key %s missing or out of order: %s",
		    want[i], text);
	}
	json_decref(parse_one(text));
	free(text);
}

/* A line that cannot fit is replaced by an "event too long" line. */
Test(log, decision_too_long)
{
	static struct policy_addr a[3000];
	struct log_decision d;
	json_t *o;
	char *text;
	size_t i;

	for (i = 0; i < 3000; i++)
		cr_assert_eq(policy_addr_parse("2001:db8:1234:5678:9abc:def0:"
					       "1234:5678",
				 &a[i]),
		    0);
	memset(&d, 0, sizeof(d));
	d.request_id = "r";
	d.instance = "i";
	d.transport = "http";
	d.allow = 1;
	d.addrs = a;
	d.naddrs = 3000;
	text = capture(emit_decision, &d);
	o = parse_one(text);
	cr_assert_str_eq(json_string_value(json_object_get(o, "event")),
	    "egress.decision");
	cr_assert_str_eq(json_string_value(json_object_get(o, "error")),
	    "event too long");
	json_decref(o);
	free(text);
}

Test(log, close_failed)
{
	struct log_close c;
	json_t *o;
	char *text;

	memset(&c, 0, sizeof(c));
	c.request_id = "abcd-3";
	c.instance = "radar";
	c.error = "tls-failed";
	text = capture(emit_close, &c);
	o = parse_one(text);
	cr_assert(json_is_null(json_object_get(o, "connected")));
	cr_assert(json_is_null(json_object_get(o, "status")));
	cr_assert_str_eq(json_string_value(json_object_get(o, "error")),
	    "tls-failed");
	json_decref(o);
	free(text);
}

Test(log, reopen_file)
{
	char path[] = "/tmp/test_broker_log.XXXXXX", buf[4096];
	json_t *o;
	ssize_t n;
	int fd;

	fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	(void)close(fd);
	cr_assert_eq(log_open(path), 0);
	log_event("egress.test", json_pack("{s:i}", "n", 1));
	/* Rotate: the old name goes away, a reopen creates it again. */
	cr_assert_eq(unlink(path), 0);
	cr_assert_eq(log_reopen(), 0);
	log_event("egress.test", json_pack("{s:i}", "n", 2));
	log_close();
	fd = open(path, O_RDONLY);
	cr_assert_geq(fd, 0);
	n = read(fd, buf, sizeof(buf) - 1);
	(void)close(fd);
	(void)unlink(path);
	cr_assert_gt(n, 0);
	buf[n] = '\0';
	o = parse_one(buf);
	cr_assert_eq(json_integer_value(json_object_get(o, "n")), 2);
	json_decref(o);
}

/* ---- held lines ---------------------------------------------------------- */

/* One record of a SOCK_SEQPACKET pair: exactly what one write(2) wrote
 * (malloc'd), or NULL when none is there. */
static char *
take_record(int fd)
{
	static char buf[1 << 18];
	ssize_t n = recv(fd, buf, sizeof(buf) - 1, MSG_DONTWAIT);
	char *s;

	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return NULL;
	cr_assert_gt(n, 0);
	buf[n] = '\0';
	s = strdup(buf);
	cr_assert_not_null(s);
	return s;
}

static int
count_lines(const char *s)
{
	int n = 0;

	for (; *s != '\0'; s++)
		n += *s == '\n';
	return n;
}

Test(log, held_lines_go_out_in_one_write_at_the_flush)
{
	struct log_close c;
	int sp[2];
	char *rec;

	cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sp), 0);
	log_set_fd(sp[0]);
	log_hold(1);
	memset(&c, 0, sizeof(c));
	c.request_id = "abcd-1";
	c.instance = "radar";
	log_close_event(&c);
	log_event("egress.test", json_pack("{s:i}", "n", 2));
	c.request_id = "abcd-3";
	log_close_event(&c);
	cr_assert_null(take_record(sp[1]), "a held line was written");
	log_flush();
	rec = take_record(sp[1]);
	cr_assert_not_null(rec);
	cr_assert_eq(count_lines(rec), 3, "one write: %s", rec);
	cr_assert_not_null(strstr(rec, "abcd-1"));
	cr_assert(strstr(rec, "abcd-1") < strstr(rec, "\"n\":2"));
	cr_assert(strstr(rec, "\"n\":2") < strstr(rec, "abcd-3"));
	free(rec);
	cr_assert_null(take_record(sp[1]));
	/* Not held any more: each line is its own write again. */
	log_hold(0);
	log_event("egress.test", json_pack("{s:i}", "n", 4));
	rec = take_record(sp[1]);
	cr_assert_not_null(rec);
	cr_assert_eq(count_lines(rec), 1);
	free(rec);
	log_set_fd(-1);
	(void)close(sp[0]);
	(void)close(sp[1]);
}

Test(log, stopping_the_hold_writes_what_it_held)
{
	int sp[2];
	char *rec;

	cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sp), 0);
	log_set_fd(sp[0]);
	log_hold(1);
	log_event("egress.test", json_pack("{s:i}", "n", 1));
	cr_assert_null(take_record(sp[1]));
	log_hold(0);
	rec = take_record(sp[1]);
	cr_assert_not_null(rec);
	cr_assert_eq(count_lines(rec), 1);
	free(rec);
	log_set_fd(-1);
	(void)close(sp[0]);
	(void)close(sp[1]);
}

/* A line that does not fit what is held writes the held lines first,
 * then waits itself: order is kept and nothing is cut. */
Test(log, a_line_past_the_hold_flushes_the_held_first)
{
	static char big[40000];
	int sp[2];
	char *rec;

	memset(big, 'b', sizeof(big) - 1);
	cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sp), 0);
	log_set_fd(sp[0]);
	log_hold(1);
	log_event("egress.test", json_pack("{s:i, s:s}", "n", 1, "s", big));
	log_event("egress.test", json_pack("{s:i, s:s}", "n", 2, "s", big));
	rec = take_record(sp[1]);
	cr_assert_not_null(rec, "the first line was not written");
	cr_assert_eq(count_lines(rec), 1);
	cr_assert_not_null(strstr(rec, "\"n\":1"));
	free(rec);
	cr_assert_null(take_record(sp[1]));
	log_flush();
	rec = take_record(sp[1]);
	cr_assert_not_null(rec);
	cr_assert_eq(count_lines(rec), 1);
	cr_assert_not_null(strstr(rec, "\"n\":2"));
	cr_assert_geq(strlen(rec), sizeof(big));
	free(rec);
	log_hold(0);
	log_set_fd(-1);
	(void)close(sp[0]);
	(void)close(sp[1]);
}

/* Rotation: what was held belongs to the file it was written for. */
Test(log, a_reopen_writes_the_held_lines_to_the_old_file)
{
	char path[] = "/tmp/test_broker_log.XXXXXX", buf[4096];
	ssize_t n;
	int fd, old;

	fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	(void)close(fd);
	cr_assert_eq(log_open(path), 0);
	old = open(path, O_RDONLY);
	cr_assert_geq(old, 0);
	log_hold(1);
	log_event("egress.test", json_pack("{s:i}", "n", 1));
	cr_assert_eq(read(old, buf, sizeof(buf)), 0, "written while held");
	cr_assert_eq(unlink(path), 0);
	cr_assert_eq(log_reopen(), 0);
	log_event("egress.test", json_pack("{s:i}", "n", 2));
	log_hold(0);
	n = read(old, buf, sizeof(buf) - 1);
	cr_assert_gt(n, 0);
	buf[n] = '\0';
	cr_assert_eq(count_lines(buf), 1);
	cr_assert_not_null(strstr(buf, "\"n\":1"));
	(void)close(old);
	log_close();
	fd = open(path, O_RDONLY);
	cr_assert_geq(fd, 0);
	n = read(fd, buf, sizeof(buf) - 1);
	(void)close(fd);
	(void)unlink(path);
	cr_assert_gt(n, 0);
	buf[n] = '\0';
	cr_assert_eq(count_lines(buf), 1);
	cr_assert_not_null(strstr(buf, "\"n\":2"));
}

/* ---- the fair queues ---------------------------------------------------- */

static void
emit_one(const char *instance, const char *plugin, unsigned n)
{
	struct log_decision d;
	char id[32];

	(void)snprintf(id, sizeof(id), "%s-%u", instance, n);
	memset(&d, 0, sizeof(d));
	d.request_id = id;
	d.instance = instance;
	d.plugin = plugin;
	d.transport = "http";
	d.host = "denied.example";
	d.host_len = strlen(d.host);
	d.port = 80;
	d.reason = "not-granted";
	log_decision(&d);
}

static void
count_wake(void *arg)
{
	(*(int *)arg)++;
}

/*
 * The flood, into a pipe (stderr piped to a supervisor) or a stream
 * socket (journald's), whose writing end blocks as those do: only the
 * reading end is non-blocking.
 */
static void
flood_case(int sock)
{
	static const struct share_member m[] = { { "flood", "evil" },
		{ "victim", "good" } };
	enum { FLOOD = 6000, VICTIM = 20 };
	struct log_waiter w;
	struct event_base *base = broker_base_new();
	static char buf[4 << 20];
	size_t len = 0, before, lines = 0, victim_at = 0, nv = 0, nf = 0;
	int fds[2], woke = 0;
	unsigned i;
	char *p, *nl;
	ssize_t r;

	cr_assert_not_null(base);
	if (sock)
		cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0,
				 fds),
		    0);
	else
		cr_assert_eq(pipe2(fds, O_CLOEXEC), 0);
	cr_assert_eq(fcntl(fds[0], F_SETFL, O_NONBLOCK), 0);
	log_set_fd(fds[1]);
	cr_assert_eq(log_configure(m, 2), 0);
	cr_assert_eq(log_attach(base), 0);
	for (i = 0; i < FLOOD; i++)
		emit_one("flood", "evil", i);
	/* The pipe took what it holds; the rest waits, past the share. */
	cr_assert_gt(log_queued("flood"), LOG_QUEUE_PER_INSTANCE);
	memset(&w, 0, sizeof(w));
	w.wake = count_wake;
	w.arg = &woke;
	cr_assert(log_backlog_wait("flood", &w), "the flood is not held back");
	before = FLOOD - log_queued("flood");
	for (i = 0; i < VICTIM; i++)
		emit_one("victim", "good", i);
	cr_assert(!log_backlog_wait("victim", NULL),
	    "the victim was held back for the flood");
	cr_assert_eq(log_queued("victim"), VICTIM);
	/* Read it all while the loop drains the queues. */
	for (;;) {
		r = read(fds[0], buf + len, sizeof(buf) - len);
		if (r > 0)
			len += (size_t)r;
		else if (log_queued(NULL) == 0)
			break; /* nothing queued, nothing in the pipe */
		else
			cr_assert(r < 0 && errno == EAGAIN);
		(void)event_base_loop(base, EVLOOP_NONBLOCK);
		cr_assert_lt(len, sizeof(buf));
	}
	cr_assert_eq(woke, 1, "the waiter was not woken");
	cr_assert(!log_backlog_wait("flood", NULL));
	for (p = buf; p < buf + len; p = nl + 1) {
		cr_assert_not_null(nl = memchr(p, '\n',
				       (size_t)(buf + len - p)));
		lines++;
		if (memmem(p, (size_t)(nl - p), "\"victim-", 8) != NULL) {
			nv++;
			victim_at = lines;
		} else if (memmem(p, (size_t)(nl - p), "\"flood-", 7) != NULL)
			nf++;
		else
			cr_assert_not_null(memmem(p, (size_t)(nl - p),
					       "\"status\":\"backlogged\"",
					       21),
			    "%.*s", (int)(nl - p), p);
	}
	cr_assert_eq(nf, FLOOD, "flood lines: %zu", nf);
	cr_assert_eq(nv, VICTIM, "victim lines: %zu", nv);
	/* Round-robin: one flood line per victim line after what the pipe
	 * held (and the line being written). */
	cr_assert_leq(victim_at, before + 2 * VICTIM + 1,
	    "the victim's last line came out at %zu (pipe held %zu)",
	    victim_at, before);
	log_detach();
	log_set_fd(-1);
	(void)close(fds[0]);
	(void)close(fds[1]);
	event_base_free(base);
}

Test(log, flood_is_backlogged_alone)
{
	flood_case(0);
}

Test(log, flood_through_a_socket)
{
	flood_case(1);
}

/*
 * The model: 5 instances of 3 plugins emit events at random while the
 * reader takes random amounts; an instance that is backlogged emits only
 * what its sessions had already read (at most OVERSHOOT more lines, as
 * a session stops reading). After every step: no instance holds more
 * than its maximum plus that overshoot, and an instance below its
 * guarantee that was not backlogged is not backlogged by one more line.
 * At the end every line came out once, in order per instance.
 */
Test(log, model_random_interleavings)
{
	static const struct share_member m[] = { { "i0", "p0" },
		{ "i1", "p0" }, { "i2", "p0" }, { "i3", "p1" },
		{ "i4", "p2" } };
	enum { NI = 5, STEPS = 60000, OVERSHOOT = 64 };
	static char buf[16 << 20];
	struct event_base *base = broker_base_new();
	unsigned sent[NI] = { 0 }, over[NI] = { 0 }, next[NI] = { 0 };
	unsigned seed = 777, step, i, k, backlogs = 0;
	size_t len = 0, q;
	int fds[2], was;
	char *p, *nl, *at;
	ssize_t r;

	cr_assert_not_null(base);
	cr_assert_eq(pipe2(fds, O_CLOEXEC | O_NONBLOCK), 0);
	log_set_fd(fds[1]);
	cr_assert_eq(log_configure(m, NI), 0);
	cr_assert_eq(log_attach(base), 0);
	for (step = 0; step < STEPS; step++) {
		i = (unsigned)rand_r(&seed) % NI;
		if (rand_r(&seed) % 8 != 0) {
			/* i0 floods: ten times the others' rate. */
			for (k = 0; k < (i == 0 ? 10u : 1u); k++) {
				was = log_backlog_wait(m[i].instance, NULL);
				if (was && over[i] >= OVERSHOOT)
					break; /* its sessions are not read */
				q = log_queued(m[i].instance);
				emit_one(m[i].instance, m[i].plugin,
				    sent[i]++);
				over[i] = was ? over[i] + 1 : 0;
				if (!was &&
				    log_backlog_wait(m[i].instance, NULL))
					backlogs++;
				if (!was && q < LOG_QUEUE_GUARANTEE)
					cr_assert(!log_backlog_wait(
						      m[i].instance, NULL),
					    "step %u: %s backlogged within "
					    "its guarantee",
					    step, m[i].instance);
				cr_assert_leq(log_queued(m[i].instance),
				    LOG_QUEUE_PER_INSTANCE + OVERSHOOT + 1);
			}
		} else {
			/* The reader takes a little, now and then. */
			r = read(fds[0], buf + len,
			    1 + (size_t)rand_r(&seed) % 4096);
			if (r > 0)
				len += (size_t)r;
			(void)event_base_loop(base, EVLOOP_NONBLOCK);
		}
		cr_assert_lt(len, sizeof(buf) - 65536);
	}
	for (;;) {
		r = read(fds[0], buf + len, sizeof(buf) - len);
		if (r > 0)
			len += (size_t)r;
		else if (log_queued(NULL) == 0)
			break;
		(void)event_base_loop(base, EVLOOP_NONBLOCK);
		cr_assert_lt(len, sizeof(buf));
	}
	for (p = buf; p < buf + len; p = nl + 1) {
		cr_assert_not_null(nl = memchr(p, '\n',
				       (size_t)(buf + len - p)));
		if ((at = memmem(p, (size_t)(nl - p), "\"request_id\":\"i",
			 15)) == NULL)
			continue; /* an egress.log event */
		i = (unsigned)(at[15] - '0');
		cr_assert_lt(i, NI);
		cr_assert_eq((unsigned)strtoul(at + 17, NULL, 10), next[i],
		    "%s: a line lost, doubled or out of order", m[i].instance);
		next[i]++;
	}
	for (i = 0; i < NI; i++)
		cr_assert_eq(next[i], sent[i], "%s: %u of %u lines",
		    m[i].instance, next[i], sent[i]);
	cr_assert_gt(backlogs, 10, "the queues never filled (%u)", backlogs);
	cr_log_info("%u backlogs, %u lines of i0", backlogs, sent[0]);
	log_detach();
	log_set_fd(-1);
	(void)close(fds[0]);
	(void)close(fds[1]);
	event_base_free(base);
}

static void
close_one(const char *instance, unsigned n)
{
	struct log_close c;
	char id[32];

	(void)snprintf(id, sizeof(id), "%s-%u", instance, n);
	memset(&c, 0, sizeof(c));
	c.request_id = id;
	c.instance = instance;
	c.error = "denied";
	log_close_event(&c);
}

/*
 * The turns go to plugins, then to instances: two instances of one
 * plugin get one line between them for each line of a third instance's
 * plugin, even through egress.close events, which name no plugin.
 */
Test(log, turns_by_plugin)
{
	static const struct share_member m[] = { { "e1", "evil" },
		{ "e2", "evil" }, { "v", "good" } };
	static char buf[1 << 20];
	struct event_base *base = broker_base_new();
	size_t len = 0, lines = 0, nv = 0, v50 = 0, before;
	unsigned i;
	int fds[2];
	char *p, *nl;
	ssize_t r;

	cr_assert_not_null(base);
	cr_assert_eq(pipe2(fds, O_CLOEXEC | O_NONBLOCK), 0);
	log_set_fd(fds[1]);
	cr_assert_eq(log_configure(m, 3), 0);
	cr_assert_eq(log_attach(base), 0);
	/* Fill the pipe, so that what follows waits in the queues. */
	for (i = 0; log_queued(NULL) == 0; i++)
		close_one("e1", i);
	before = i - log_queued(NULL);
	for (i = 0; i < 100; i++) {
		close_one("e1", 1000 + i);
		close_one("e2", i);
	}
	for (i = 0; i < 100; i++)
		close_one("v", i);
	for (;;) {
		r = read(fds[0], buf + len, sizeof(buf) - len);
		if (r > 0)
			len += (size_t)r;
		else if (log_queued(NULL) == 0)
			break;
		(void)event_base_loop(base, EVLOOP_NONBLOCK);
		cr_assert_lt(len, sizeof(buf));
	}
	for (p = buf; p < buf + len; p = nl + 1) {
		cr_assert_not_null(nl = memchr(p, '\n',
				       (size_t)(buf + len - p)));
		lines++;
		if (memmem(p, (size_t)(nl - p), "\"v-", 3) != NULL &&
		    ++nv == 50)
			v50 = lines;
	}
	cr_assert_eq(nv, 100);
	/* One line of plugin evil per line of v (and the one being
	 * written): by instance, it would be two. */
	cr_assert_leq(v50, before + 1 + 2 * 50 + 1,
	    "v's 50th line came out at %zu, after %zu in the pipe", v50,
	    before);
	log_detach();
	log_set_fd(-1);
	(void)close(fds[0]);
	(void)close(fds[1]);
	event_base_free(base);
}
