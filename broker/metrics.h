/* SPDX-License-Identifier: ISC */
/*
 * metrics: the broker's counters and histograms, and their Prometheus
 * text exposition (version 0.0.4) for `show metrics` and the scrape
 * endpoint, with the facts the broker supplies at exposition time (build,
 * configuration state, leases, process). The daemon reports each event once
 * (a decision, an upstream error, a DNS lookup, a connect, bytes moved);
 * this module only counts. Every series is bounded: at most
 * METRICS_INSTANCES_MAX instances and METRICS_LABELS_MAX distinct reason
 * or code labels per family (further ones are counted under "other"), so
 * nothing a guest sends can grow it. Label values are escaped as the
 * exposition format requires. Not thread-safe: one event loop owns it.
 */
#ifndef EGRESS_BROKER_METRICS_H
#define EGRESS_BROKER_METRICS_H

#include <stddef.h>
#include <stdint.h>

struct metrics;

#define METRICS_INSTANCES_MAX 4096
#define METRICS_LABELS_MAX    32 /* reasons, codes, statuses */
#define METRICS_LABEL_LEN     64 /* bytes of a label value kept */
#define METRICS_BUCKETS	      12 /* histogram buckets, +Inf extra */

/* Return a new, empty set of metrics, or NULL on out-of-memory. */
struct metrics *metrics_new(void);

/* Free m. NULL is a no-op. */
void metrics_free(struct metrics *m);

/*
 * Count one decision for instance: allow is the verdict; reason is the
 * deny reason ("not-granted", "private-address", "budget-exhausted", ...)
 * and is ignored on allow (exposed as reason="granted"). usec is the time
 * the decision took, for egressd_decision_seconds. NULL m is a no-op.
 */
void metrics_decision(struct metrics *m, const char *instance, int allow,
    const char *reason, uint64_t usec);

/* Count one upstream failure by guest-visible code ("connect-failed",
 * "tls-failed", "timeout", ...). */
void metrics_upstream_error(struct metrics *m, const char *code);

/* Count one ended connection or request (its egress.close) by transport
 * ("http", "websocket", "tcp", "tls"), and for a websocket its messages
 * from (in) and to (out) the upstream. NULL m is a no-op. */
void metrics_close(struct metrics *m, const char *transport, int websocket,
    uint64_t msgs_in, uint64_t msgs_out);

/* Count one DNS resolution with its status ("ok", "nxdomain", ...) and
 * latency. */
void metrics_dns(struct metrics *m, const char *status, uint64_t usec);

/* Record one successful upstream connect (TCP and TLS) latency. */
void metrics_connect(struct metrics *m, uint64_t usec);

/* Add body bytes for instance: in from the upstream, out to it. */
void metrics_bytes(struct metrics *m, const char *instance, uint64_t in,
    uint64_t out);

/* One instance's counters, as `show instance` reports them. */
struct metrics_instance {
	uint64_t allowed;
	uint64_t denied; /* sum of every deny reason */
	size_t nreasons;
	struct {
		char reason[METRICS_LABEL_LEN];
		uint64_t count;
	} reasons[METRICS_LABELS_MAX + 1]; /* denies by reason */
	uint64_t bytes_in;
	uint64_t bytes_out;
};

/*
 * Write instance's counters to *ret (all zero for an instance never seen).
 */
void metrics_instance_get(const struct metrics *m, const char *instance,
    struct metrics_instance *ret);

/* A gauge sample the broker supplies at exposition time. */
struct metrics_gauge {
	const char *instance;
	uint64_t value;
};

/* The process metrics, with their standard names (process_*). */
struct metrics_process {
	double cpu_seconds; /* user + system */
	uint64_t resident_bytes;
	uint64_t virtual_bytes;
	uint64_t open_fds;
	uint64_t max_fds;  /* RLIMIT_NOFILE soft limit */
	double start_time; /* Unix seconds */
};

/*
 * Read this process's metrics from /proc/self (stat, fd) and
 * getrlimit(2) into *ret. Return 0, or EGRESS_ERR_IO when /proc cannot be
 * read (*ret is then untouched).
 */
int metrics_process_read(struct metrics_process *ret);

/* What the broker supplies at exposition time; every pointer borrowed. */
struct metrics_facts {
	const char *version;	    /* egressd_build_info{version} */
	int config_valid;	    /* 0: the configuration is broken */
	uint64_t config_generation; /* of the snapshot in force */
	int64_t config_loaded_unix; /* last successful load, 0: never */
	uint64_t config_reloads;    /* successful re-reads */
	uint64_t config_reload_failures;
	const struct metrics_gauge *leases; /* one per instance */
	size_t nleases;
	uint64_t upstream_max; /* the upstream-connection share */
	uint64_t log_queued;   /* log lines waiting for the destination */
	uint64_t log_backlogs; /* times an instance was backlogged */
	uint64_t poll_hits;    /* work found after an empty poll */
	uint64_t poll_us;      /* microseconds of polls that found nothing */
	const struct metrics_process *process; /* NULL: not exposed */
};

/*
 * Render the Prometheus text exposition (version 0.0.4, as served with
 * Content-Type text/plain; version=0.0.4) of the facts f (NULL: none) and
 * every counter and histogram: one HELP and TYPE line per family, label
 * values escaped, no blank line and no OpenMetrics "# EOF". Write a
 * malloc'd NUL-terminated text to *ret_text (caller frees) and its length
 * to *ret_len. Return 0 or EGRESS_ERR_NOMEM.
 */
int metrics_format(const struct metrics *m, const struct metrics_facts *f,
    char **ret_text, size_t *ret_len);

#endif /* EGRESS_BROKER_METRICS_H */
