/* SPDX-License-Identifier: ISC */
/*
 * Bounded counters and histograms of the broker, their Prometheus text
 * exposition, and the process metrics read from /proc/self. Instances live in an array sorted by name (binary
 * search; insertion only when a new instance is first seen). See
 * metrics.h.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <egress/error.h>

#include "broker/metrics.h"

/* Bucket bounds, in microseconds (exposed in seconds). */
static const uint64_t metrics_bounds_us[METRICS_BUCKETS] = {
	500,
	1000,
	2500,
	5000,
	10000,
	25000,
	50000,
	100000,
	250000,
	500000,
	1000000,
	2500000,
};

struct lcount {
	char label[METRICS_LABEL_LEN];
	uint64_t n;
};

/* A family of counters by one label; overflow goes to "other". */
struct lset {
	size_t n;
	struct lcount v[METRICS_LABELS_MAX + 1];
};

struct hist {
	uint64_t b[METRICS_BUCKETS + 1]; /* per bucket, last is +Inf */
	uint64_t count;
	uint64_t sum_us;
};

struct minst {
	char name[METRICS_LABEL_LEN + 1];
	uint64_t allowed;
	struct lset denied;
	uint64_t bytes_in, bytes_out;
};

struct metrics {
	struct minst *inst; /* sorted by name */
	size_t ninst, cap;
	uint64_t inst_dropped; /* events past METRICS_INSTANCES_MAX */
	struct lset upstream_errors;
	struct lset closes;	 /* by transport */
	struct lset ws_messages; /* by direction */
	struct lset dns;
	struct hist h_decision, h_dns, h_connect;
};

struct metrics *
metrics_new(void)
{
	return calloc(1, sizeof(struct metrics));
}

void
metrics_free(struct metrics *m)
{
	if (m == NULL)
		return;
	free(m->inst);
	free(m);
}

static struct lcount *
lset_find(struct lset *s, const char *label)
{
	size_t i;

	for (i = 0; i < s->n; i++)
		if (strcmp(s->v[i].label, label) == 0)
			return &s->v[i];
	return NULL;
}

static void
lset_add(struct lset *s, const char *label, uint64_t k)
{
	struct lcount *c;

	if (label == NULL)
		label = "unknown";
	if (strlen(label) >= METRICS_LABEL_LEN)
		label = "other";
	if ((c = lset_find(s, label)) == NULL && s->n >= METRICS_LABELS_MAX)
		c = lset_find(s, label = "other");
	if (c == NULL) {
		/* Room for METRICS_LABELS_MAX labels and "other". */
		if (s->n > METRICS_LABELS_MAX)
			return;
		c = &s->v[s->n++];
		(void)strcpy(c->label, label);
	}
	c->n += k;
}

static void
hist_add(struct hist *h, uint64_t us)
{
	size_t i;

	for (i = 0; i < METRICS_BUCKETS && us > metrics_bounds_us[i]; i++)
		;
	h->b[i]++;
	h->count++;
	h->sum_us += us;
}

static int
minst_cmp(const void *key, const void *elt)
{
	return strcmp(key, ((const struct minst *)elt)->name);
}

static const struct minst *
minst_find(const struct metrics *m, const char *name)
{
	if (m->ninst == 0)
		return NULL;
	return bsearch(name, m->inst, m->ninst, sizeof(m->inst[0]), minst_cmp);
}

/* Find or add instance name; NULL when full, too long, or no memory. */
static struct minst *
minst_get(struct metrics *m, const char *name)
{
	struct minst *p;
	size_t lo = 0, hi = m->ninst, mid;

	if (name == NULL || strlen(name) > METRICS_LABEL_LEN)
		return NULL;
	if ((p = (struct minst *)minst_find(m, name)) != NULL)
		return p;
	if (m->ninst >= METRICS_INSTANCES_MAX)
		return NULL;
	if (m->ninst == m->cap) {
		size_t ncap = m->cap != 0 ? m->cap * 2 : 16;

		p = reallocarray(m->inst, ncap, sizeof(*p));
		if (p == NULL)
			return NULL;
		m->inst = p;
		m->cap = ncap;
	}
	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (strcmp(m->inst[mid].name, name) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	memmove(&m->inst[lo + 1], &m->inst[lo],
	    (m->ninst - lo) * sizeof(m->inst[0]));
	m->ninst++;
	p = &m->inst[lo];
	memset(p, 0, sizeof(*p));
	(void)strcpy(p->name, name);
	return p;
}

void
metrics_decision(struct metrics *m, const char *instance, int allow,
    const char *reason, uint64_t usec)
{
	struct minst *p;

	if (m == NULL)
		return;
	hist_add(&m->h_decision, usec);
	if ((p = minst_get(m, instance)) == NULL) {
		m->inst_dropped++;
		return;
	}
	if (allow)
		p->allowed++;
	else
		lset_add(&p->denied, reason, 1);
}

void
metrics_upstream_error(struct metrics *m, const char *code)
{
	if (m != NULL)
		lset_add(&m->upstream_errors, code, 1);
}

void
metrics_close(struct metrics *m, const char *transport, int websocket,
    uint64_t msgs_in, uint64_t msgs_out)
{
	if (m == NULL)
		return;
	lset_add(&m->closes, transport, 1);
	if (websocket) {
		lset_add(&m->ws_messages, "in", msgs_in);
		lset_add(&m->ws_messages, "out", msgs_out);
	}
}

void
metrics_dns(struct metrics *m, const char *status, uint64_t usec)
{
	if (m == NULL)
		return;
	lset_add(&m->dns, status, 1);
	hist_add(&m->h_dns, usec);
}

void
metrics_connect(struct metrics *m, uint64_t usec)
{
	if (m != NULL)
		hist_add(&m->h_connect, usec);
}

void
metrics_bytes(struct metrics *m, const char *instance, uint64_t in,
    uint64_t out)
{
	struct minst *p;

	if (m == NULL)
		return;
	if ((p = minst_get(m, instance)) == NULL) {
		m->inst_dropped++;
		return;
	}
	p->bytes_in += in;
	p->bytes_out += out;
}

void
metrics_instance_get(const struct metrics *m, const char *instance,
    struct metrics_instance *ret)
{
	const struct minst *p = NULL;
	size_t i;

	memset(ret, 0, sizeof(*ret));
	if (m != NULL && instance != NULL)
		p = minst_find(m, instance);
	if (p == NULL)
		return;
	ret->allowed = p->allowed;
	ret->bytes_in = p->bytes_in;
	ret->bytes_out = p->bytes_out;
	ret->nreasons = p->denied.n;
	for (i = 0; i < p->denied.n; i++) {
		(void)strcpy(ret->reasons[i].reason, p->denied.v[i].label);
		ret->reasons[i].count = p->denied.v[i].n;
		ret->denied += p->denied.v[i].n;
	}
}

/* Write a label value with \\, \" and \n escaped. */
static void
put_label(FILE *f, const char *s)
{
	for (; *s != '\0'; s++) {
		if (*s == '\\' || *s == '"')
			(void)fprintf(f, "\\%c", *s);
		else if (*s == '\n')
			(void)fputs("\\n", f);
		else
			(void)fputc(*s, f);
	}
}

static void
put_head(FILE *f, const char *name, const char *type, const char *help)
{
	(void)fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name,
	    type);
}

/* One sample without labels. */
static void
put_u64(FILE *f, const char *name, const char *type, const char *help,
    uint64_t v)
{
	put_head(f, name, type, help);
	(void)fprintf(f, "%s %llu\n", name, (unsigned long long)v);
}

static void
put_double(FILE *f, const char *name, const char *type, const char *help,
    double v)
{
	put_head(f, name, type, help);
	(void)fprintf(f, "%s %.2f\n", name, v);
}

static void
put_hist(FILE *f, const char *name, const char *help, const struct hist *h)
{
	uint64_t cum = 0;
	size_t i;

	put_head(f, name, "histogram", help);
	for (i = 0; i < METRICS_BUCKETS; i++) {
		cum += h->b[i];
		(void)fprintf(f, "%s_bucket{le=\"%g\"} %llu\n", name,
		    (double)metrics_bounds_us[i] / 1e6,
		    (unsigned long long)cum);
	}
	cum += h->b[METRICS_BUCKETS];
	(void)fprintf(f, "%s_bucket{le=\"+Inf\"} %llu\n", name,
	    (unsigned long long)cum);
	(void)fprintf(f, "%s_sum %.6f\n%s_count %llu\n", name,
	    (double)h->sum_us / 1e6, name, (unsigned long long)h->count);
}

static void
put_lset(FILE *f, const char *name, const char *label, const struct lset *s)
{
	size_t i;

	for (i = 0; i < s->n; i++) {
		(void)fprintf(f, "%s{%s=\"", name, label);
		put_label(f, s->v[i].label);
		(void)fprintf(f, "\"} %llu\n", (unsigned long long)s->v[i].n);
	}
}

/* egressd_decisions_total{instance,verdict,reason}: one sample. */
static void
put_decision(FILE *f, const char *instance, const char *verdict,
    const char *reason, uint64_t n)
{
	(void)fputs("egressd_decisions_total{instance=\"", f);
	put_label(f, instance);
	(void)fprintf(f, "\",verdict=\"%s\",reason=\"", verdict);
	put_label(f, reason);
	(void)fprintf(f, "\"} %llu\n", (unsigned long long)n);
}

/* Build and configuration state, from the facts the broker supplies. */
static void
put_facts(FILE *f, const struct metrics_facts *c)
{
	put_head(f, "egressd_build_info", "gauge",
	    "The running egressd's version; always 1.");
	(void)fputs("egressd_build_info{version=\"", f);
	put_label(f, c->version != NULL ? c->version : "unknown");
	(void)fputs("\"} 1\n", f);
	put_u64(f, "egressd_config_valid", "gauge",
	    "1 while a "
	    "configuration is in force, 0 while the file is broken (every "
	    "request is then denied policy-unavailable).",
	    c->config_valid ? 1 : 0);
	put_u64(f, "egressd_config_generation", "gauge",
	    "Generation of the "
	    "last configuration swapped in (1 at start).",
	    c->config_generation);
	put_u64(f, "egressd_config_last_reload_success_timestamp_seconds",
	    "gauge", "Unix time of the last successful configuration load.",
	    c->config_loaded_unix > 0 ? (uint64_t)c->config_loaded_unix : 0);
	put_u64(f, "egressd_config_reloads_total", "counter",
	    "Successful "
	    "configuration re-reads since start.",
	    c->config_reloads);
	put_u64(f, "egressd_config_reload_failures_total", "counter",
	    "Failed configuration re-reads since start.",
	    c->config_reload_failures);
}

static void
put_decisions(FILE *f, const struct metrics *m)
{
	size_t i, j;

	put_head(f, "egressd_decisions_total", "counter",
	    "Egress decisions "
	    "by instance, verdict (allow, deny) and reason (granted on "
	    "allow).");
	for (i = 0; i < m->ninst; i++) {
		const struct minst *p = &m->inst[i];

		put_decision(f, p->name, "allow", "granted", p->allowed);
		for (j = 0; j < p->denied.n; j++)
			put_decision(f, p->name, "deny", p->denied.v[j].label,
			    p->denied.v[j].n);
	}
	put_u64(f, "egressd_metrics_dropped_total", "counter",
	    "Events not "
	    "counted per instance (instance cap).",
	    m->inst_dropped);
}

static void
put_leases(FILE *f, const struct metrics_facts *c)
{
	size_t i;

	put_head(f, "egressd_leases_in_use", "gauge",
	    "Upstream connection "
	    "leases held, by instance.");
	for (i = 0; i < c->nleases; i++) {
		(void)fputs("egressd_leases_in_use{instance=\"", f);
		put_label(f,
		    c->leases[i].instance != NULL ? c->leases[i].instance :
						    "");
		(void)fprintf(f, "\"} %llu\n",
		    (unsigned long long)c->leases[i].value);
	}
}

/* The shares of upstream connections and of the log's queues, and the
 * event loop's polling. */
static void
put_shares(FILE *f, const struct metrics_facts *c)
{
	put_u64(f, "egressd_upstream_connections_max", "gauge",
	    "Upstream connections all instances may hold together (half "
	    "RLIMIT_NOFILE less 64).",
	    c->upstream_max);
	put_u64(f, "egressd_log_queued_lines", "gauge",
	    "Log lines waiting for the log destination to take them.",
	    c->log_queued);
	put_u64(f, "egressd_log_backlogs_total", "counter",
	    "Times an instance's log queue passed its share (its connections "
	    "stopped being read).",
	    c->log_backlogs);
	put_u64(f, "egressd_busy_poll_hits_total", "counter",
	    "Times the event loop, polling instead of sleeping, found work "
	    "after a poll that found none (a wake-up saved).",
	    c->poll_hits);
	put_double(f, "egressd_busy_poll_seconds_total", "counter",
	    "Time the event loop spent in polls that found nothing.",
	    (double)c->poll_us / 1e6);
}

static void
put_traffic(FILE *f, const struct metrics *m)
{
	size_t i;

	put_head(f, "egressd_upstream_errors_total", "counter",
	    "Upstream "
	    "failures by guest-visible code.");
	put_lset(f, "egressd_upstream_errors_total", "code",
	    &m->upstream_errors);
	put_head(f, "egressd_connections_closed_total", "counter",
	    "Connections "
	    "and requests ended (one egress.close each), by transport.");
	put_lset(f, "egressd_connections_closed_total", "transport",
	    &m->closes);
	put_head(f, "egressd_websocket_messages_total", "counter",
	    "WebSocket "
	    "messages by direction (in: from the upstream).");
	put_lset(f, "egressd_websocket_messages_total", "direction",
	    &m->ws_messages);
	put_head(f, "egressd_dns_lookups_total", "counter",
	    "DNS resolutions "
	    "by status.");
	put_lset(f, "egressd_dns_lookups_total", "status", &m->dns);
	put_hist(f, "egressd_dns_lookup_seconds",
	    "DNS resolution latency (A and AAAA together).", &m->h_dns);
	put_hist(f, "egressd_decision_seconds",
	    "Time from request to verdict.", &m->h_decision);
	put_hist(f, "egressd_connect_seconds",
	    "Upstream connect latency, TCP and TLS.", &m->h_connect);
	put_head(f, "egressd_bytes_total", "counter",
	    "Body bytes by "
	    "instance and direction (in: from the upstream).");
	for (i = 0; i < m->ninst; i++) {
		(void)fputs("egressd_bytes_total{instance=\"", f);
		put_label(f, m->inst[i].name);
		(void)fprintf(f, "\",direction=\"in\"} %llu\n",
		    (unsigned long long)m->inst[i].bytes_in);
		(void)fputs("egressd_bytes_total{instance=\"", f);
		put_label(f, m->inst[i].name);
		(void)fprintf(f, "\",direction=\"out\"} %llu\n",
		    (unsigned long long)m->inst[i].bytes_out);
	}
}

static void
put_process(FILE *f, const struct metrics_process *p)
{
	put_double(f, "process_cpu_seconds_total", "counter",
	    "Total user and system CPU time spent in seconds.",
	    p->cpu_seconds);
	put_u64(f, "process_open_fds", "gauge",
	    "Number of open file descriptors.", p->open_fds);
	put_u64(f, "process_max_fds", "gauge",
	    "Maximum number of open file descriptors.", p->max_fds);
	put_u64(f, "process_resident_memory_bytes", "gauge",
	    "Resident memory size in bytes.", p->resident_bytes);
	put_u64(f, "process_virtual_memory_bytes", "gauge",
	    "Virtual memory size in bytes.", p->virtual_bytes);
	put_double(f, "process_start_time_seconds", "gauge",
	    "Start time of the process since unix epoch in seconds.",
	    p->start_time);
}

int
metrics_format(const struct metrics *m, const struct metrics_facts *facts,
    char **ret_text, size_t *ret_len)
{
	static const struct metrics empty;
	static const struct metrics_facts nofacts;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	if (m == NULL)
		m = &empty;
	if (facts == NULL)
		facts = &nofacts;
	if ((f = open_memstream(&buf, &len)) == NULL)
		return EGRESS_ERR_NOMEM;
	put_facts(f, facts);
	put_decisions(f, m);
	put_leases(f, facts);
	put_shares(f, facts);
	put_traffic(f, m);
	if (facts->process != NULL)
		put_process(f, facts->process);
	if (ferror(f) != 0) {
		(void)fclose(f);
		free(buf);
		return EGRESS_ERR_NOMEM;
	}
	if (fclose(f) != 0) {
		free(buf);
		return EGRESS_ERR_NOMEM;
	}
	*ret_text = buf;
	*ret_len = len;
	return 0;
}

/* ---- Process ----------------------------------------------------------- */

/* The boot time (btime of /proc/stat), in Unix seconds; 0 if unknown. */
static uint64_t
boot_time(void)
{
	char line[256];
	unsigned long long bt = 0;
	FILE *f;

	if ((f = fopen("/proc/stat", "re")) == NULL)
		return 0;
	while (fgets(line, sizeof(line), f) != NULL)
		// NOLINTNEXTLINE(cert-err34-c): a number the kernel wrote
		if (sscanf(line, "btime %llu", &bt) == 1)
			break;
	(void)fclose(f);
	return bt;
}

/* Open descriptors: the entries of /proc/self/fd but the one reading it. */
static int
count_fds(uint64_t *ret)
{
	struct dirent *e;
	uint64_t n = 0;
	DIR *d;

	if ((d = opendir("/proc/self/fd")) == NULL)
		return EGRESS_ERR_IO;
	while ((e = readdir(d)) != NULL)
		// NOLINTNEXTLINE(cert-err34-c): /proc/self/fd names are numbers
		if (e->d_name[0] != '.' && atoi(e->d_name) != dirfd(d))
			n++;
	(void)closedir(d);
	*ret = n;
	return 0;
}

int
metrics_process_read(struct metrics_process *ret)
{
	char buf[1024], *p;
	unsigned long long ut, st, start, vsize;
	long long rss;
	long tck = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
	struct metrics_process r;
	struct rlimit rl;
	size_t n;
	FILE *f;

	memset(&r, 0, sizeof(r));
	if (tck <= 0 || page <= 0 || count_fds(&r.open_fds) != 0 ||
	    (f = fopen("/proc/self/stat", "re")) == NULL)
		return EGRESS_ERR_IO;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	(void)fclose(f);
	buf[n] = '\0';
	/* Fields after the command name, which may hold spaces and ')'. */
	if ((p = strrchr(buf, ')')) == NULL ||
	    // NOLINTNEXTLINE(cert-err34-c): numbers the kernel wrote
	    sscanf(p + 1,
		" %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu "
		"%llu %*d %*d %*d %*d %*d %*d %llu %llu %lld",
		&ut, &st, &start, &vsize, &rss) != 5)
		return EGRESS_ERR_IO;
	r.cpu_seconds = (double)(ut + st) / (double)tck;
	r.virtual_bytes = vsize;
	r.resident_bytes = rss > 0 ? (uint64_t)rss * (uint64_t)page : 0;
	r.start_time = (double)boot_time() + (double)start / (double)tck;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
		r.max_fds = rl.rlim_cur == RLIM_INFINITY ?
		    UINT64_MAX :
		    (uint64_t)rl.rlim_cur;
	*ret = r;
	return 0;
}
