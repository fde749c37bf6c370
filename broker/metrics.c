/* SPDX-License-Identifier: ISC */
/*
 * Bounded counters and histograms of the broker, and their Prometheus
 * text exposition. Instances live in an array sorted by name (binary
 * search; insertion only when a new instance is first seen). See
 * metrics.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <egress/error.h>

#include "broker/metrics.h"

/* Bucket bounds, in microseconds (exposed in seconds). */
static const uint64_t metrics_bounds_us[METRICS_BUCKETS] = {
	500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000,
	1000000, 2500000,
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
	uint64_t b[METRICS_BUCKETS + 1];	/* per bucket, last is +Inf */
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
	struct minst *inst;		/* sorted by name */
	size_t ninst, cap;
	uint64_t inst_dropped;		/* events past METRICS_INSTANCES_MAX */
	struct lset upstream_errors;
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
	return bsearch(name, m->inst, m->ninst, sizeof(m->inst[0]),
	    minst_cmp);
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
metrics_decision(struct metrics *m, const char *instance, const char *reason,
    uint64_t usec)
{
	struct minst *p;

	if (m == NULL)
		return;
	hist_add(&m->h_decision, usec);
	if ((p = minst_get(m, instance)) == NULL) {
		m->inst_dropped++;
		return;
	}
	if (reason != NULL && strcmp(reason, "allow") == 0)
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
put_hist(FILE *f, const char *name, const char *help, const struct hist *h)
{
	uint64_t cum = 0;
	size_t i;

	(void)fprintf(f, "# HELP %s %s\n# TYPE %s histogram\n", name, help,
	    name);
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

int
metrics_format(const struct metrics *m, const struct metrics_gauge *leases,
    size_t nleases, char **ret_text, size_t *ret_len)
{
	static const struct metrics empty;
	char *buf = NULL;
	size_t len = 0, i, j;
	FILE *f;

	if (m == NULL)
		m = &empty;
	if ((f = open_memstream(&buf, &len)) == NULL)
		return EGRESS_ERR_NOMEM;
	(void)fputs("# HELP egressd_decisions_total Egress decisions by "
	    "instance and reason.\n# TYPE egressd_decisions_total counter\n",
	    f);
	for (i = 0; i < m->ninst; i++) {
		const struct minst *p = &m->inst[i];

		(void)fputs("egressd_decisions_total{instance=\"", f);
		put_label(f, p->name);
		(void)fprintf(f, "\",reason=\"allow\"} %llu\n",
		    (unsigned long long)p->allowed);
		for (j = 0; j < p->denied.n; j++) {
			(void)fputs("egressd_decisions_total{instance=\"", f);
			put_label(f, p->name);
			(void)fputs("\",reason=\"", f);
			put_label(f, p->denied.v[j].label);
			(void)fprintf(f, "\"} %llu\n",
			    (unsigned long long)p->denied.v[j].n);
		}
	}
	(void)fprintf(f, "# HELP egressd_metrics_dropped_total Events not "
	    "counted per instance (instance cap).\n"
	    "# TYPE egressd_metrics_dropped_total counter\n"
	    "egressd_metrics_dropped_total %llu\n",
	    (unsigned long long)m->inst_dropped);
	(void)fputs("# HELP egressd_upstream_errors_total Upstream failures "
	    "by guest-visible code.\n"
	    "# TYPE egressd_upstream_errors_total counter\n", f);
	put_lset(f, "egressd_upstream_errors_total", "code",
	    &m->upstream_errors);
	(void)fputs("# HELP egressd_leases_in_use Upstream connection leases "
	    "held, by instance.\n# TYPE egressd_leases_in_use gauge\n", f);
	for (i = 0; i < nleases; i++) {
		(void)fputs("egressd_leases_in_use{instance=\"", f);
		put_label(f, leases[i].instance != NULL ? leases[i].instance :
		    "");
		(void)fprintf(f, "\"} %llu\n",
		    (unsigned long long)leases[i].value);
	}
	(void)fputs("# HELP egressd_dns_lookups_total DNS resolutions by "
	    "status.\n# TYPE egressd_dns_lookups_total counter\n", f);
	put_lset(f, "egressd_dns_lookups_total", "status", &m->dns);
	put_hist(f, "egressd_dns_lookup_seconds",
	    "DNS resolution latency (A and AAAA together).", &m->h_dns);
	put_hist(f, "egressd_decision_seconds",
	    "Time from request to verdict.", &m->h_decision);
	put_hist(f, "egressd_connect_seconds",
	    "Upstream connect latency, TCP and TLS.", &m->h_connect);
	(void)fputs("# HELP egressd_bytes_total Body bytes by instance and "
	    "direction.\n# TYPE egressd_bytes_total counter\n", f);
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
	(void)fputs("# EOF\n", f);
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
