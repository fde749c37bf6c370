/* SPDX-License-Identifier: ISC */
/*
 * decide: the one destination decision around exactly one resolution,
 * shared by every caller that asks "may this instance reach that
 * destination": the daemon's request pipeline, the control socket's
 * `check` and `egressctl check`. It checks the destination against the
 * policy (policy_check_destination), resolves the name once (an IP
 * literal is its own answer; answers given by the caller stand for the
 * lookup), checks every answer against the policy in force when the
 * answers are there (policy_check_answers), and hands back the
 * validated address set or the reason for the deny. Nothing here decides
 * a rule: every rule is policy/'s. There is no route from a result back
 * to a second lookup.
 *
 * The policy is read through a callback at each step, so that a decision
 * whose lookup was pending when the configuration changed is checked
 * against the configuration current when the answer arrives, not the one
 * it started with.
 */
#ifndef EGRESS_NET_DECIDE_H
#define EGRESS_NET_DECIDE_H

#include <stddef.h>

#include "broker/net/dns.h"
#include "policy/policy.h"

/* What the policy is at the moment of deciding (all borrowed for the
 * step that asked for it). */
struct decide_policy {
	const struct policy_instance *instance; /* NULL: no entry */
	const struct policy_nat64_list *nat64;
	const struct policy_addr *local; /* this host's addresses */
	size_t nlocal;
	const struct policy_net *nets; /* and its local routes (sorted) */
	size_t nnets;
};

/*
 * Fill *ret with the policy in force now: at the start (answers 0), and
 * again when the answers of a lookup arrived (answers 1), when it may
 * have changed. Return 0, or a negative error when none is (a broken
 * configuration): the decision is then the deny "policy-unavailable".
 */
typedef int (*decide_policy_fn)(void *arg, int answers,
    struct decide_policy *ret);

/* How the name is resolved, when it is a name. */
struct decide_lookup {
	struct dns_resolver *resolver;	   /* NULL: none (unresolvable) */
	const char *tag;		   /* fair-share tag (the instance) */
	size_t tag_max;			   /* lookups outstanding per tag; 0:
					   no bound */
	const struct policy_addr *answers; /* given answers standing for */
	size_t nanswers;		   /* the lookup (egressctl --resolve),
					   or NULL */
};

/* The outcome of one decision (borrowed from its struct decide). */
struct decide_result {
	int invalid;	     /* the policy refused the arguments
				   (EGRESS_ERR_INVALID): no verdict */
	int allow;	     /* 1: connect to verdict->addrs only */
	const char *reason;  /* NULL on allow; else the deny's reason
				   code (policy_reason_str(), or
				   "policy-unavailable", "budget-exhausted") */
	int error;	     /* on a deny, the guest-visible error
				   (EGRESS_ERR_DENIED, _DNS_FAILED,
				   _UNAVAILABLE, _BUDGET_EXHAUSTED) */
	int resolved;	     /* a lookup was made */
	enum dns_status dns; /* its outcome (DNS_OK when none) */
	const struct policy_verdict *verdict;
	const struct policy_addr *answers; /* the answer set checked */
	size_t nanswers;
};

struct decide;

/* Called once with the outcome of a decision that had to wait for its
 * lookup; never from inside decide_run(). */
typedef void (*decide_cb)(void *arg, const struct decide_result *res);

/*
 * One decision in progress. Callers embed it (it is large: the answer
 * set and the verdict); its fields are private to decide.c.
 */
struct decide {
	const struct policy_dest *dest;
	enum policy_transport transport;
	decide_policy_fn policy;
	void *policy_arg;
	decide_cb cb;
	void *cb_arg;
	struct dns_query *q;
	struct decide_result res;
	struct policy_verdict verdict;
	struct policy_addr answers[POLICY_ANSWERS_MAX];
};

/*
 * Decide whether the instance that policy_fn describes may reach dest
 * (borrowed until the decision is over) over transport. Return 1 when
 * the decision is made at once (deny before any lookup, an IP literal,
 * a localhost name, which is 127.0.0.1 and ::1 without a lookup (RFC
 * 6761), given answers): read it with decide_result(). Return 0 when a lookup
 * is pending: cb is called once, from the event loop, unless
 * decide_cancel() comes first. d needs no initialisation; a zeroed
 * struct decide that never ran may be cancelled.
 */
int decide_run(struct decide *d, enum policy_transport transport,
    const struct policy_dest *dest, decide_policy_fn policy_fn,
    void *policy_arg, const struct decide_lookup *lookup, decide_cb cb,
    void *cb_arg);

/*
 * Decide as decide_run() does when the name's lookup had to wait, with
 * its outcome (status, the n answers at addrs) already in hand: the
 * destination is checked against the policy at the start (policy_fn
 * with answers 0) and, for a name, both the destination and the answers
 * again against the policy when the answers arrive (answers 1), exactly
 * the path of a pending lookup's callback, without a resolver or an
 * event loop (tests, the fuzz target). An IP literal is decided at
 * once. cb is not used. Return 1: read the outcome with decide_result().
 */
int decide_run_answered(struct decide *d, enum policy_transport transport,
    const struct policy_dest *dest, decide_policy_fn policy_fn,
    void *policy_arg, enum dns_status status, const struct policy_addr *addrs,
    size_t n);

/*
 * As decide_run(), for a program without an event loop (egressctl): run
 * the decision to its end on a loop of its own, resolving through a
 * resolver of its own for servers, nservers and timeout_ms (as
 * dns_resolver_new() takes them); answers, when not NULL, stand for the
 * lookup. Return 0 with the outcome readable with decide_result(), or a
 * negative error when the loop or the resolver could not be made (no
 * outcome).
 */
int decide_run_sync(struct decide *d, enum policy_transport transport,
    const struct policy_dest *dest, decide_policy_fn policy_fn,
    void *policy_arg, const char *const *servers, size_t nservers,
    int timeout_ms, const struct policy_addr *answers, size_t nanswers);

/* Return the outcome of a finished decision (borrowed from d). */
const struct decide_result *decide_result(const struct decide *d);

/* Answer whether d waits for its lookup. */
int decide_is_pending(const struct decide *d);

/* Cancel a pending decision: cb will not be called. A finished or
 * never-run decision is a no-op. */
void decide_cancel(struct decide *d);

#endif /* EGRESS_NET_DECIDE_H */
