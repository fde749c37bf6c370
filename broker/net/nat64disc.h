/* SPDX-License-Identifier: ISC */
/*
 * nat64disc: NAT64 prefix discovery as a warning (RFC 7050). The broker
 * asks for ipv4only.arpa AAAA at start and at each reload; a DNS64 on the
 * path synthesises addresses that embed the well-known IPv4 addresses
 * 192.0.0.170 and 192.0.0.171 under its NAT64 prefix. A discovered prefix
 * that [security] nat64_prefixes does not declare (and that is not the
 * always-decoded 64:ff9b::/96) means the classifier cannot see through
 * that translator: the broker logs a warning, `show status` reports it,
 * and `egressctl diagnose` prints the line to add. Nothing here ever adds
 * a prefix. nat64disc_infer() is a pure function of its inputs.
 */
#ifndef EGRESS_BROKER_NAT64DISC_H
#define EGRESS_BROKER_NAT64DISC_H

#include <stddef.h>

#include "policy/policy.h"

struct dns_resolver;
struct nat64disc;

#define NAT64DISC_NAME	   "ipv4only.arpa"
#define NAT64DISC_MAX	   8 /* candidate prefixes kept */
#define NAT64DISC_TEXT_MAX 1024

struct nat64disc_result {
	int dns_ok;    /* the lookup answered (any status but error) */
	size_t nfound; /* prefixes inferred from the answers */
	struct policy_nat64_prefix found[NAT64DISC_MAX];
	size_t nundeclared; /* of those, not declared and not 64:ff9b::/96 */
	struct policy_nat64_prefix undeclared[NAT64DISC_MAX];
	/* When nundeclared > 0: a one-line warning, and the whole
	 * nat64_prefixes line to write (declared ones plus the new ones). */
	char warning[NAT64DISC_TEXT_MAX];
	char suggestion[NAT64DISC_TEXT_MAX];
};

/*
 * Infer NAT64 prefixes from the answers to ipv4only.arpa (IPv4 answers
 * are ignored). An IPv6 answer yields prefix P/L when, under the RFC 6052
 * layout of L (32, 40, 48, 56, 64 or 96; u-octet zero for L < 96), it
 * embeds 192.0.0.170 or 192.0.0.171 (the suffix is not checked). When
 * one answer fits several lengths, the lengths at which some answer
 * carries the other well-known address under the same prefix are kept
 * (RFC 7050 section 3); if none is, every fit is kept (a warning errs
 * wide). Compare with declared (NULL: none). Write *ret. Return 0, or
 * EGRESS_ERR_INVALID for NULL arguments.
 */
int nat64disc_infer(const struct policy_addr *answers, size_t n,
    const struct policy_nat64_list *declared, struct nat64disc_result *ret);

/* Called once with the outcome of nat64disc_start(); res borrowed. */
typedef void (*nat64disc_cb)(void *arg, const struct nat64disc_result *res);

/*
 * Look up ipv4only.arpa on resolver r (borrowed; it must outlive the
 * lookup) and call cb from the event loop with the inference against a
 * copy of declared. Write a handle to *ret (valid until cb runs or
 * nat64disc_cancel()). Return 0 or a dns_resolve() error.
 */
int nat64disc_start(struct dns_resolver *r,
    const struct policy_nat64_list *declared, nat64disc_cb cb, void *arg,
    struct nat64disc **ret);

/* Cancel a lookup whose callback has not run. NULL is a no-op. */
void nat64disc_cancel(struct nat64disc *d);

/*
 * Blocking form for egressctl: resolve with dns_resolve_sync() over
 * servers (NULL/0: /etc/resolv.conf) and infer. Return 0 (also when the
 * name did not resolve: then nfound is 0) or a resolver error.
 */
int nat64disc_check_sync(const char *const *servers, size_t nservers,
    int timeout_ms, const struct policy_nat64_list *declared,
    struct nat64disc_result *ret);

#endif /* EGRESS_BROKER_NAT64DISC_H */
