/* SPDX-License-Identifier: ISC */
/*
 * Unit tests for broker/net/pool: pooled connections keep their lease,
 * are reused only under the exact key and validated address, and are
 * closed (lease released) when the upstream closes, when idle too long,
 * when the pool is full, when their instance needs the lease (evicted,
 * oldest first, own instance only), when another instance below its fair
 * share needs the lease (pool_lease(): only borrowers' idle connections)
 * and when a reload's predicate picks them.
 */
#include <sys/socket.h>

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <egress/error.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "broker/net/lease.h"
#include "broker/net/pool.h"
#include "broker/net/share.h"

struct pooltest {
	struct event_base *base;
	struct lease_table *t;
	struct pool *p;
	struct policy_host host;
	struct policy_addr a1, a2;
};

static void
pt_init(struct pooltest *pt, size_t max_idle, int idle_ms)
{
	struct policy_err e;

	pt->base = event_base_new();
	pt->t = lease_table_new();
	pt->p = pool_new(pt->base, max_idle, idle_ms);
	cr_assert(pt->base != NULL && pt->t != NULL && pt->p != NULL);
	cr_assert_eq(policy_host_parse("api.example.com", 15, &pt->host, &e),
	    0);
	cr_assert_eq(policy_addr_parse("192.0.2.1", &pt->a1), 0);
	cr_assert_eq(policy_addr_parse("2001:db8::1", &pt->a2), 0);
}

static void
pt_done(struct pooltest *pt)
{
	pool_free(pt->p);
	cr_assert_eq(lease_total(pt->t), 0, "pool kept a lease");
	lease_table_free(pt->t);
	event_base_free(pt->base);
}

/* Park one connection for inst at addr; return the upstream's fd. */
static int
pt_put(struct pooltest *pt, const char *inst, const struct policy_addr *a,
    struct bufferevent **ret_bev)
{
	struct pool_key k = { inst, &pt->host, 443, 1, 7 };
	struct bufferevent *bev;
	struct lease *l = NULL;
	int sv[2];

	cr_assert(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	cr_assert(evutil_make_socket_nonblocking(sv[0]) == 0);
	bev = bufferevent_socket_new(pt->base, sv[0], BEV_OPT_CLOSE_ON_FREE);
	cr_assert_eq(lease_acquire(pt->t, inst, 8, &l), 0);
	cr_assert_eq(pool_put(pt->p, &k, a, bev, l), 0);
	if (ret_bev != NULL)
		*ret_bev = bev;
	return sv[1];
}

Test(broker_pool, exact_key_and_address)
{
	struct pooltest pt;
	struct pool_key k;
	struct policy_host other;
	struct policy_err e;
	struct policy_addr used, set[2];
	struct bufferevent *bev = NULL, *got;
	struct lease *l = NULL;
	int fd;

	pt_init(&pt, 0, 0);
	fd = pt_put(&pt, "a", &pt.a1, &bev);
	cr_assert_eq(lease_count(pt.t, "a"), 1, "pooled conn holds a lease");
	cr_assert_eq(pool_idle(pt.p, "a"), 1);
	cr_assert_eq(policy_host_parse("api2.example.com", 16, &other, &e), 0);
	set[0] = pt.a2;
	set[1] = pt.a1;
	/* Wrong instance, port, TLS, host: no reuse. */
	k = (struct pool_key){ "b", &pt.host, 443, 1, 7 };
	cr_assert_null(pool_take(pt.p, &k, set, 2, &l, &used));
	k = (struct pool_key){ "a", &pt.host, 8443, 1, 7 };
	cr_assert_null(pool_take(pt.p, &k, set, 2, &l, &used));
	k = (struct pool_key){ "a", &pt.host, 443, 0, 0 };
	cr_assert_null(pool_take(pt.p, &k, set, 2, &l, &used));
	k = (struct pool_key){ "a", &other, 443, 1, 7 };
	cr_assert_null(pool_take(pt.p, &k, set, 2, &l, &used));
	/* Verified under another TLS trust generation: no reuse. */
	k = (struct pool_key){ "a", &pt.host, 443, 1, 8 };
	cr_assert_null(pool_take(pt.p, &k, set, 2, &l, &used));
	/* The new verdict no longer allows the pooled address: no reuse. */
	k = (struct pool_key){ "a", &pt.host, 443, 1, 7 };
	cr_assert_null(pool_take(pt.p, &k, set, 1, &l, &used));
	/* Exact key, address in the validated set: reuse. */
	got = pool_take(pt.p, &k, set, 2, &l, &used);
	cr_assert_eq(got, bev);
	cr_assert(l != NULL);
	cr_assert_eq(used.family, 4);
	cr_assert_eq(pool_idle(pt.p, NULL), 0);
	cr_assert_eq(lease_count(pt.t, "a"), 1);
	bufferevent_free(got);
	lease_release(l);
	close(fd);
	pt_done(&pt);
}

/*
 * Bytes or EOF that reached the kernel buffer of an idle connection but
 * not yet its read callback (the loop has not run) make it unusable:
 * pool_take() closes it and releases its lease rather than hand the
 * stale bytes to the next request as its response.
 */
Test(broker_pool, take_refuses_unread_bytes)
{
	struct pooltest pt;
	struct pool_key k;
	struct policy_addr used;
	struct bufferevent *bev = NULL, *got;
	struct lease *l = NULL;
	int fd, fd2, fd3;

	pt_init(&pt, 0, 0);
	k = (struct pool_key){ "a", &pt.host, 443, 1, 7 };
	fd = pt_put(&pt, "a", &pt.a1, NULL);
	cr_assert_eq(write(fd, "HTTP/1.1 200 OK\r\n\r\n", 19), 19);
	cr_assert_null(pool_take(pt.p, &k, &pt.a1, 1, &l, &used),
	    "a connection with unread bytes was reused");
	cr_assert_eq(pool_idle(pt.p, NULL), 0);
	cr_assert_eq(lease_count(pt.t, "a"), 0, "its lease was kept");
	fd2 = pt_put(&pt, "a", &pt.a1, NULL);
	close(fd2); /* EOF, not yet seen */
	cr_assert_null(pool_take(pt.p, &k, &pt.a1, 1, &l, &used));
	cr_assert_eq(lease_count(pt.t, "a"), 0);
	/* A quiet one under the same key is still found past a noisy one. */
	fd3 = pt_put(&pt, "a", &pt.a1, &bev);
	fd2 = pt_put(&pt, "a", &pt.a1, NULL);
	cr_assert_eq(write(fd2, "x", 1), 1);
	got = pool_take(pt.p, &k, &pt.a1, 1, &l, &used);
	cr_assert_eq(got, bev);
	cr_assert_eq(lease_count(pt.t, "a"), 1);
	bufferevent_free(got);
	lease_release(l);
	close(fd);
	close(fd2);
	close(fd3);
	pt_done(&pt);
}

Test(broker_pool, upstream_close_releases)
{
	struct pooltest pt;
	int fd, fd2;

	pt_init(&pt, 0, 0);
	fd = pt_put(&pt, "a", &pt.a1, NULL);
	fd2 = pt_put(&pt, "a", &pt.a2, NULL);
	cr_assert_eq(lease_count(pt.t, "a"), 2);
	close(fd);
	cr_assert_eq(write(fd2, "x", 1), 1); /* unsolicited byte */
	while (pool_idle(pt.p, NULL) > 0)
		cr_assert(event_base_loop(pt.base, EVLOOP_ONCE) == 0);
	cr_assert_eq(lease_count(pt.t, "a"), 0);
	close(fd2);
	pt_done(&pt);
}

Test(broker_pool, cap_and_idle_timeout)
{
	struct pooltest pt;
	int fd[3], i;

	pt_init(&pt, 2, 50);
	for (i = 0; i < 3; i++)
		fd[i] = pt_put(&pt, "a", &pt.a1, NULL);
	cr_assert_eq(pool_idle(pt.p, NULL), 2, "cap not enforced");
	cr_assert_eq(lease_count(pt.t, "a"), 2, "evicted lease kept");
	while (pool_idle(pt.p, NULL) > 0)
		cr_assert(event_base_loop(pt.base, EVLOOP_ONCE) == 0);
	cr_assert_eq(lease_count(pt.t, "a"), 0);
	for (i = 0; i < 3; i++)
		close(fd[i]);
	pt_done(&pt);
}

Test(broker_pool, free_releases)
{
	struct pooltest pt;
	int fd;

	pt_init(&pt, 0, 0);
	fd = pt_put(&pt, "a", &pt.a1, NULL);
	cr_assert_eq(lease_total(pt.t), 1);
	pt_done(&pt); /* asserts every lease came back */
	close(fd);
}

/* A full budget evicts the instance's own idle connections, oldest
 * first, and never another instance's. */
Test(broker_pool, evict_own_oldest_first)
{
	struct pooltest pt;
	struct pool_key k = { "a", NULL, 443, 1, 7 };
	struct policy_addr used;
	struct bufferevent *newer = NULL, *got;
	struct lease *l = NULL;
	int fd[3];

	pt_init(&pt, 0, 0);
	k.host = &pt.host;
	fd[0] = pt_put(&pt, "a", &pt.a1, NULL);
	fd[1] = pt_put(&pt, "b", &pt.a1, NULL);
	fd[2] = pt_put(&pt, "a", &pt.a2, &newer);
	cr_assert_eq(pool_evict(pt.p, "c", 1), 0);
	cr_assert_eq(pool_evict(pt.p, "a", 1), 1);
	cr_assert_eq(lease_count(pt.t, "a"), 1, "evicted lease kept");
	cr_assert_eq(lease_count(pt.t, "b"), 1, "other instance evicted");
	/* The survivor is the newer one (a2); a1's is gone. */
	cr_assert_null(pool_take(pt.p, &k, &pt.a1, 1, &l, &used));
	got = pool_take(pt.p, &k, &pt.a2, 1, &l, &used);
	cr_assert_eq(got, newer);
	bufferevent_free(got);
	lease_release(l);
	cr_assert_eq(pool_evict(pt.p, "a", 5), 0);
	cr_assert_eq(pool_idle(pt.p, "b"), 1);
	close(fd[0]);
	close(fd[1]);
	close(fd[2]);
	pt_done(&pt);
}

/*
 * An attacker parks idle connections up to everything the share lets it
 * borrow; the victim still gets its guarantee and, past it, the
 * attacker's idle connections are closed before the victim is refused.
 * The victim's own idle ones within its guarantee are never closed for
 * the attacker.
 */
Test(broker_pool, lease_evicts_borrowers_idle_first)
{
	static const struct share_member m[] = { { "a", "evil" },
		{ "v", "good" } };
	struct pooltest pt;
	struct share *s = share_new(8, 2, 0);
	struct lease *l[4] = { NULL }, *xs[8], *x = NULL;
	int fd[10], i, n = 0;

	pt_init(&pt, 0, 0);
	cr_assert(s != NULL);
	cr_assert_eq(share_configure(s, m, 2), 0);
	lease_table_set_share(pt.t, s);
	/* a: its guarantee of 2 and the borrowable 4, all idle. */
	while (lease_count(pt.t, "a") < 8 && n < 8 && share_held(s, "a") < 6)
		fd[n++] = pt_put(&pt, "a", &pt.a1, NULL);
	cr_assert_eq(n, 6);
	cr_assert_eq(lease_acquire(pt.t, "a", 8, &x),
	    EGRESS_ERR_BUDGET_EXHAUSTED, "a borrowed past the pool");
	/* v: two within its guarantee, then two more by closing a's. */
	for (i = 0; i < 4; i++)
		cr_assert_eq(pool_lease(pt.p, pt.t, "v", 8, &l[i]), 0,
		    "lease %d", i);
	cr_assert_eq(pool_idle(pt.p, "a"), 4, "closed more than needed");
	cr_assert_eq(share_total(s), 8);
	/* Park two of v's; a cannot close them to borrow again. */
	lease_release(l[2]);
	lease_release(l[3]);
	cr_assert_eq(pool_lease(pt.p, pt.t, "a", 8, &x), 0, "a's room back");
	lease_release(x);
	for (i = 0; i < 2; i++)
		lease_release(l[i]);
	fd[n++] = pt_put(&pt, "v", &pt.a2, NULL);
	fd[n++] = pt_put(&pt, "v", &pt.a2, NULL);
	/* a borrows again up to its part, then closes its own idle ones
	 * for more; v's stay. */
	for (i = 0; i < 8 && pool_lease(pt.p, pt.t, "a", 8, &xs[i]) == 0; i++)
		;
	cr_assert_eq(i, 6, "a got %d", i);
	cr_assert_eq(share_held(s, "a"), 6);
	cr_assert_eq(pool_idle(pt.p, "a"), 0);
	cr_assert_eq(pool_idle(pt.p, "v"), 2, "v's guaranteed idle closed");
	while (i > 0)
		lease_release(xs[--i]);
	pool_free(pt.p);
	pt.p = NULL;
	for (i = 0; i < n; i++)
		close(fd[i]);
	cr_assert_eq(share_total(s), 0);
	lease_table_free(pt.t);
	event_base_free(pt.base);
	share_free(s);
}

/* Reload pruning: which idle connections a predicate closes. */
struct prune_case {
	char name[24];
	char drop_instance[8]; /* "" : none by name */
	int drop_tls;
	unsigned max_a; /* drop a's over this many leases */
	unsigned left_a, left_b;
};

struct prune_arg {
	const struct prune_case *c;
	struct lease_table *t;
	int asked;
};

static int
prune_match(void *arg, const struct pool_key *k)
{
	struct prune_arg *pa = arg;

	pa->asked++;
	if (pa->c->drop_instance[0] != '\0' &&
	    strcmp(k->instance, pa->c->drop_instance) == 0)
		return 1;
	if (pa->c->drop_tls && k->tls)
		return 1;
	return strcmp(k->instance, "a") == 0 &&
	    lease_count(pa->t, "a") > pa->c->max_a;
}

ParameterizedTestParameters(broker_pool, drop_if)
{
	static struct prune_case cases[] = {
		{ "nothing", "", 0, 8, 2, 1 },
		{ "removed-instance", "a", 0, 8, 0, 1 },
		{ "other-instance", "b", 0, 8, 2, 0 },
		{ "trust-changed", "", 1, 8, 0, 0 },
		/* Leases are re-counted after each close: stops at 1. */
		{ "budget-lowered", "", 0, 1, 1, 1 },
		{ "budget-zero", "", 0, 0, 0, 1 },
	};

	return cr_make_param_array(struct prune_case, cases,
	    sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct prune_case *c, broker_pool, drop_if)
{
	struct pooltest pt;
	struct prune_arg pa;
	size_t n;
	int fd[3], i;

	pt_init(&pt, 0, 0);
	fd[0] = pt_put(&pt, "a", &pt.a1, NULL);
	fd[1] = pt_put(&pt, "a", &pt.a2, NULL);
	fd[2] = pt_put(&pt, "b", &pt.a1, NULL);
	pa.c = c;
	pa.t = pt.t;
	pa.asked = 0;
	n = pool_drop_if(pt.p, prune_match, &pa);
	cr_assert_eq(pa.asked, 3, "%s: every connection asked about", c->name);
	cr_assert_eq(n, 3 - c->left_a - c->left_b, "%s: closed %zu", c->name,
	    n);
	cr_assert_eq(pool_idle(pt.p, "a"), c->left_a, "%s", c->name);
	cr_assert_eq(pool_idle(pt.p, "b"), c->left_b, "%s", c->name);
	cr_assert_eq(lease_count(pt.t, "a"), c->left_a, "%s: a's leases",
	    c->name);
	cr_assert_eq(lease_count(pt.t, "b"), c->left_b, "%s: b's leases",
	    c->name);
	for (i = 0; i < 3; i++)
		close(fd[i]);
	pt_done(&pt);
}
