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
#include <sys/socket.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <jansson.h>

#include <egress/error.h>

#include "broker/log.h"
#include "broker/net/share.h"

static void lq_stop(void);
static void lq_start(void);
static void lq_done(void);
static void log_emit(const char *instance, const char *plugin,
    const char *text, size_t len);

static int log_fd = -1; /* -1: stderr */
/* The line buffer of log_decision() and log_close_event(); lb_failed
 * latches an allocation failure or an over-long line until the event is
 * finished. */
static char *lb;
static size_t lb_len, lb_cap;
static int lb_failed;
static int log_borrowed; /* log_fd belongs to a test */
static char *log_path;
/* Lines written directly while held (log_hold()), until log_flush(). */
static char *hold_buf; /* LOG_HOLD_MAX bytes once allocated */
static size_t hold_len;
static int hold_on;

static int
log_open_file(const char *path)
{
	return open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY,
	    0640);
}

static void
log_drop_fd(void)
{
	log_flush(); /* everything held or queued goes to the old */
	lq_stop();   /* destination */
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
		lq_start();
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
	lq_start();
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
	lq_start();
	return 0;
}

void
log_close(void)
{
	log_detach();
	log_drop_fd();
	lq_done();
	free(log_path);
	log_path = NULL;
	free(lb);
	lb = NULL;
	lb_len = lb_cap = 0;
	hold_on = 0;
	free(hold_buf);
	hold_buf = NULL;
}

void
log_set_fd(int fd)
{
	log_drop_fd();
	if (fd >= 0) {
		log_fd = fd;
		log_borrowed = 1;
	}
	lq_start();
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
		if (c >= 0x20 && c <= 0x7e && c != '\\') {
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
log_flush(void)
{
	size_t n = hold_len;

	hold_len = 0; /* a write that fails drops them, as it drops one */
	if (n > 0)
		log_write_all(hold_buf, n);
}

void
log_hold(int on)
{
	if (!on)
		log_flush();
	hold_on = on != 0;
}

/* A line for a destination written directly: held, or written now. */
static void
log_direct(const char *text, size_t len)
{
	if (hold_on && len <= LOG_HOLD_MAX &&
	    (hold_buf != NULL || (hold_buf = malloc(LOG_HOLD_MAX)) != NULL)) {
		if (hold_len + len > LOG_HOLD_MAX)
			log_flush();
		memcpy(hold_buf + hold_len, text, len);
		hold_len += len;
		return;
	}
	log_flush(); /* in order */
	log_write_all(text, len);
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
	log_emit(NULL, NULL, text, n + 1);
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

/* Finish the line and write it (for instance of plugin), or, when it
 * could not be built, the same "event too long" line log_event()
 * writes. */
static void
lb_end(const char *name, const char *instance, const char *plugin)
{
	LB_LIT("}\n");
	if (lb_failed) {
		json_t *o = json_pack("{s:s}", "error", "event too long");

		if (o != NULL)
			log_event(name, o);
		return;
	}
	log_emit(instance, plugin, lb, lb_len);
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
	if (d->allow && d->via != NULL) {
		LB_LIT(",\"upstream_proxy\":");
		lb_str(d->via);
	}
	lb_end("egress.decision", d->instance, d->plugin);
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
	if (c->websocket) {
		LB_LIT(",\"messages_in\":");
		lb_uint(c->msgs_in);
		LB_LIT(",\"messages_out\":");
		lb_uint(c->msgs_out);
		LB_LIT(",\"close_code\":");
		if (c->close_code == 0)
			LB_LIT("null");
		else
			lb_uint(c->close_code);
	}
	if (c->starttls != NULL) {
		LB_LIT(",\"starttls\":");
		lb_str(c->starttls);
	}
	LB_LIT(",\"duration_ms\":");
	lb_uint(c->duration_ms);
	lb_end("egress.close", c->instance, NULL);
}

/* ---- Fair log throughput: queues per instance, drained round-robin ---- */

/* One line waiting for the destination. */
struct lq_line {
	struct lq_line *next;
	size_t len, off; /* off: bytes already written */
	char text[];
};

#define LQ_NAME_MAX 64 /* bytes of an instance or plugin name */

struct lq_group;

/* The queue of one instance ("" : the broker's own events). */
struct lq_queue {
	struct lq_queue *hnext;
	struct lq_queue *rprev, *rnext; /* in its group's ring while
					   non-empty */
	struct lq_group *g;
	struct lq_line *head, *tail;
	size_t n, bytes;
	size_t held; /* units of lq.share, at most n: a line that could
			not get one takes one of a line written before */
	int backlogged;
	size_t mark; /* the backlog ends at this many lines */
	struct log_waiter *waiters;
	char name[LQ_NAME_MAX + 1];
};

/* A plugin: the ring of its instances' non-empty queues. */
struct lq_group {
	struct lq_group *hnext;
	struct lq_group *rprev, *rnext; /* in the ring while it has lines */
	struct lq_queue *ring;		/* the next queue it serves */
	size_t nqueues;			/* queues that point at it */
	char name[LQ_NAME_MAX + 1];
};

#define LQ_BUCKETS 64

static struct {
	struct event_base *base;
	struct event *ev; /* the destination can take more */
	int on, wfd, own_wfd, sock;
	struct lq_line *cur; /* being written; in no queue */
	struct lq_queue *qs[LQ_BUCKETS];
	struct lq_group *gs[LQ_BUCKETS];
	struct lq_group *ring; /* the next group served */
	size_t nlines;
	uint64_t backlogs;
	struct share *share;
} lq = { .wfd = -1 };

static size_t
lq_hash(const char *s)
{
	uint32_t h = 2166136261u;

	while (*s != '\0')
		h = (h ^ (unsigned char)*s++) * 16777619u;
	return h % LQ_BUCKETS;
}

static struct lq_group *
lq_group_get(const char *name)
{
	struct lq_group *g, **pp = &lq.gs[lq_hash(name)];

	for (g = *pp; g != NULL; g = g->hnext)
		if (strcmp(g->name, name) == 0)
			return g;
	if ((g = calloc(1, sizeof(*g))) == NULL)
		return NULL;
	memcpy(g->name, name, strlen(name) + 1);
	g->hnext = *pp;
	*pp = g;
	return g;
}

static struct lq_queue *
lq_find(const char *name)
{
	struct lq_queue *q;

	for (q = lq.qs[lq_hash(name)]; q != NULL; q = q->hnext)
		if (strcmp(q->name, name) == 0)
			return q;
	return NULL;
}

/* The queue of instance, made in plugin's group (NULL: its own). */
static struct lq_queue *
lq_get(const char *instance, const char *plugin)
{
	struct lq_queue *q, **pp;
	struct lq_group *g;
	const char *g_name;

	if ((q = lq_find(instance)) != NULL)
		return q;
	/* A configured instance's plugin, whatever the event names (an
	 * egress.close names none). */
	if (lq.share != NULL && instance[0] != '\0' &&
	    (g_name = share_group(lq.share, instance)) != NULL)
		plugin = g_name;
	if (plugin == NULL)
		plugin = instance;
	if (strlen(instance) > LQ_NAME_MAX || strlen(plugin) > LQ_NAME_MAX ||
	    (g = lq_group_get(plugin)) == NULL)
		return NULL;
	if ((q = calloc(1, sizeof(*q))) == NULL)
		return NULL; /* g stays, empty, for the next try */
	memcpy(q->name, instance, strlen(instance) + 1);
	q->g = g;
	g->nqueues++;
	pp = &lq.qs[lq_hash(instance)];
	q->hnext = *pp;
	*pp = q;
	return q;
}

/* Unlink x from the ring whose cursor is *ring. */
#define LQ_RING_DEL(ring, x) \
	do { \
		if ((x)->rnext == (x)) \
			*(ring) = NULL; \
		else { \
			(x)->rprev->rnext = (x)->rnext; \
			(x)->rnext->rprev = (x)->rprev; \
			if (*(ring) == (x)) \
				*(ring) = (x)->rnext; \
		} \
		(x)->rnext = (x)->rprev = NULL; \
	} while (0)

/* Insert x just before the cursor (served last in this round). */
#define LQ_RING_ADD(ring, x) \
	do { \
		if (*(ring) == NULL) { \
			(x)->rnext = (x)->rprev = (x); \
			*(ring) = (x); \
		} else { \
			(x)->rnext = *(ring); \
			(x)->rprev = (*(ring))->rprev; \
			(x)->rprev->rnext = (x); \
			(*(ring))->rprev = (x); \
		} \
	} while (0)

static void
lq_append(struct lq_queue *q, struct lq_line *l)
{
	if (q->tail != NULL)
		q->tail->next = l;
	else
		q->head = l;
	q->tail = l;
	if (q->n++ == 0) {
		if (q->g->ring == NULL)
			LQ_RING_ADD(&lq.ring, q->g);
		LQ_RING_ADD(&q->g->ring, q);
	}
	q->bytes += l->len;
	lq.nlines++;
}

/* Free q once it is empty and nobody waits on it. */
static void
lq_put(struct lq_queue *q)
{
	struct lq_queue **pp;
	struct lq_group *g = q->g, **gp;

	if (q->n > 0 || q->waiters != NULL || q->backlogged)
		return;
	for (pp = &lq.qs[lq_hash(q->name)]; *pp != q; pp = &(*pp)->hnext)
		;
	*pp = q->hnext;
	free(q);
	if (--g->nqueues > 0)
		return;
	for (gp = &lq.gs[lq_hash(g->name)]; *gp != g; gp = &(*gp)->hnext)
		;
	*gp = g->hnext;
	free(g);
}

/* The backlog of q is over: wake whoever waits (from the loop). */
static void
lq_unbacklog(struct lq_queue *q)
{
	struct log_waiter *w;

	q->backlogged = 0;
	while ((w = q->waiters) != NULL) {
		q->waiters = w->next;
		w->next = w->prev = NULL;
		w->q = NULL;
		w->wake(w->arg);
	}
}

/*
 * Take the next line: from the group at the ring's cursor, its queue at
 * its cursor; both cursors move on, so each plugin, and each instance
 * within a plugin, gets one line in turn. Set *ret_q to the queue.
 */
static struct lq_line *
lq_pop(struct lq_queue **ret_q)
{
	struct lq_group *g = lq.ring;
	struct lq_queue *q;
	struct lq_line *l;

	if (g == NULL)
		return NULL;
	q = g->ring;
	l = q->head;
	if ((q->head = l->next) == NULL)
		q->tail = NULL;
	l->next = NULL;
	q->n--;
	q->bytes -= l->len;
	lq.nlines--;
	g->ring = q->rnext;
	if (q->n == 0)
		LQ_RING_DEL(&g->ring, q);
	lq.ring = g->rnext;
	if (g->ring == NULL)
		LQ_RING_DEL(&lq.ring, g);
	if (q->held > q->n) {
		share_release(lq.share, q->name, 1);
		q->held--;
	}
	*ret_q = q;
	return l;
}

static ssize_t
lq_write(const char *p, size_t n)
{
	if (lq.sock)
		return send(lq.wfd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
	return write(lq.wfd, p, n);
}

static int
lq_again(void)
{
	return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
}

/* Write l from l->off until done (1), blocked (0) or failed (-1: the
 * line is dropped, as a failed direct write is). With wait, poll until
 * the destination takes it. */
static int
lq_write_line(struct lq_line *l, int wait)
{
	struct pollfd p = { .fd = lq.wfd, .events = POLLOUT };
	ssize_t w;

	while (l->off < l->len) {
		w = lq_write(l->text + l->off, l->len - l->off);
		if (w > 0) {
			l->off += (size_t)w;
			continue;
		}
		if (w < 0 && !lq_again())
			return -1;
		if (!wait)
			return 0;
		if (poll(&p, 1, -1) < 0 && errno != EINTR)
			return -1;
	}
	return 1;
}

/* Write what the destination takes now, fairly; with wait, all of it. */
static void
lq_drain(int wait)
{
	struct lq_queue *q;

	for (;;) {
		if (lq.cur == NULL) {
			if ((lq.cur = lq_pop(&q)) == NULL)
				return;
			if (q->backlogged && q->n <= q->mark)
				lq_unbacklog(q);
			lq_put(q);
		}
		if (lq_write_line(lq.cur, wait) == 0) {
			(void)event_add(lq.ev, NULL);
			return;
		}
		free(lq.cur);
		lq.cur = NULL;
	}
}

static void
lq_write_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	lq_drain(0);
}

static struct lq_line *
lq_line_new(const char *text, size_t len)
{
	struct lq_line *l;

	if ((l = malloc(sizeof(*l) + len)) == NULL)
		return NULL;
	l->next = NULL;
	l->len = len;
	l->off = 0;
	memcpy(l->text, text, len);
	return l;
}

static void
lq_log_backlogged(const struct lq_queue *q)
{
	json_t *o;

	o = json_pack("{s:s, s:s, s:I}", "status", "backlogged", "instance",
	    q->name, "queued", (json_int_t)q->n);
	if (o != NULL)
		log_event("egress.log", o);
}

/* Write everything queued, blocking, then text: the fallback when a line
 * cannot be queued (no memory, the broker's queue full). */
static void
lq_write_through(const char *text, size_t len)
{
	lq_drain(1);
	log_write_all(text, len);
}

static void
log_emit(const char *instance, const char *plugin, const char *text,
    size_t len)
{
	struct lq_queue *q;
	struct lq_line *l;
	ssize_t w;
	int fresh;

	if (!lq.on) {
		log_direct(text, len);
		return;
	}
	if (lq.cur == NULL && lq.nlines == 0) {
		/* Nothing waits: one write, as without the queues. */
		w = lq_write(text, len);
		if (w >= 0 && (size_t)w == len)
			return;
		if (w < 0 && !lq_again())
			return; /* dropped, as a direct write would be */
		if ((lq.cur = lq_line_new(text, len)) == NULL) {
			log_write_all(text + (w > 0 ? w : 0),
			    len - (size_t)(w > 0 ? w : 0));
			return;
		}
		lq.cur->off = w > 0 ? (size_t)w : 0;
		(void)event_add(lq.ev, NULL);
		return;
	}
	if (instance == NULL)
		instance = "";
	if ((q = lq_get(instance, plugin)) == NULL ||
	    (q->name[0] == '\0' && q->bytes + len > LOG_QUEUE_BROKER_BYTES) ||
	    (l = lq_line_new(text, len)) == NULL) {
		lq_write_through(text, len);
		return;
	}
	fresh = 0;
	if (q->name[0] != '\0' && lq.share != NULL) {
		if (share_acquire(lq.share, q->name, plugin, 1) == 0)
			q->held++;
		else if (!q->backlogged) {
			q->backlogged = 1;
			q->mark = q->n / 2;
			lq.backlogs++;
			fresh = 1;
		}
	}
	lq_append(q, l);
	(void)event_add(lq.ev, NULL);
	if (fresh)
		lq_log_backlogged(q);
}

/* Write to the destination without blocking, if it can block. */
static void
lq_start(void)
{
	int fd = log_fd >= 0 ? log_fd : STDERR_FILENO;
	char path[64];
	struct stat st;

	if (lq.base == NULL || lq.on || fstat(fd, &st) != 0)
		return;
	lq.sock = S_ISSOCK(st.st_mode);
	lq.own_wfd = 0;
	if (lq.sock)
		lq.wfd = fd; /* send(MSG_DONTWAIT): its flags stay */
	else if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode)) {
		/* A description of our own, so that O_NONBLOCK does not
		 * change the one we share with whoever started us. */
		(void)snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		lq.wfd = open(path,
		    O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY | O_APPEND);
		if (lq.wfd < 0)
			return; /* written blocking, as before */
		lq.own_wfd = 1;
	} else
		return; /* a regular file: never blocks for long */
	if ((lq.ev = event_new(lq.base, lq.wfd, EV_WRITE, lq_write_cb,
		 NULL)) == NULL) {
		if (lq.own_wfd)
			(void)close(lq.wfd);
		lq.wfd = -1;
		return;
	}
	lq.on = 1;
}

/* Write everything queued (blocking) and stop queueing. */
static void
lq_stop(void)
{
	struct lq_queue *q, *next;
	size_t i;

	if (!lq.on)
		return;
	lq_drain(1);
	free(lq.cur);
	lq.cur = NULL;
	event_free(lq.ev);
	lq.ev = NULL;
	if (lq.own_wfd)
		(void)close(lq.wfd);
	lq.wfd = -1;
	lq.on = 0;
	/* Every queue is empty now: end the backlogs. */
	for (i = 0; i < LQ_BUCKETS; i++)
		for (q = lq.qs[i]; q != NULL; q = next) {
			next = q->hnext;
			if (q->backlogged)
				lq_unbacklog(q);
			lq_put(q);
		}
}

static void
lq_done(void)
{
	share_free(lq.share);
	lq.share = NULL;
}

int
log_attach(struct event_base *base)
{
	if (base == NULL)
		return EGRESS_ERR_INVALID;
	lq.base = base;
	lq_start();
	return 0;
}

void
log_detach(void)
{
	lq_stop();
	lq.base = NULL;
}

int
log_configure(const struct share_member *m, size_t n)
{
	if (lq.share == NULL &&
	    (lq.share = share_new(LOG_QUEUE_LINES, LOG_QUEUE_GUARANTEE,
		 LOG_QUEUE_PER_INSTANCE)) == NULL)
		return EGRESS_ERR_NOMEM;
	return share_configure(lq.share, m, n);
}

int
log_backlog_wait(const char *instance, struct log_waiter *w)
{
	struct lq_queue *q;

	if (!lq.on || instance == NULL || (q = lq_find(instance)) == NULL ||
	    !q->backlogged)
		return 0;
	if (w != NULL && w->q == NULL && w->wake != NULL) {
		w->q = q;
		w->prev = NULL;
		w->next = q->waiters;
		if (q->waiters != NULL)
			q->waiters->prev = w;
		q->waiters = w;
	}
	return 1;
}

void
log_waiter_cancel(struct log_waiter *w)
{
	struct lq_queue *q = w->q;

	if (q == NULL)
		return;
	if (w->prev != NULL)
		w->prev->next = w->next;
	else
		q->waiters = w->next;
	if (w->next != NULL)
		w->next->prev = w->prev;
	w->next = w->prev = NULL;
	w->q = NULL;
	lq_put(q);
}

size_t
log_queued(const char *instance)
{
	const struct lq_queue *q;

	if (instance == NULL)
		return lq.nlines;
	return (q = lq_find(instance)) != NULL ? q->n : 0;
}

uint64_t
log_backlogs(void)
{
	return lq.backlogs;
}
