/* SPDX-License-Identifier: ISC */
/*
 * Unit tests for broker/dns: the c-ares resolver on libevent, against a
 * tiny DNS responder that runs in a thread of this process on 127.0.0.1
 * and only ever answers loopback addresses. Covers both families being
 * queried, the status mapping (NXDOMAIN, NODATA, SERVFAIL, REFUSED,
 * timeout, too many answers), names sent without search domains,
 * cancellation, the query counter, the blocking wrapper and the server
 * list grammar.
 */
#include <sys/socket.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <event2/event.h>

#include "broker/net/dns.h"

/* ---- the responder ---------------------------------------------------- */

struct responder {
	int fd;
	uint16_t port;
	pthread_t thr;
	atomic_int stop;
	atomic_int nq_a, nq_aaaa;
	char last_name[300];
	pthread_mutex_t mu;
};

static struct responder R;

static size_t
put16(uint8_t *p, unsigned v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
	return 2;
}

/* Build an answer for name/qtype into out; return its length, 0 to drop. */
static size_t
respond(const uint8_t *q, size_t qlen, size_t qend, const char *name,
    unsigned qtype, uint8_t *out)
{
	unsigned rcode = 0, i, count = 0;
	uint8_t rdata[16][16];
	size_t rdlen = qtype == 1 ? 4 : 16, n;

	if (strcmp(name, "drop.test") == 0)
		return 0;
	if (strcmp(name, "nx.test") == 0)
		rcode = 3;
	else if (strcmp(name, "fail.test") == 0 ||
	    (strcmp(name, "halffail.test") == 0 && qtype == 28))
		rcode = 2;
	else if (strcmp(name, "refused.test") == 0)
		rcode = 5;
	else if (strcmp(name, "both.test") == 0 || strcmp(name, "host") == 0 ||
	    strcmp(name, "halffail.test") == 0) {
		count = qtype == 1 ? 2 : 1;
		for (i = 0; i < count; i++) {
			memset(rdata[i], 0, 16);
			if (qtype == 1) {
				rdata[i][0] = 127;
				rdata[i][3] = (uint8_t)(2 + i);
			} else
				rdata[i][15] = 1;
		}
	} else if (strcmp(name, "v4.test") == 0) {
		if (qtype == 1) {
			count = 1;
			memset(rdata[0], 0, 16);
			rdata[0][0] = 127;
			rdata[0][3] = 9;
		}
	} else if (strcmp(name, "empty.test") == 0) {
		count = 0; /* NOERROR, no answer: NODATA */
	} else if (strcmp(name, "many.test") == 0) {
		count = 0; /* handled below: 40 per family */
	} else
		rcode = 3;

	memcpy(out, q, qend);
	out[2] = (uint8_t)(0x80 | (q[2] & 0x01)); /* QR, RD copied */
	out[3] = (uint8_t)(0x80 | rcode);	  /* RA */
	put16(out + 4, 1);
	put16(out + 8, 0);
	put16(out + 10, 0);
	n = qend;
	if (strcmp(name, "many.test") == 0) {
		count = 40;
		for (i = 0; i < count; i++) {
			n += put16(out + n, 0xc00c);
			n += put16(out + n, qtype);
			n += put16(out + n, 1);
			n += put16(out + n, 0);
			n += put16(out + n, 60);
			n += put16(out + n, (unsigned)rdlen);
			memset(out + n, 0, rdlen);
			if (qtype == 1) {
				out[n] = 127;
				out[n + 3] = (uint8_t)(10 + i);
			} else
				out[n + 15] = (uint8_t)(10 + i);
			n += rdlen;
		}
	} else {
		for (i = 0; i < count; i++) {
			n += put16(out + n, 0xc00c);
			n += put16(out + n, qtype);
			n += put16(out + n, 1);
			n += put16(out + n, 0);
			n += put16(out + n, 60);
			n += put16(out + n, (unsigned)rdlen);
			memcpy(out + n, rdata[i], rdlen);
			n += rdlen;
		}
	}
	put16(out + 6, count);
	(void)qlen;
	return n;
}

static void *
responder_main(void *arg)
{
	uint8_t buf[1500], out[4096];
	struct sockaddr_in from;
	socklen_t fl;
	ssize_t len;

	while (!atomic_load(&R.stop)) {
		char name[300];
		size_t off = 12, nl = 0, n;
		unsigned qtype;

		fl = sizeof(from);
		len = recvfrom(R.fd, buf, sizeof(buf), 0,
		    (struct sockaddr *)&from, &fl);
		if (len < 12)
			continue;
		while (off < (size_t)len && buf[off] != 0) {
			unsigned l = buf[off];

			if (off + 1 + l >= (size_t)len || nl + l + 1 >= 300)
				break;
			if (nl > 0)
				name[nl++] = '.';
			memcpy(name + nl, buf + off + 1, l);
			nl += l;
			off += 1 + l;
		}
		name[nl] = '\0';
		if (off + 5 > (size_t)len)
			continue;
		qtype = (unsigned)(buf[off + 1] << 8 | buf[off + 2]);
		off += 5;
		pthread_mutex_lock(&R.mu);
		(void)snprintf(R.last_name, sizeof(R.last_name), "%s", name);
		pthread_mutex_unlock(&R.mu);
		if (qtype == 1)
			atomic_fetch_add(&R.nq_a, 1);
		else if (qtype == 28)
			atomic_fetch_add(&R.nq_aaaa, 1);
		n = respond(buf, (size_t)len, off, name, qtype, out);
		if (n > 0)
			(void)sendto(R.fd, out, n, 0, (struct sockaddr *)&from,
			    fl);
	}
	return arg;
}

static void
responder_start(void)
{
	struct sockaddr_in sin;
	socklen_t sl = sizeof(sin);
	struct timeval tv = { 0, 100000 };

	memset(&R, 0, sizeof(R));
	pthread_mutex_init(&R.mu, NULL);
	R.fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	cr_assert(R.fd >= 0);
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert(bind(R.fd, (struct sockaddr *)&sin, sizeof(sin)) == 0);
	cr_assert(getsockname(R.fd, (struct sockaddr *)&sin, &sl) == 0);
	R.port = ntohs(sin.sin_port);
	(void)setsockopt(R.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	cr_assert(pthread_create(&R.thr, NULL, responder_main, NULL) == 0);
}

static void
responder_stop(void)
{
	atomic_store(&R.stop, 1);
	pthread_join(R.thr, NULL);
	close(R.fd);
}

/* ---- async harness ---------------------------------------------------- */

struct result {
	int calls;
	enum dns_status status;
	size_t n;
	struct policy_addr addrs[POLICY_ANSWERS_MAX];
};

static void
result_cb(void *arg, enum dns_status status, const struct policy_addr *a,
    size_t n)
{
	struct result *res = arg;

	res->calls++;
	res->status = status;
	res->n = n;
	if (n > 0)
		memcpy(res->addrs, a, n * sizeof(*a));
}

static void
server_arg(char *buf, size_t n)
{
	(void)snprintf(buf, n, "127.0.0.1:%u", (unsigned)R.port);
}

static void
run_until(struct event_base *base, struct result *res)
{
	while (res->calls == 0)
		cr_assert(event_base_loop(base, EVLOOP_ONCE) == 0);
}

static struct result
resolve_one(const char *name, int timeout_ms)
{
	struct event_base *base = event_base_new();
	struct dns_resolver *r = NULL;
	char srv[64];
	const char *servers[1] = { srv };
	struct result res;

	memset(&res, 0, sizeof(res));
	server_arg(srv, sizeof(srv));
	cr_assert(base != NULL);
	cr_assert(dns_resolver_new(base, servers, 1, timeout_ms, &r) == 0);
	cr_assert(dns_resolve(r, name, result_cb, &res, NULL) == 0);
	cr_assert_eq(res.calls, 0, "callback ran inside dns_resolve");
	run_until(base, &res);
	cr_assert_eq(dns_resolver_queries(r), 2);
	cr_assert_eq(dns_resolver_pending(r), 0);
	dns_resolver_free(r);
	event_base_free(base);
	return res;
}

/* ---- tests ------------------------------------------------------------ */

TestSuite(broker_dns, .init = responder_start, .fini = responder_stop);

struct status_case {
	char name[32];
	int timeout_ms;
	enum dns_status status;
	int error;
	size_t n;
};

ParameterizedTestParameters(broker_dns, status_mapping)
{
	static struct status_case cases[] = {
		{ "both.test", 2000, DNS_OK, 0, 3 },
		{ "v4.test", 2000, DNS_OK, 0, 1 },
		{ "nx.test", 2000, DNS_NXDOMAIN, EGRESS_ERR_NOT_FOUND, 0 },
		{ "empty.test", 2000, DNS_NODATA, EGRESS_ERR_NOT_FOUND, 0 },
		{ "unknown.test", 2000, DNS_NXDOMAIN, EGRESS_ERR_NOT_FOUND,
		    0 },
		{ "fail.test", 2000, DNS_SERVFAIL, EGRESS_ERR_DNS_FAILED, 0 },
		{ "refused.test", 2000, DNS_REFUSED, EGRESS_ERR_DNS_FAILED,
		    0 },
		{ "halffail.test", 2000, DNS_SERVFAIL, EGRESS_ERR_DNS_FAILED,
		    0 },
		{ "drop.test", 300, DNS_TIMEOUT, EGRESS_ERR_DNS_FAILED, 0 },
		{ "many.test", 2000, DNS_TOO_MANY, EGRESS_ERR_DNS_FAILED, 0 },
	};

	return cr_make_param_array(struct status_case, cases,
	    sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct status_case *c, broker_dns, status_mapping)
{
	struct result res = resolve_one(c->name, c->timeout_ms);

	cr_assert_eq(res.calls, 1);
	cr_assert_eq(res.status, c->status, "%s: got %s", c->name,
	    dns_status_str(res.status));
	cr_assert_eq(res.n, c->n);
	cr_assert_eq(dns_status_error(res.status), c->error);
}

Test(broker_dns, both_families_a_first)
{
	struct result res = resolve_one("both.test", 2000);
	char buf[64];

	cr_assert_eq(res.status, DNS_OK);
	cr_assert_eq(res.n, 3);
	cr_assert(atomic_load(&R.nq_a) >= 1);
	cr_assert(atomic_load(&R.nq_aaaa) >= 1);
	cr_assert_eq(res.addrs[0].family, 4);
	cr_assert_eq(policy_addr_format(&res.addrs[0], buf, sizeof(buf)), 0);
	cr_assert_str_eq(buf, "127.0.0.2");
	cr_assert_eq(policy_addr_format(&res.addrs[1], buf, sizeof(buf)), 0);
	cr_assert_str_eq(buf, "127.0.0.3");
	cr_assert_eq(res.addrs[2].family, 6);
	cr_assert_eq(policy_addr_format(&res.addrs[2], buf, sizeof(buf)), 0);
	cr_assert_str_eq(buf, "::1");
}

Test(broker_dns, no_search_domain)
{
	struct result res = resolve_one("host", 2000);

	cr_assert_eq(res.status, DNS_OK);
	pthread_mutex_lock(&R.mu);
	cr_assert_str_eq(R.last_name, "host");
	pthread_mutex_unlock(&R.mu);
}

Test(broker_dns, cancel)
{
	struct event_base *base = event_base_new();
	struct dns_resolver *r = NULL;
	struct dns_query *q1 = NULL, *q2 = NULL;
	struct result res1, res2, res3;
	char srv[64];
	const char *servers[1] = { srv };

	memset(&res1, 0, sizeof(res1));
	memset(&res2, 0, sizeof(res2));
	memset(&res3, 0, sizeof(res3));
	server_arg(srv, sizeof(srv));
	cr_assert(dns_resolver_new(base, servers, 1, 2000, &r) == 0);
	cr_assert(dns_resolve(r, "both.test", result_cb, &res1, &q1) == 0);
	cr_assert(dns_resolve(r, "drop.test", result_cb, &res2, &q2) == 0);
	cr_assert_eq(dns_resolver_pending(r), 2);
	dns_query_cancel(q1);
	dns_query_cancel(q2);
	cr_assert_eq(dns_resolver_pending(r), 0);
	/* A later query completes; the cancelled ones never call back. */
	cr_assert(dns_resolve(r, "both.test", result_cb, &res3, NULL) == 0);
	run_until(base, &res3);
	cr_assert_eq(res3.status, DNS_OK);
	cr_assert_eq(res1.calls, 0);
	cr_assert_eq(res2.calls, 0);
	cr_assert_eq(dns_resolver_queries(r), 6);
	dns_resolver_free(r);
	event_base_free(base);
}

Test(broker_dns, bad_names)
{
	struct event_base *base = event_base_new();
	struct dns_resolver *r = NULL;
	struct result res;
	char srv[64], longname[300];
	const char *servers[1] = { srv };

	memset(&res, 0, sizeof(res));
	server_arg(srv, sizeof(srv));
	memset(longname, 'a', 254);
	longname[254] = '\0';
	cr_assert(dns_resolver_new(base, servers, 1, 2000, &r) == 0);
	cr_assert_eq(dns_resolve(r, "", result_cb, &res, NULL),
	    EGRESS_ERR_INVALID);
	cr_assert_eq(dns_resolve(r, ".", result_cb, &res, NULL),
	    EGRESS_ERR_INVALID);
	cr_assert_eq(dns_resolve(r, longname, result_cb, &res, NULL),
	    EGRESS_ERR_INVALID);
	cr_assert_eq(dns_resolver_queries(r), 0);
	dns_resolver_free(r);
	event_base_free(base);
}

Test(broker_dns, free_with_outstanding)
{
	struct event_base *base = event_base_new();
	struct dns_resolver *r = NULL;
	struct result res;
	char srv[64];
	const char *servers[1] = { srv };

	memset(&res, 0, sizeof(res));
	server_arg(srv, sizeof(srv));
	cr_assert(dns_resolver_new(base, servers, 1, 2000, &r) == 0);
	cr_assert(dns_resolve(r, "drop.test", result_cb, &res, NULL) == 0);
	dns_resolver_free(r);
	cr_assert_eq(event_base_loop(base, EVLOOP_NONBLOCK), 1,
	    "events left behind");
	cr_assert_eq(res.calls, 0);
	event_base_free(base);
}

Test(broker_dns, sync)
{
	struct policy_addr addrs[4];
	enum dns_status st;
	size_t n = 99;
	char srv[64];
	const char *servers[1] = { srv };

	server_arg(srv, sizeof(srv));
	cr_assert_eq(dns_resolve_sync(servers, 1, 2000, "both.test", addrs, 4,
			 &n, &st),
	    0);
	cr_assert_eq(st, DNS_OK);
	cr_assert_eq(n, 3);
	cr_assert_eq(dns_resolve_sync(servers, 1, 2000, "both.test", addrs, 2,
			 &n, &st),
	    EGRESS_ERR_TOO_BIG);
	cr_assert_eq(n, 2);
	cr_assert_eq(dns_resolve_sync(servers, 1, 2000, "nx.test", addrs, 4,
			 &n, &st),
	    0);
	cr_assert_eq(st, DNS_NXDOMAIN);
	cr_assert_eq(n, 0);
}

struct server_case {
	char in[64];
	int ok;
	char addr[48];
	unsigned port;
};

ParameterizedTestParameters(broker_dns, server_parse)
{
	static struct server_case cases[] = {
		{ "127.0.0.1", 1, "127.0.0.1", 53 },
		{ "127.0.0.1:5353", 1, "127.0.0.1", 5353 },
		{ "[::1]:5353", 1, "::1", 5353 },
		{ "[::1]", 1, "::1", 53 },
		{ "::1", 1, "::1", 53 },
		{ "fd00::53", 1, "fd00::53", 53 },
		{ "127.0.0.1:0", 0, "", 0 },
		{ "127.0.0.1:65536", 0, "", 0 },
		{ "127.0.0.1:053", 0, "", 0 },
		{ "127.0.0.1:", 0, "", 0 },
		{ "127.0.0.1:+53", 0, "", 0 },
		{ "[127.0.0.1]:53", 0, "", 0 },
		{ "::1:53x", 0, "", 0 },
		{ "[::1]53", 0, "", 0 },
		{ "[::1", 0, "", 0 },
		{ "dns.example", 0, "", 0 },
		{ "", 0, "", 0 },
		{ "1.2.3.4:53:53", 0, "", 0 },
	};

	return cr_make_param_array(struct server_case, cases,
	    sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct server_case *c, broker_dns, server_parse)
{
	struct policy_addr a;
	uint16_t port = 0;
	char buf[64];
	int rc = dns_server_parse(c->in, &a, &port);

	if (!c->ok) {
		cr_assert_eq(rc, EGRESS_ERR_INVALID, "'%s' accepted", c->in);
		return;
	}
	cr_assert_eq(rc, 0, "'%s' refused", c->in);
	cr_assert_eq(policy_addr_format(&a, buf, sizeof(buf)), 0);
	cr_assert_str_eq(buf, c->addr);
	cr_assert_eq(port, c->port);
}

Test(broker_dns, resolver_new_rejects_bad_servers)
{
	struct event_base *base = event_base_new();
	struct dns_resolver *r = NULL;
	const char *servers[2] = { "127.0.0.1", "nope" };

	cr_assert_eq(dns_resolver_new(base, servers, 2, 1000, &r),
	    EGRESS_ERR_INVALID);
	cr_assert_null(r);
	event_base_free(base);
}

/*
 * A cancelled lookup keeps its DNS_PENDING_MAX slot until c-ares has
 * finished it: resolve-then-cancel in a loop (a guest's REQUEST + RESET)
 * cannot keep more than DNS_PENDING_MAX lookups in flight. Tags count
 * the same way, per tag.
 */
Test(broker_dns, cancel_keeps_slot_until_done)
{
	struct event_base *base = event_base_new();
	struct dns_resolver *r = NULL;
	struct dns_query *q = NULL;
	struct result res;
	char srv[64];
	const char *servers[1] = { srv };
	int i, again = 0;

	memset(&res, 0, sizeof(res));
	server_arg(srv, sizeof(srv));
	cr_assert(dns_resolver_new(base, servers, 1, 200, &r) == 0);
	for (i = 0; i < DNS_PENDING_MAX + 50; i++) {
		int err = dns_resolve_tagged(r, i % 2 ? "odd" : "even",
		    "drop.test", result_cb, &res, &q);

		if (err == EGRESS_ERR_AGAIN) {
			again++;
			continue;
		}
		cr_assert_eq(err, 0);
		dns_query_cancel(q);
	}
	cr_assert_eq(again, 50, "cancel freed the slot (%d refused)", again);
	cr_assert_eq(dns_resolver_pending(r), 0);
	cr_assert_eq(dns_resolver_outstanding(r), DNS_PENDING_MAX);
	cr_assert_eq(dns_resolver_outstanding_tag(r, "odd"),
	    DNS_PENDING_MAX / 2);
	cr_assert_eq(dns_resolver_outstanding_tag(r, "even"),
	    DNS_PENDING_MAX / 2);
	cr_assert_eq(dns_resolver_outstanding_tag(r, "other"), 0);
	cr_assert_eq(dns_resolver_queries(r), 2 * DNS_PENDING_MAX);
	/* Once c-ares gives up on them, the slots come back. */
	while (dns_resolver_outstanding(r) > 0)
		cr_assert(event_base_loop(base, EVLOOP_ONCE) == 0);
	cr_assert_eq(dns_resolver_outstanding_tag(r, "odd"), 0);
	cr_assert(dns_resolve(r, "both.test", result_cb, &res, NULL) == 0);
	run_until(base, &res);
	cr_assert_eq(res.status, DNS_OK);
	cr_assert_eq(res.calls, 1);
	cr_assert_eq(dns_resolver_outstanding(r), 0);
	dns_resolver_free(r);
	event_base_free(base);
}

Test(broker_dns, tag_too_long)
{
	struct event_base *base = event_base_new();
	struct dns_resolver *r = NULL;
	struct result res;
	char srv[64], tag[DNS_TAG_MAX + 2];
	const char *servers[1] = { srv };

	memset(&res, 0, sizeof(res));
	memset(tag, 'a', sizeof(tag) - 1);
	tag[sizeof(tag) - 1] = '\0';
	server_arg(srv, sizeof(srv));
	cr_assert(dns_resolver_new(base, servers, 1, 200, &r) == 0);
	cr_assert_eq(dns_resolve_tagged(r, tag, "both.test", result_cb, &res,
			 NULL),
	    EGRESS_ERR_INVALID);
	cr_assert_eq(dns_resolver_queries(r), 0);
	dns_resolver_free(r);
	event_base_free(base);
}
