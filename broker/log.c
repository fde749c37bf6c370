/* SPDX-License-Identifier: ISC */
/*
 * The JSON-lines host log of egressd: one destination (stderr or a file
 * opened O_APPEND), one write(2) per event so that lines never interleave,
 * reopen for rotation, and the builders of egress.decision and
 * egress.close. See log.h and docs/egressd.md.
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

static int log_fd = -1;		/* -1: stderr */
static int log_borrowed;	/* log_fd belongs to a test */
static char *log_path;

static int
log_open_file(const char *path)
{
	return open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC |
	    O_NOCTTY, 0640);
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
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC |
	    O_NOCTTY, 0640);
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

static void
log_timestamp(char *buf, size_t n)
{
	struct timespec ts;
	struct tm tm;

	(void)clock_gettime(CLOCK_REALTIME, &ts);
	(void)gmtime_r(&ts.tv_sec, &tm);
	(void)snprintf(buf, n, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
	    (tm.tm_year + 1900) % 10000, (tm.tm_mon + 1) % 100,
	    tm.tm_mday % 100, tm.tm_hour % 100, tm.tm_min % 100,
	    tm.tm_sec % 100, (int)(ts.tv_nsec / 1000000) % 1000);
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
		    (text = json_dumps(line, JSON_COMPACT |
		    JSON_PRESERVE_ORDER)) == NULL)
			goto out;
		n = strlen(text);
	}
	text[n] = '\n';		/* replaces the NUL; written by length */
	log_write_all(text, n + 1);
out:
	free(text);
	json_decref(line);
	json_decref(obj);
}

static json_t *
log_opt_string(const char *s)
{
	return s != NULL ? json_string(s) : json_null();
}

static json_t *
log_addr(const struct policy_addr *a)
{
	char buf[64];

	if (a == NULL || policy_addr_format(a, buf, sizeof(buf)) != 0)
		return json_null();
	return json_string(buf);
}

void
log_decision(const struct log_decision *d)
{
	json_t *o, *addrs;
	size_t i;

	if ((o = json_object()) == NULL)
		return;
	if ((addrs = json_array()) == NULL) {
		json_decref(o);
		return;
	}
	for (i = 0; i < d->naddrs; i++)
		(void)json_array_append_new(addrs, log_addr(&d->addrs[i]));
	(void)json_object_set_new(o, "request_id",
	    log_opt_string(d->request_id));
	(void)json_object_set_new(o, "instance", log_opt_string(d->instance));
	(void)json_object_set_new(o, "plugin", log_opt_string(d->plugin));
	(void)json_object_set_new(o, "transport",
	    log_opt_string(d->transport));
	(void)json_object_set_new(o, "host", d->host != NULL ?
	    log_bounded_string(d->host, d->host_len) : json_null());
	(void)json_object_set_new(o, "port", d->port != 0 ?
	    json_integer(d->port) : json_null());
	(void)json_object_set_new(o, "verdict",
	    json_string(d->allow ? "allow" : "deny"));
	if (!d->allow)
		(void)json_object_set_new(o, "reason",
		    log_opt_string(d->reason));
	(void)json_object_set_new(o, "addresses", addrs);
	log_event("egress.decision", o);
}

void
log_close_event(const struct log_close *c)
{
	json_t *o;

	if ((o = json_object()) == NULL)
		return;
	(void)json_object_set_new(o, "request_id",
	    log_opt_string(c->request_id));
	(void)json_object_set_new(o, "instance", log_opt_string(c->instance));
	(void)json_object_set_new(o, "connected", log_addr(c->connected));
	(void)json_object_set_new(o, "status", c->status != 0 ?
	    json_integer(c->status) : json_null());
	(void)json_object_set_new(o, "error", log_opt_string(c->error));
	(void)json_object_set_new(o, "bytes_in",
	    json_integer((json_int_t)c->bytes_in));
	(void)json_object_set_new(o, "bytes_out",
	    json_integer((json_int_t)c->bytes_out));
	(void)json_object_set_new(o, "duration_ms",
	    json_integer((json_int_t)c->duration_ms));
	log_event("egress.close", o);
}
