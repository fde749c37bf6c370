/* SPDX-License-Identifier: ISC */
/*
 * metrics: the broker's counters and histograms, and their Prometheus
 * text exposition for `show metrics`. The daemon reports each event once
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

#define METRICS_INSTANCES_MAX	4096
#define METRICS_LABELS_MAX	32	/* reasons, codes, statuses */
#define METRICS_LABEL_LEN	64	/* bytes of a label value kept */
#define METRICS_BUCKETS		12	/* histogram buckets, +Inf extra */

/* Return a new, empty set of metrics, or NULL on out-of-memory. */
struct metrics *metrics_new(void);

/* Free m. NULL is a no-op. */
void metrics_free(struct metrics *m);

/*
 * Count one decision for instance: reason is "allow" or a deny reason
 * ("not-granted", "private-address", "budget-exhausted", ...). usec is
 * the time the decision took, for egressd_decision_seconds. NULL m is a
 * no-op.
 */
void metrics_decision(struct metrics *m, const char *instance,
    const char *reason, uint64_t usec);

/* Count one upstream failure by guest-visible code ("connect-failed",
 * "tls-failed", "timeout", ...). */
void metrics_upstream_error(struct metrics *m, const char *code);

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
	uint64_t denied;		/* sum of every deny reason */
	size_t nreasons;
	struct {
		char reason[METRICS_LABEL_LEN];
		uint64_t count;
	} reasons[METRICS_LABELS_MAX + 1];	/* denies by reason */
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

/*
 * Render the Prometheus text exposition (version 0.0.4) of every counter
 * and histogram, plus egressd_leases_in_use{instance} from the nleases
 * samples given (borrowed), ending with the line "# EOF". Write a
 * malloc'd NUL-terminated text to *ret_text (caller frees) and its length
 * to *ret_len. Return 0 or EGRESS_ERR_NOMEM.
 */
int metrics_format(const struct metrics *m, const struct metrics_gauge *leases,
    size_t nleases, char **ret_text, size_t *ret_len);

#endif /* EGRESS_BROKER_METRICS_H */
