/* SPDX-License-Identifier: ISC */
/*
 * Unit tests for broker/net/decide: the one decision around one
 * resolution, over a configuration built at test time. Denies before any
 * lookup (unknown instance, no permission, not granted, an invalid
 * destination), an IP literal as its own answer, given answers standing
 * for the lookup, no resolver, the per-tag fair share of the resolver,
 * and the re-check when a pending lookup's answers arrive: the policy in
 * force THEN decides. The lookups go to a DNS responder this test runs
 * on 127.0.0.1 (a UDP socket read from the test's own loop, answered only
 * when the test says so); no other server is ever asked.
 */
#include <sys/socket.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <egress/error.h>
#include <event2/event.h>

#include "broker/net/decide.h"
#include "broker/net/dns.h"
#include "conf/conf.h"
#include "policy/policy.h"

#define FIXTURES SRCDIR "/tests/data/unit"

/* The instances: "app" may reach api.test, svc.test (both carve-outs),
 * lan.test (the private one), 127.0.0.1, localhost and dev.localhost (the
 * loopback one), 10.0.0.5 and 169.254.169.254; "noperm" has no
 * permission. The revoked variant no
 * longer grants api.test. */
#define CONF_HEAD \
	"[plugins.security]\n" \
	"signature_mode = disabled\n" \
	"[plugins.entries.noperm]\n" \
	"plugin = unit\n" \
	"manifest = plugin/manifest.ini\n" \
	"permissions =\n" \
	"egress_hosts = api.test\n" \
	"[plugins.entries.app]\n" \
	"plugin = unit\n" \
	"manifest = plugin/manifest.ini\n" \
	"permissions = http_client\n" \
	"egress_allow_private = svc.test, lan.test\n" \
	"egress_allow_loopback = svc.test, 127.0.0.1, localhost, " \
	"dev.localhost\n"

static const char conf_granted[] = CONF_HEAD
    "egress_hosts = api.test, svc.test, lan.test, 127.0.0.1, 10.0.0.5\n"
    "    localhost, dev.localhost\n"
    "    169.254.169.254\n";
static const char conf_revoked[] = CONF_HEAD
    "egress_hosts = svc.test, lan.test, 127.0.0.1, 10.0.0.5\n"
    "    localhost, dev.localhost\n"
    "    169.254.169.254\n";

static struct conf_snapshot *
load(const char *text)
{
	struct conf_snapshot *s = NULL;
	struct conf_errors e = { 0, NULL };
	size_t i;
	int rc;

	rc = conf_load_buffer(FIXTURES "/egressd.ini", text, strlen(text), &s,
	    &e);
	for (i = 0; i < e.n; i++)
		cr_log_error("%s", e.msgs[i]);
	conf_errors_done(&e);
	cr_assert_eq(rc, 0, "the test configuration does not load");
	cr_assert_not_null(conf_instance_find(s, "app"));
	cr_assert_not_null(conf_instance_find(s, "app")->manifest, "%s",
	    conf_instance_find(s, "app")->manifest_error);
	return s;
}

/* ---- the policy callback ---------------------------------------------- */

enum pol_mode {
	POL_OK = 0,	 /* the instance of snap */
	POL_UNKNOWN = 1, /* no entry */
	POL_ERROR = 2,	 /* broken configuration */
};

struct pol {
	enum pol_mode mode;
	const struct conf_snapshot *snap;
	char instance[16];
	int calls, calls_answers;
};

static int
pol_fn(void *arg, int answers, struct decide_policy *ret)
{
	struct pol *p = arg;
	const struct conf_instance *ci;

	p->calls++;
	if (answers)
		p->calls_answers++;
	if (p->mode == POL_ERROR)
		return EGRESS_ERR_INVALID;
	ci = conf_instance_find(p->snap, p->instance);
	ret->instance = p->mode == POL_OK && ci != NULL ? &ci->policy : NULL;
	ret->nat64 = &p->snap->nat64;
	ret->local = NULL;
	ret->nlocal = 0;
	return 0;
}

static void
dest_parse(const char *url, struct policy_dest *d)
{
	struct policy_err e;

	cr_assert_eq(policy_url_parse(url, strlen(url), d, &e), 0,
	    "url %s: %s", url, e.msg);
}

static void
never_cb(void *arg, const struct decide_result *res)
{
	(void)res;
	cr_assert_fail("decide_cb called for a decision made at once (%s)",
	    (const char *)arg);
}

static void
addr(const char *s, struct policy_addr *a)
{
	cr_assert_eq(policy_addr_parse(s, a), 0, "address %s", s);
}

/* ---- decisions made at once -------------------------------------------- */

#define NO_ANSWERS   (-1) /* no given answers (and no resolver) */
#define MANY_ANSWERS (-2) /* POLICY_ANSWERS_MAX + 1 given answers */

struct now_case {
	char name[32];
	char instance[16];
	char url[64];
	int nanswers; /* given answers, or NO_/MANY_ANSWERS */
	char answers[3][40];
	int allow;
	char reason[32];   /* "" on allow */
	int error;	   /* res->error on a deny */
	char addrs[3][40]; /* the validated set on allow */
};

ParameterizedTestParameters(decide, at_once)
{
	static struct now_case cases[] = {
		/* Denied before any lookup. */
		{ "unknown-instance", "nobody", "http://api.test/", NO_ANSWERS,
		    { "" }, 0, "unknown-instance", EGRESS_ERR_DENIED, { "" } },
		{ "no-permission", "noperm", "http://api.test/", NO_ANSWERS,
		    { "" }, 0, "no-permission", EGRESS_ERR_DENIED, { "" } },
		{ "not-granted", "app", "http://other.test/", NO_ANSWERS,
		    { "" }, 0, "not-granted", EGRESS_ERR_DENIED, { "" } },
		/* Given answers are not even looked at before the grant. */
		{ "not-granted-answers", "app", "http://other.test/", 1,
		    { "93.184.216.34" }, 0, "not-granted", EGRESS_ERR_DENIED,
		    { "" } },
		/* An IP literal is its own answer. */
		{ "loopback-literal-carved", "app", "http://127.0.0.1:8080/",
		    NO_ANSWERS, { "" }, 1, "", 0, { "127.0.0.1" } },
		{ "metadata-literal", "app", "http://169.254.169.254/",
		    NO_ANSWERS, { "" }, 0, "metadata", EGRESS_ERR_DENIED,
		    { "" } },
		{ "private-literal-not-carved", "app", "http://10.0.0.5/",
		    NO_ANSWERS, { "" }, 0, "private-address",
		    EGRESS_ERR_DENIED, { "" } },
		/* Given answers stand for the lookup. */
		{ "answers-public", "app", "http://api.test/", 2,
		    { "93.184.216.34", "93.184.216.34" }, 1, "", 0,
		    { "93.184.216.34" } },
		{ "answers-carved-loopback", "app", "http://svc.test/", 1,
		    { "127.0.0.1" }, 1, "", 0, { "127.0.0.1" } },
		{ "answers-carved-private", "app", "http://svc.test/", 1,
		    { "10.1.2.3" }, 1, "", 0, { "10.1.2.3" } },
		/* The private carve-out does not re-open loopback. */
		{ "answers-loopback-private-carve", "app", "http://lan.test/",
		    1, { "127.0.0.1" }, 0, "loopback-address",
		    EGRESS_ERR_DENIED, { "" } },
		{ "answers-private-carved", "app", "http://lan.test/", 1,
		    { "10.1.2.3" }, 1, "", 0, { "10.1.2.3" } },
		{ "answers-mixed-zones", "app", "http://svc.test/", 2,
		    { "127.0.0.1", "93.184.216.34" }, 0, "mixed-zones",
		    EGRESS_ERR_DENIED, { "" } },
		{ "answers-private-not-carved", "app", "http://api.test/", 1,
		    { "10.1.2.3" }, 0, "private-address", EGRESS_ERR_DENIED,
		    { "" } },
		{ "answers-metadata-among", "app", "http://api.test/", 3,
		    { "93.184.216.34", "169.254.169.254", "2606:2800::1" }, 0,
		    "metadata", EGRESS_ERR_DENIED, { "" } },
		{ "answers-none", "app", "http://api.test/", 0, { "" }, 0,
		    "unresolvable", EGRESS_ERR_DNS_FAILED, { "" } },
		{ "answers-too-many", "app", "http://api.test/", MANY_ANSWERS,
		    { "" }, 0, "unresolvable", EGRESS_ERR_DNS_FAILED, { "" } },
		/* A localhost name is answered without a query (no
		 * resolver here), whatever answers are given. */
		{ "localhost-no-query", "app", "http://localhost:8080/",
		    NO_ANSWERS, { "" }, 1, "", 0, { "127.0.0.1", "::1" } },
		{ "localhost-answers-ignored", "app", "http://dev.localhost/",
		    1, { "93.184.216.34" }, 1, "", 0, { "127.0.0.1", "::1" } },
		/* A name, no answers and no resolver. */
		{ "no-resolver", "app", "http://api.test/", NO_ANSWERS, { "" },
		    0, "unresolvable", EGRESS_ERR_DNS_FAILED, { "" } },
	};

	return cr_make_param_array(struct now_case, cases,
	    sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct now_case *c, decide, at_once)
{
	static struct decide d;
	struct policy_addr given[POLICY_ANSWERS_MAX + 1], want;
	const struct decide_result *res;
	struct decide_lookup lk;
	struct policy_dest dest;
	struct pol p;
	int i, n = 0;

	memset(&p, 0, sizeof(p));
	p.snap = load(conf_granted);
	(void)snprintf(p.instance, sizeof(p.instance), "%s", c->instance);
	dest_parse(c->url, &dest);
	memset(&lk, 0, sizeof(lk));
	if (c->nanswers == MANY_ANSWERS) {
		n = POLICY_ANSWERS_MAX + 1;
		for (i = 0; i < n; i++) {
			memset(&given[i], 0, sizeof(given[i]));
			given[i].family = 4;
			given[i].bytes[0] = 93;
			given[i].bytes[3] = (uint8_t)(i + 1);
		}
	} else
		for (i = 0; i < c->nanswers; i++)
			addr(c->answers[i], &given[n++]);
	if (c->nanswers != NO_ANSWERS) {
		lk.answers = given;
		lk.nanswers = (size_t)n;
	}
	memset(&d, 0xa5, sizeof(d)); /* needs no initialisation */
	cr_assert_eq(decide_run(&d, POLICY_TRANSPORT_HTTP, &dest, pol_fn, &p,
			 &lk, never_cb, c->name),
	    1, "%s: not decided at once", c->name);
	cr_assert_not(decide_is_pending(&d), "%s", c->name);
	res = decide_result(&d);
	cr_assert_eq(res->invalid, 0, "%s", c->name);
	cr_assert_eq(res->allow, c->allow, "%s: allow %d (%s)", c->name,
	    res->allow, res->reason != NULL ? res->reason : "allow");
	cr_assert_eq(res->resolved, 0, "%s: a lookup was made", c->name);
	cr_assert_eq(res->dns, DNS_OK, "%s", c->name);
	cr_assert_eq(p.calls, 1, "%s: policy read %d times", c->name, p.calls);
	cr_assert_eq(p.calls_answers, 0, "%s", c->name);
	if (c->allow) {
		cr_assert_null(res->reason, "%s", c->name);
		cr_assert_eq(res->error, 0, "%s", c->name);
		for (i = 0; i < 3 && c->addrs[i][0] != '\0'; i++) {
			addr(c->addrs[i], &want);
			cr_assert_eq(res->verdict->addrs[i].family,
			    want.family, "%s: addr %d", c->name, i);
			cr_assert_arr_eq(res->verdict->addrs[i].bytes,
			    want.bytes, want.family == 4 ? 4 : 16,
			    "%s: addr %d", c->name, i);
		}
		cr_assert_eq(res->verdict->naddrs, (size_t)i,
		    "%s: %zu validated addresses", c->name,
		    res->verdict->naddrs);
	} else {
		cr_assert_str_eq(res->reason, c->reason, "%s", c->name);
		cr_assert_eq(res->error, c->error, "%s: error %d", c->name,
		    res->error);
		cr_assert_eq(res->verdict->naddrs, 0,
		    "%s: a deny carries addresses", c->name);
	}
	conf_snapshot_free((struct conf_snapshot *)p.snap);
}

/* The policy refused the arguments: no verdict, res->invalid. */
struct invalid_case {
	char name[24];
	int transport;
	int zero_host; /* a destination whose host is unset */
};

ParameterizedTestParameters(decide, invalid_destination)
{
	static struct invalid_case cases[] = {
		{ "unset-host", POLICY_TRANSPORT_HTTP, 1 },
		{ "unknown-transport", 99, 0 },
	};

	return cr_make_param_array(struct invalid_case, cases,
	    sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct invalid_case *c, decide, invalid_destination)
{
	static struct decide d;
	const struct decide_result *res;
	struct decide_lookup lk;
	struct policy_dest dest;
	struct pol p;

	memset(&p, 0, sizeof(p));
	p.snap = load(conf_granted);
	strcpy(p.instance, "app");
	dest_parse("http://api.test/", &dest);
	if (c->zero_host)
		memset(&dest.host, 0, sizeof(dest.host));
	memset(&lk, 0, sizeof(lk));
	cr_assert_eq(decide_run(&d, (enum policy_transport)c->transport, &dest,
			 pol_fn, &p, &lk, never_cb, c->name),
	    1, "%s", c->name);
	res = decide_result(&d);
	cr_assert_eq(res->invalid, 1, "%s", c->name);
	cr_assert_eq(res->allow, 0, "%s", c->name);
	cr_assert_eq(res->error, EGRESS_ERR_INVALID, "%s", c->name);
	cr_assert_eq(res->resolved, 0, "%s", c->name);
	conf_snapshot_free((struct conf_snapshot *)p.snap);
}

/* No policy at all (a broken configuration): policy-unavailable. */
Test(decide, policy_unavailable_at_once)
{
	static struct decide d;
	const struct decide_result *res;
	struct decide_lookup lk;
	struct policy_dest dest;
	struct pol p;

	memset(&p, 0, sizeof(p));
	p.snap = load(conf_granted);
	strcpy(p.instance, "app");
	p.mode = POL_ERROR;
	dest_parse("http://127.0.0.1/", &dest);
	memset(&lk, 0, sizeof(lk));
	cr_assert_eq(decide_run(&d, POLICY_TRANSPORT_HTTP, &dest, pol_fn, &p,
			 &lk, never_cb, "unavailable"),
	    1);
	res = decide_result(&d);
	cr_assert_eq(res->allow, 0);
	cr_assert_eq(res->invalid, 0);
	cr_assert_str_eq(res->reason, "policy-unavailable");
	cr_assert_eq(res->error, EGRESS_ERR_UNAVAILABLE);
	conf_snapshot_free((struct conf_snapshot *)p.snap);
}

/* A zeroed struct decide that never ran may be cancelled. */
Test(decide, cancel_never_run)
{
	static struct decide d;

	memset(&d, 0, sizeof(d));
	cr_assert_not(decide_is_pending(&d));
	decide_cancel(&d);
	decide_cancel(&d);
}

/* ---- the loopback DNS responder --------------------------------------- */

struct query {
	uint8_t buf[512];
	size_t len, qend; /* qend: end of the question */
	unsigned qtype;
	struct sockaddr_in from;
};

struct dnsd {
	int fd;
	uint16_t port;
	char server[32]; /* "127.0.0.1:PORT" */
	struct query q[8];
	size_t nq;
};

static void
dnsd_start(struct dnsd *s)
{
	struct sockaddr_in sin;
	socklen_t sl = sizeof(sin);

	memset(s, 0, sizeof(*s));
	s->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	cr_assert(s->fd >= 0);
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert(bind(s->fd, (struct sockaddr *)&sin, sizeof(sin)) == 0);
	cr_assert(getsockname(s->fd, (struct sockaddr *)&sin, &sl) == 0);
	s->port = ntohs(sin.sin_port);
	(void)snprintf(s->server, sizeof(s->server), "127.0.0.1:%u",
	    (unsigned)s->port);
}

/* Wait up to ms for a query to be readable. */
static void
dnsd_wait(const struct dnsd *s, int ms)
{
	struct pollfd pfd = { s->fd, POLLIN, 0 };

	(void)poll(&pfd, 1, ms);
}

/* Read every query that arrived (no answer yet). */
static void
dnsd_poll(struct dnsd *s)
{
	struct query *q;
	socklen_t fl;
	ssize_t n;
	size_t off;

	while (s->nq < sizeof(s->q) / sizeof(s->q[0])) {
		q = &s->q[s->nq];
		fl = sizeof(q->from);
		n = recvfrom(s->fd, q->buf, sizeof(q->buf), 0,
		    (struct sockaddr *)&q->from, &fl);
		if (n < 0)
			return;
		if (n < 12)
			continue;
		off = 12;
		while (off < (size_t)n && q->buf[off] != 0)
			off += 1u + q->buf[off];
		if (off + 5 > (size_t)n)
			continue;
		q->qtype = (unsigned)(q->buf[off + 1] << 8 | q->buf[off + 2]);
		q->qend = off + 5;
		q->len = (size_t)n;
		s->nq++;
	}
}

static size_t
put16(uint8_t *p, unsigned v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
	return 2;
}

/* Answer every query read so far: A queries with v4 (NULL: none), AAAA
 * with no record, or rcode for both. */
static void
dnsd_answer(struct dnsd *s, const uint8_t *v4, unsigned rcode)
{
	uint8_t out[600];
	size_t i, n;
	struct query *q;

	for (i = 0; i < s->nq; i++) {
		q = &s->q[i];
		memcpy(out, q->buf, q->qend);
		out[2] = (uint8_t)(0x80 | (q->buf[2] & 0x01));
		out[3] = (uint8_t)(0x80 | rcode);
		put16(out + 4, 1);
		put16(out + 6, 0);
		put16(out + 8, 0);
		put16(out + 10, 0);
		n = q->qend;
		if (rcode == 0 && q->qtype == 1 && v4 != NULL) {
			put16(out + 6, 1);
			n += put16(out + n, 0xc00c);
			n += put16(out + n, 1);
			n += put16(out + n, 1);
			n += put16(out + n, 0);
			n += put16(out + n, 60);
			n += put16(out + n, 4);
			memcpy(out + n, v4, 4);
			n += 4;
		}
		cr_assert_eq(sendto(s->fd, out, n, 0,
				 (struct sockaddr *)&q->from, sizeof(q->from)),
		    (ssize_t)n);
	}
	s->nq = 0;
}

static void
dnsd_stop(struct dnsd *s)
{
	if (s->fd >= 0)
		(void)close(s->fd);
	s->fd = -1;
}

/* ---- decisions that wait for their lookup ----------------------------- */

struct waiter {
	int calls;
	struct decide_result res;
	char reason[32];
};

static void
waiter_cb(void *arg, const struct decide_result *res)
{
	struct waiter *w = arg;

	w->calls++;
	w->res = *res;
	(void)snprintf(w->reason, sizeof(w->reason), "%s",
	    res->reason != NULL ? res->reason : "");
}

/* Run base until both queries (A and AAAA) of a lookup are read. */
static void
wait_queries(struct event_base *base, struct dnsd *s, size_t want)
{
	int i;

	for (i = 0; i < 2000 && s->nq < want; i++) {
		cr_assert_neq(event_base_loop(base, EVLOOP_NONBLOCK), -1);
		dnsd_poll(s);
		if (s->nq < want)
			dnsd_wait(s, 10);
	}
	cr_assert_geq(s->nq, want, "the lookup never reached the responder");
}

struct later_case {
	char name[24];
	int revoke; /* swap in the snapshot without the grant */
	int mode;   /* enum pol_mode at answer time */
	int allow;
	char reason[32];
	int error;
};

ParameterizedTestParameters(decide, recheck_at_answer_time)
{
	static struct later_case cases[] = {
		{ "unchanged", 0, POL_OK, 1, "", 0 },
		{ "grant-revoked", 1, POL_OK, 0, "not-granted",
		    EGRESS_ERR_DENIED },
		{ "instance-removed", 0, POL_UNKNOWN, 0, "unknown-instance",
		    EGRESS_ERR_DENIED },
		{ "config-broken", 0, POL_ERROR, 0, "policy-unavailable",
		    EGRESS_ERR_UNAVAILABLE },
	};

	return cr_make_param_array(struct later_case, cases,
	    sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct later_case *c, decide, recheck_at_answer_time)
{
	static const uint8_t v4[4] = { 93, 184, 216, 34 };
	static struct decide d;
	struct conf_snapshot *granted = load(conf_granted);
	struct conf_snapshot *revoked = load(conf_revoked);
	struct event_base *base = event_base_new();
	struct dns_resolver *rs = NULL;
	const char *servers[1];
	struct decide_lookup lk;
	struct policy_dest dest;
	struct waiter w;
	struct dnsd s;
	struct pol p;
	int i;

	cr_assert_not_null(base);
	dnsd_start(&s);
	servers[0] = s.server;
	cr_assert_eq(dns_resolver_new(base, servers, 1, 10000, &rs), 0);
	memset(&p, 0, sizeof(p));
	memset(&w, 0, sizeof(w));
	p.snap = granted;
	strcpy(p.instance, "app");
	dest_parse("http://api.test/", &dest);
	memset(&lk, 0, sizeof(lk));
	lk.resolver = rs;
	lk.tag = "app";
	cr_assert_eq(decide_run(&d, POLICY_TRANSPORT_HTTP, &dest, pol_fn, &p,
			 &lk, waiter_cb, &w),
	    0, "%s: decided without its lookup", c->name);
	cr_assert(decide_is_pending(&d));
	cr_assert_eq(p.calls, 1);
	wait_queries(base, &s, 2);
	cr_assert_eq(w.calls, 0, "%s: called before the answer", c->name);

	/* The policy changes while the lookup is out. */
	if (c->revoke)
		p.snap = revoked;
	p.mode = (enum pol_mode)c->mode;
	dnsd_answer(&s, v4, 0);
	for (i = 0; i < 2000 && w.calls == 0; i++)
		cr_assert_neq(event_base_loop(base, EVLOOP_ONCE), -1);
	cr_assert_eq(w.calls, 1, "%s: callback called %d times", c->name,
	    w.calls);
	cr_assert_not(decide_is_pending(&d));
	cr_assert_eq(p.calls_answers, 1,
	    "%s: policy not read again at "
	    "answer time",
	    c->name);
	cr_assert_eq(w.res.resolved, 1, "%s", c->name);
	cr_assert_eq(w.res.dns, DNS_OK, "%s", c->name);
	cr_assert_eq(w.res.allow, c->allow, "%s: %s", c->name, w.reason);
	if (c->allow) {
		cr_assert_eq(w.res.verdict->naddrs, 1);
		cr_assert_arr_eq(w.res.verdict->addrs[0].bytes, v4, 4);
	} else {
		cr_assert_str_eq(w.reason, c->reason, "%s", c->name);
		cr_assert_eq(w.res.error, c->error, "%s", c->name);
		cr_assert_eq(w.res.verdict->naddrs, 0, "%s", c->name);
	}
	dns_resolver_free(rs);
	dnsd_stop(&s);
	event_base_free(base);
	conf_snapshot_free(granted);
	conf_snapshot_free(revoked);
}

/* A lookup that fails (SERVFAIL) is no answer: unresolvable, dns-failed. */
Test(decide, lookup_servfail)
{
	static struct decide d;
	struct conf_snapshot *snap = load(conf_granted);
	struct event_base *base = event_base_new();
	struct dns_resolver *rs = NULL;
	const char *servers[1];
	struct decide_lookup lk;
	struct policy_dest dest;
	struct waiter w;
	struct dnsd s;
	struct pol p;
	int i;

	dnsd_start(&s);
	servers[0] = s.server;
	cr_assert_eq(dns_resolver_new(base, servers, 1, 10000, &rs), 0);
	memset(&p, 0, sizeof(p));
	memset(&w, 0, sizeof(w));
	p.snap = snap;
	strcpy(p.instance, "app");
	dest_parse("http://api.test/", &dest);
	memset(&lk, 0, sizeof(lk));
	lk.resolver = rs;
	cr_assert_eq(decide_run(&d, POLICY_TRANSPORT_HTTP, &dest, pol_fn, &p,
			 &lk, waiter_cb, &w),
	    0);
	wait_queries(base, &s, 2);
	dnsd_answer(&s, NULL, 2);
	for (i = 0; i < 2000 && w.calls == 0; i++)
		cr_assert_neq(event_base_loop(base, EVLOOP_ONCE), -1);
	cr_assert_eq(w.calls, 1);
	cr_assert_eq(w.res.allow, 0);
	cr_assert_eq(w.res.resolved, 1);
	cr_assert_eq(w.res.dns, DNS_SERVFAIL, "dns %d", w.res.dns);
	cr_assert_str_eq(w.reason, "unresolvable");
	cr_assert_eq(w.res.error, EGRESS_ERR_DNS_FAILED);
	dns_resolver_free(rs);
	dnsd_stop(&s);
	event_base_free(base);
	conf_snapshot_free(snap);
}

/* Cancelled before the answer: neither the callback nor the policy is
 * called when the answer arrives. */
Test(decide, cancel_before_answer)
{
	static const uint8_t v4[4] = { 93, 184, 216, 34 };
	static struct decide d;
	struct conf_snapshot *snap = load(conf_granted);
	struct event_base *base = event_base_new();
	struct dns_resolver *rs = NULL;
	const char *servers[1];
	struct decide_lookup lk;
	struct policy_dest dest;
	struct waiter w;
	struct dnsd s;
	struct pol p;
	int i;

	dnsd_start(&s);
	servers[0] = s.server;
	cr_assert_eq(dns_resolver_new(base, servers, 1, 10000, &rs), 0);
	memset(&p, 0, sizeof(p));
	memset(&w, 0, sizeof(w));
	p.snap = snap;
	strcpy(p.instance, "app");
	dest_parse("http://api.test/", &dest);
	memset(&lk, 0, sizeof(lk));
	lk.resolver = rs;
	lk.tag = "app";
	cr_assert_eq(decide_run(&d, POLICY_TRANSPORT_HTTP, &dest, pol_fn, &p,
			 &lk, waiter_cb, &w),
	    0);
	wait_queries(base, &s, 2);
	decide_cancel(&d);
	cr_assert_not(decide_is_pending(&d));
	decide_cancel(&d); /* a second cancel is a no-op */
	dnsd_answer(&s, v4, 0);
	/* c-ares finishes the cancelled lookup once its answers are in. */
	for (i = 0; i < 2000 && dns_resolver_outstanding(rs) > 0; i++)
		cr_assert_neq(event_base_loop(base, EVLOOP_ONCE), -1);
	cr_assert_eq(dns_resolver_outstanding(rs), 0,
	    "the answers never reached c-ares");
	(void)event_base_loop(base, EVLOOP_NONBLOCK);
	cr_assert_eq(w.calls, 0, "the callback of a cancelled decision ran");
	cr_assert_eq(p.calls, 1, "the policy was read after the cancel");
	dns_resolver_free(rs);
	dnsd_stop(&s);
	event_base_free(base);
	conf_snapshot_free(snap);
}

/* One tag may keep at most tag_max lookups outstanding; another tag is
 * not affected, and the deny is made before any query goes out. */
Test(decide, tag_max_fair_share)
{
	static struct decide d1, d2, d3, d4;
	struct conf_snapshot *snap = load(conf_granted);
	struct event_base *base = event_base_new();
	struct dns_resolver *rs = NULL;
	const char *servers[1];
	const struct decide_result *res;
	struct decide_lookup lk;
	struct policy_dest dest;
	struct waiter w;
	struct dnsd s;
	struct pol p;
	uint64_t queries;

	dnsd_start(&s);
	servers[0] = s.server;
	cr_assert_eq(dns_resolver_new(base, servers, 1, 10000, &rs), 0);
	memset(&p, 0, sizeof(p));
	memset(&w, 0, sizeof(w));
	p.snap = snap;
	strcpy(p.instance, "app");
	dest_parse("http://api.test/", &dest);
	memset(&lk, 0, sizeof(lk));
	lk.resolver = rs;
	lk.tag = "app";
	lk.tag_max = 2;
	cr_assert_eq(decide_run(&d1, POLICY_TRANSPORT_HTTP, &dest, pol_fn, &p,
			 &lk, waiter_cb, &w),
	    0);
	cr_assert_eq(decide_run(&d2, POLICY_TRANSPORT_HTTP, &dest, pol_fn, &p,
			 &lk, waiter_cb, &w),
	    0);
	cr_assert_eq(dns_resolver_outstanding_tag(rs, "app"), 2);
	queries = dns_resolver_queries(rs);
	cr_assert_eq(decide_run(&d3, POLICY_TRANSPORT_HTTP, &dest, pol_fn, &p,
			 &lk, never_cb, "third"),
	    1, "the third lookup was made");
	res = decide_result(&d3);
	cr_assert_eq(res->allow, 0);
	cr_assert_str_eq(res->reason, "budget-exhausted");
	cr_assert_eq(res->error, EGRESS_ERR_BUDGET_EXHAUSTED);
	cr_assert_eq(res->resolved, 0);
	cr_assert_eq(dns_resolver_queries(rs), queries);
	/* Another tag still gets its lookup. */
	lk.tag = "other";
	cr_assert_eq(decide_run(&d4, POLICY_TRANSPORT_HTTP, &dest, pol_fn, &p,
			 &lk, waiter_cb, &w),
	    0);
	/* A cancelled lookup still counts until c-ares is done with it. */
	lk.tag = "app";
	decide_cancel(&d1);
	cr_assert_eq(decide_run(&d3, POLICY_TRANSPORT_HTTP, &dest, pol_fn, &p,
			 &lk, never_cb, "after-cancel"),
	    1);
	cr_assert_str_eq(decide_result(&d3)->reason, "budget-exhausted");
	decide_cancel(&d2);
	decide_cancel(&d4);
	cr_assert_eq(w.calls, 0);
	dns_resolver_free(rs);
	dnsd_stop(&s);
	event_base_free(base);
	conf_snapshot_free(snap);
}

/* ---- decide_run_sync -------------------------------------------------- */

Test(decide, sync_given_answers)
{
	static struct decide d;
	struct conf_snapshot *snap = load(conf_granted);
	struct policy_addr a[2];
	struct policy_dest dest;
	struct pol p;

	memset(&p, 0, sizeof(p));
	p.snap = snap;
	strcpy(p.instance, "app");
	dest_parse("http://svc.test/", &dest);
	addr("127.0.0.1", &a[0]);
	addr("::1", &a[1]);
	/* No server is named: the given answers stand for the lookup. */
	cr_assert_eq(decide_run_sync(&d, POLICY_TRANSPORT_HTTP, &dest, pol_fn,
			 &p, NULL, 0, 1000, a, 2),
	    0);
	cr_assert_eq(decide_result(&d)->allow, 1, "%s",
	    decide_result(&d)->reason);
	cr_assert_eq(decide_result(&d)->verdict->naddrs, 2);
	cr_assert_eq(decide_result(&d)->resolved, 0);
	/* The same answers for a host without the carve-out. */
	dest_parse("http://api.test/", &dest);
	cr_assert_eq(decide_run_sync(&d, POLICY_TRANSPORT_HTTP, &dest, pol_fn,
			 &p, NULL, 0, 1000, a, 2),
	    0);
	cr_assert_eq(decide_result(&d)->allow, 0);
	cr_assert_str_eq(decide_result(&d)->reason, "loopback-address");
	conf_snapshot_free(snap);
}

/* A resolver that cannot be made: an error and no outcome. */
Test(decide, sync_resolver_error)
{
	static struct decide d;
	struct conf_snapshot *snap = load(conf_granted);
	const char *servers[1] = { "not-an-address" };
	struct policy_dest dest;
	struct pol p;

	memset(&p, 0, sizeof(p));
	p.snap = snap;
	strcpy(p.instance, "app");
	dest_parse("http://api.test/", &dest);
	cr_assert_eq(decide_run_sync(&d, POLICY_TRANSPORT_HTTP, &dest, pol_fn,
			 &p, servers, 1, 1000, NULL, 0),
	    EGRESS_ERR_INVALID);
	/* A deny before the lookup never needs the resolver's server. */
	strcpy(p.instance, "nobody");
	servers[0] = "127.0.0.1:1";
	cr_assert_eq(decide_run_sync(&d, POLICY_TRANSPORT_HTTP, &dest, pol_fn,
			 &p, servers, 1, 1000, NULL, 0),
	    0);
	cr_assert_str_eq(decide_result(&d)->reason, "unknown-instance");
	conf_snapshot_free(snap);
}

/* A responder thread answering SERVFAIL, for the blocking wrapper. */
struct servfail {
	struct dnsd s;
	atomic_int stop;
	pthread_t thr;
};

static void *
servfail_main(void *arg)
{
	struct servfail *sf = arg;

	while (!atomic_load(&sf->stop)) {
		dnsd_poll(&sf->s);
		if (sf->s.nq > 0)
			dnsd_answer(&sf->s, NULL, 2);
		else
			dnsd_wait(&sf->s, 50);
	}
	return NULL;
}

Test(decide, sync_lookup_fails)
{
	static struct decide d;
	static struct servfail sf;
	struct conf_snapshot *snap = load(conf_granted);
	const char *servers[1];
	struct policy_dest dest;
	struct pol p;

	dnsd_start(&sf.s);
	atomic_store(&sf.stop, 0);
	cr_assert_eq(pthread_create(&sf.thr, NULL, servfail_main, &sf), 0);
	memset(&p, 0, sizeof(p));
	p.snap = snap;
	strcpy(p.instance, "app");
	dest_parse("http://api.test/", &dest);
	servers[0] = sf.s.server;
	cr_assert_eq(decide_run_sync(&d, POLICY_TRANSPORT_HTTP, &dest, pol_fn,
			 &p, servers, 1, 10000, NULL, 0),
	    0);
	atomic_store(&sf.stop, 1);
	cr_assert_eq(pthread_join(sf.thr, NULL), 0);
	dnsd_stop(&sf.s);
	cr_assert_eq(decide_result(&d)->allow, 0);
	cr_assert_eq(decide_result(&d)->resolved, 1);
	cr_assert_eq(decide_result(&d)->dns, DNS_SERVFAIL);
	cr_assert_str_eq(decide_result(&d)->reason, "unresolvable");
	cr_assert_eq(decide_result(&d)->error, EGRESS_ERR_DNS_FAILED);
	conf_snapshot_free(snap);
}
