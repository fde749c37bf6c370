/* SPDX-License-Identifier: ISC */
/*
 * The JSON-lines host log of egressd: one destination (stderr or a file
 * opened O_APPEND), one write(2) per event so that lines never interleave,
 * reopen for rotation, and the builders of egress.decision and
 * egress.close. Those two are written on every request, so they are
 * formatted straight into one reused buffer (fixed keys, every string
 * escaped by log_json_str()) rather than built as jansson objects and
 * dumped, which cost a quarter of the broker's CPU; every other event goes
 * through jansson. tests/unit/test_broker_log.c parses each line back with
 * jansson. See log.h and docs/egressd.md.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include <egress/error.h>

#include "broker/log.h"

static int log_fd = -1; /* -1: stderr */
/* The line buffer of log_decision() and log_close_event(); lb_failed
 * latches an allocation failure or an over-long line until the event is
 * finished. */
static char *lb;
static size_t lb_len, lb_cap;
static int lb_failed;
static int log_borrowed; /* log_fd belongs to a test */
static char *log_path;

static int
log_open_file(const char *path)
{
	return open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY,
	    0640);
}

static void
log_drop_fd(void)
{
	if (log_fd >= 0 && !log_borrowed)
		(void)close(log_fd);
	log_fd = -1;
	log_borrowed = 0;
}

int
log_open(const char *path)
{
	char *copy = NULL;
	int fd;

	if (path == NULL) {
		log_drop_fd();
		free(log_path);
		log_path = NULL;
		return 0;
	}
	if ((copy = strdup(path)) == NULL)
		return EGRESS_ERR_NOMEM;
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY,
	    0640);
	if (fd < 0) {
		free(copy);
		return EGRESS_ERR_IO;
	}
	log_drop_fd();
	free(log_path);
	log_path = copy;
	log_fd = fd;
	return 0;
}

int
log_reopen(void)
{
	int fd;

	if (log_path == NULL || log_borrowed)
		return 0;
	fd = log_open_file(log_path);
	if (fd < 0)
		return EGRESS_ERR_IO;
	log_drop_fd();
	log_fd = fd;
	return 0;
}

void
log_close(void)
{
	log_drop_fd();
	free(log_path);
	log_path = NULL;
	free(lb);
	lb = NULL;
	lb_len = lb_cap = 0;
}

void
log_set_fd(int fd)
{
	log_drop_fd();
	if (fd >= 0) {
		log_fd = fd;
		log_borrowed = 1;
	}
}

int
log_bound(const char *s, size_t n, char *buf, size_t bufsz)
{
	static const char hex[] = "0123456789abcdef";
	size_t i, o = 0;
	unsigned char c;

	if (bufsz < LOG_STR_MAX + sizeof(LOG_TRUNC_MARK))
		return EGRESS_ERR_TOO_BIG;
	if (s == NULL)
		n = 0;
	for (i = 0; i < n; i++) {
		c = (unsigned char)s[i];
		if (c >= 0x20 && c <= 0x7e) {
			if (o + 1 > LOG_STR_MAX)
				break;
			buf[o++] = (char)c;
		} else {
			if (o + 4 > LOG_STR_MAX)
				break;
			buf[o++] = '\\';
			buf[o++] = 'x';
			buf[o++] = hex[c >> 4];
			buf[o++] = hex[c & 0xf];
		}
	}
	if (i < n) {
		memcpy(buf + o, LOG_TRUNC_MARK, sizeof(LOG_TRUNC_MARK) - 1);
		o += sizeof(LOG_TRUNC_MARK) - 1;
	}
	buf[o] = '\0';
	return (int)o;
}

json_t *
log_bounded_string(const char *s, size_t n)
{
	char buf[LOG_STR_MAX + sizeof(LOG_TRUNC_MARK)];
	int len;

	len = log_bound(s, n, buf, sizeof(buf));
	if (len < 0)
		return NULL;
	return json_stringn(buf, (size_t)len);
}

/* "YYYY-MM-DDTHH:MM:SS.mmmZ" (UTC); the part up to the second is
 * formatted once per second. n must be at least LOG_TS_LEN + 1. */
#define LOG_TS_LEN 24

static void
log_timestamp(char *buf, size_t n)
{
	static char sec_text[32];
	static time_t sec_cached = (time_t)-1;
	struct timespec ts;
	struct tm tm;
	int ms;

	if (n < LOG_TS_LEN + 1) {
		if (n > 0)
			buf[0] = '\0';
		return;
	}
	(void)clock_gettime(CLOCK_REALTIME, &ts);
	if (ts.tv_sec != sec_cached) {
		(void)gmtime_r(&ts.tv_sec, &tm);
		(void)snprintf(sec_text, sizeof(sec_text),
		    "%04d-%02d-%02dT%02d:%02d:%02d",
		    (tm.tm_year + 1900) % 10000, (tm.tm_mon + 1) % 100,
		    tm.tm_mday % 100, tm.tm_hour % 100, tm.tm_min % 100,
		    tm.tm_sec % 100);
		sec_cached = ts.tv_sec;
	}
	ms = (int)(ts.tv_nsec / 1000000) % 1000;
	memcpy(buf, sec_text, 19);
	buf[19] = '.';
	buf[20] = (char)('0' + ms / 100);
	buf[21] = (char)('0' + ms / 10 % 10);
	buf[22] = (char)('0' + ms % 10);
	buf[23] = 'Z';
	buf[24] = '\0';
}

static void
log_write_all(const char *p, size_t n)
{
	int fd = log_fd >= 0 ? log_fd : STDERR_FILENO;
	ssize_t w;

	while (n > 0) {
		w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		p += w;
		n -= (size_t)w;
	}
}

void
log_event(const char *name, json_t *obj)
{
	char ts[64];
	json_t *line = NULL;
	char *text = NULL;
	size_t n;

	if (obj == NULL)
		return;
	log_timestamp(ts, sizeof(ts));
	/* "ts" and "event" first, then the event's own fields. */
	if ((line = json_object()) == NULL ||
	    json_object_set_new(line, "ts", json_string(ts)) != 0 ||
	    json_object_set_new(line, "event", json_string(name)) != 0 ||
	    json_object_update(line, obj) != 0)
		goto out;
	text = json_dumps(line, JSON_COMPACT | JSON_PRESERVE_ORDER);
	if (text == NULL)
		goto out;
	n = strlen(text);
	if (n + 1 > LOG_LINE_MAX) {
		free(text);
		text = NULL;
		json_decref(line);
		line = json_pack("{s:s, s:s, s:s}", "ts", ts, "event", name,
		    "error", "event too long");
		if (line == NULL ||
		    (text = json_dumps(line,
			 JSON_COMPACT | JSON_PRESERVE_ORDER)) == NULL)
			goto out;
		n = strlen(text);
	}
	text[n] = '\n'; /* replaces the NUL; written by length */
	log_write_all(text, n + 1);
out:
	free(text);
	json_decref(line);
	json_decref(obj);
}

/* ---- The per-request events, formatted directly ----------------------- */

static int
lb_reserve(size_t n)
{
	size_t cap;
	char *p;

	if (lb_failed)
		return -1;
	if (n > LOG_LINE_MAX || lb_len > LOG_LINE_MAX - n) {
		lb_failed = 1;
		return -1;
	}
	if (lb_len + n <= lb_cap)
		return 0;
	cap = lb_cap != 0 ? lb_cap : 1024;
	while (cap < lb_len + n)
		cap *= 2;
	if ((p = realloc(lb, cap)) == NULL) {
		lb_failed = 1;
		return -1;
	}
	lb = p;
	lb_cap = cap;
	return 0;
}

static void
lb_raw(const char *p, size_t n)
{
	if (lb_reserve(n) != 0)
		return;
	memcpy(lb + lb_len, p, n);
	lb_len += n;
}

#define LB_LIT(s) lb_raw((s), sizeof(s) - 1)

/*
 * Append s[0..n) as a JSON string. Printable ASCII passes except '"' and
 * '\'; every other byte becomes \u00XX, so the line is always ASCII and
 * valid JSON whatever the bytes (callers bound guest-controlled strings
 * with log_bound() first, which leaves only printable ASCII).
 */
static void
lb_strn(const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char c;
	size_t i;
	char *o;

	/* Worst case 6 bytes per input byte, plus the quotes. */
	if (n > (LOG_LINE_MAX - 2) / 6 || lb_reserve(n * 6 + 2) != 0) {
		lb_failed = 1;
		return;
	}
	o = lb + lb_len;
	*o++ = '"';
	for (i = 0; i < n; i++) {
		c = (unsigned char)s[i];
		if (c >= 0x20 && c <= 0x7e && c != '"' && c != '\\')
			*o++ = (char)c;
		else if (c == '"' || c == '\\') {
			*o++ = '\\';
			*o++ = (char)c;
		} else {
			/* NOLINTBEGIN(bugprone-not-null-terminated-result):
			 * four bytes into a larger output, not a string */
			memcpy(o, "\\u00", 4);
			/* NOLINTEND(bugprone-not-null-terminated-result) */
			o[4] = hex[c >> 4];
			o[5] = hex[c & 0xf];
			o += 6;
		}
	}
	*o++ = '"';
	lb_len = (size_t)(o - lb);
}

/* A NUL-terminated string, or JSON null for NULL. */
static void
lb_str(const char *s)
{
	if (s == NULL)
		LB_LIT("null");
	else
		lb_strn(s, strlen(s));
}

static void
lb_uint(uint64_t v)
{
	char tmp[20];
	size_t n = 0;

	do {
		tmp[sizeof(tmp) - 1 - n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v != 0 && n < sizeof(tmp));
	lb_raw(tmp + sizeof(tmp) - n, n);
}

static void
lb_addr(const struct policy_addr *a)
{
	char buf[64];

	if (a == NULL || policy_addr_format(a, buf, sizeof(buf)) != 0)
		LB_LIT("null");
	else
		lb_str(buf);
}

/* Start a line: {"ts":"...","event":"NAME" */
static void
lb_begin(const char *name)
{
	char ts[LOG_TS_LEN + 1];

	lb_len = 0;
	lb_failed = 0;
	log_timestamp(ts, sizeof(ts));
	LB_LIT("{\"ts\":");
	lb_str(ts);
	LB_LIT(",\"event\":");
	lb_str(name);
}

/* Finish the line and write it, or, when it could not be built, the same
 * "event too long" line log_event() writes. */
static void
lb_end(const char *name)
{
	LB_LIT("}\n");
	if (lb_failed) {
		json_t *o = json_pack("{s:s}", "error", "event too long");

		if (o != NULL)
			log_event(name, o);
		return;
	}
	log_write_all(lb, lb_len);
}

void
log_decision(const struct log_decision *d)
{
	char host[LOG_STR_MAX + sizeof(LOG_TRUNC_MARK)];
	int hlen;
	size_t i;

	lb_begin("egress.decision");
	LB_LIT(",\"request_id\":");
	lb_str(d->request_id);
	LB_LIT(",\"instance\":");
	lb_str(d->instance);
	LB_LIT(",\"plugin\":");
	lb_str(d->plugin);
	LB_LIT(",\"transport\":");
	lb_str(d->transport);
	LB_LIT(",\"host\":");
	if (d->host == NULL ||
	    (hlen = log_bound(d->host, d->host_len, host, sizeof(host))) < 0)
		LB_LIT("null");
	else
		lb_strn(host, (size_t)hlen);
	LB_LIT(",\"port\":");
	if (d->port != 0)
		lb_uint(d->port);
	else
		LB_LIT("null");
	if (d->allow)
		LB_LIT(",\"verdict\":\"allow\"");
	else {
		LB_LIT(",\"verdict\":\"deny\",\"reason\":");
		lb_str(d->reason);
		if (d->detail != NULL) {
			LB_LIT(",\"detail\":");
			lb_str(d->detail);
		}
	}
	LB_LIT(",\"addresses\":[");
	for (i = 0; i < d->naddrs; i++) {
		if (i > 0)
			LB_LIT(",");
		lb_addr(&d->addrs[i]);
	}
	LB_LIT("]");
	lb_end("egress.decision");
}

void
log_close_event(const struct log_close *c)
{
	lb_begin("egress.close");
	LB_LIT(",\"request_id\":");
	lb_str(c->request_id);
	LB_LIT(",\"instance\":");
	lb_str(c->instance);
	LB_LIT(",\"transport\":");
	lb_str(c->transport);
	LB_LIT(",\"connected\":");
	lb_addr(c->connected);
	LB_LIT(",\"status\":");
	if (c->status == 0)
		LB_LIT("null");
	else {
		if (c->status < 0)
			LB_LIT("-");
		lb_uint(c->status < 0 ? -(uint64_t)c->status :
					(uint64_t)c->status);
	}
	LB_LIT(",\"error\":");
	lb_str(c->error);
	if (c->reason != NULL) {
		LB_LIT(",\"reason\":");
		lb_str(c->reason);
	}
	LB_LIT(",\"bytes_in\":");
	lb_uint(c->bytes_in);
	LB_LIT(",\"bytes_out\":");
	lb_uint(c->bytes_out);
	LB_LIT(",\"duration_ms\":");
	lb_uint(c->duration_ms);
	lb_end("egress.close");
}
