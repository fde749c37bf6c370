/* SPDX-License-Identifier: ISC */
/*
 * The leaves of TLS inspection (broker/net/mint.c): each names its host
 * in subjectAltName (dNSName, or iPAddress for a literal), is signed by
 * the CA and verifies against it for that name only, is valid from
 * MINT_BACKDATE_S before it was made for MINT_LIFETIME_S, is no CA; the
 * cache hands the same leaf again (case-insensitively), makes a new one
 * once less than MINT_RENEW_S is left, and holds at most its bound,
 * dropping the least recently used name. When one of libevent's
 * allocations in mint_wrap() fails, the connection it was given is freed
 * exactly once (its socket closed) and nothing of libevent's is left.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <criterion/parameterized.h>
#include <openssl/x509_vfy.h>

#include <egress/error.h>

#include "broker/net/mint.h"
#include "ca_test.h"

static X509 *ca;
static struct mint *m;

static void
setup(void)
{
	EVP_PKEY *k = NULL;

	ca = ca_test_make(1, &k);
	cr_assert_eq(X509_up_ref(ca), 1);
	cr_assert_eq(mint_new(ca, k, 3, &m), 0);
}

static void
teardown(void)
{
	mint_free(m);
	m = NULL;
	X509_free(ca);
	ca = NULL;
}

/* Verify leaf against the CA for host (or an IP literal) at time t. */
static int
verifies(X509 *leaf, const char *host, time_t t)
{
	X509_STORE *st = X509_STORE_new();
	X509_STORE_CTX *ctx = X509_STORE_CTX_new();
	X509_VERIFY_PARAM *p;
	int ok;

	cr_assert_eq(X509_STORE_add_cert(st, ca), 1);
	cr_assert_eq(X509_STORE_CTX_init(ctx, st, leaf, NULL), 1);
	p = X509_STORE_CTX_get0_param(ctx);
	X509_VERIFY_PARAM_set_time(p, t);
	X509_VERIFY_PARAM_set_purpose(p, X509_PURPOSE_SSL_SERVER);
	if (strchr(host, ':') != NULL ||
	    strspn(host, "0123456789.") == strlen(host))
		X509_VERIFY_PARAM_set1_ip_asc(p, host);
	else
		X509_VERIFY_PARAM_set1_host(p, host, 0);
	ok = X509_verify_cert(ctx) == 1;
	X509_STORE_CTX_free(ctx);
	X509_STORE_free(st);
	return ok;
}

struct name_case {
	char name[64];
	char other[64]; /* a name the leaf must not verify for */
};

ParameterizedTestParameters(net_mint, names)
{
	static struct name_case cases[] = {
		{ "api.weather.example", "other.weather.example" },
		{ "a.example", "b.a.example" },
		{ "93.184.216.34", "93.184.216.35" },
		{ "fd00:ffff::2", "fd00:ffff::3" },
		{ "xn--bcher-kva.example", "bucher.example" },
	};

	return cr_make_param_array(struct name_case, cases,
	    sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct name_case *c, net_mint, names, .init = setup,
    .fini = teardown)
{
	time_t now = time(NULL);
	X509 *leaf = NULL;

	cr_assert_eq(mint_leaf(m, c->name, now, &leaf), 0);
	cr_expect(verifies(leaf, c->name, now), "%s", c->name);
	cr_expect(!verifies(leaf, c->other, now), "%s", c->other);
	cr_expect_eq(X509_check_ca(leaf), 0, "a leaf is no CA");
	cr_expect_eq(X509_check_private_key(leaf, mint_key(m)), 1);
}

Test(net_mint, validity, .init = setup, .fini = teardown)
{
	time_t now = time(NULL);
	X509 *leaf = NULL;
	int day = 0, sec = 0;

	cr_assert_eq(mint_leaf(m, "a.example", now, &leaf), 0);
	cr_assert_eq(ASN1_TIME_diff(&day, &sec, X509_get0_notBefore(leaf),
			 X509_get0_notAfter(leaf)),
	    1);
	cr_expect_eq(day * 86400 + sec, MINT_LIFETIME_S);
	cr_expect(verifies(leaf, "a.example", now - MINT_BACKDATE_S + 5));
	cr_expect(!verifies(leaf, "a.example", now - MINT_BACKDATE_S - 5));
	cr_expect(verifies(leaf, "a.example",
	    now - MINT_BACKDATE_S + MINT_LIFETIME_S - 5));
	cr_expect(!verifies(leaf, "a.example",
	    now - MINT_BACKDATE_S + MINT_LIFETIME_S + 5));
}

Test(net_mint, cache_reuse_and_renewal, .init = setup, .fini = teardown)
{
	time_t now = time(NULL);
	X509 *a = NULL, *b = NULL, *c = NULL;

	cr_assert_eq(mint_leaf(m, "a.example", now, &a), 0);
	cr_assert_eq(mint_leaf(m, "A.Example", now + 60, &b), 0);
	cr_expect_eq(a, b, "the same leaf, case-insensitively");
	cr_expect_eq(mint_cached(m), 1);
	/* Less than MINT_RENEW_S left: a new one. */
	cr_assert_eq(mint_leaf(m, "a.example",
			 now - MINT_BACKDATE_S + MINT_LIFETIME_S -
			     MINT_RENEW_S + 1,
			 &c),
	    0);
	cr_expect_neq(a, c);
	cr_expect_eq(mint_cached(m), 1);
}

Test(net_mint, cache_bound_drops_least_recent, .init = setup, .fini = teardown)
{
	time_t now = time(NULL);
	X509 *a = NULL, *b = NULL, *c = NULL, *x = NULL;

	cr_assert_eq(mint_leaf(m, "a.example", now, &a), 0);
	cr_assert_eq(mint_leaf(m, "b.example", now, &b), 0);
	cr_assert_eq(X509_up_ref(b), 1); /* kept: its address stays its own */
	cr_assert_eq(mint_leaf(m, "c.example", now, &c), 0);
	cr_assert_eq(X509_up_ref(c), 1);
	cr_assert_eq(mint_leaf(m, "a.example", now, &x), 0); /* a is recent */
	cr_expect_eq(a, x);
	cr_assert_eq(mint_leaf(m, "d.example", now, &x), 0); /* b goes */
	cr_expect_eq(mint_cached(m), 3);
	cr_assert_eq(mint_leaf(m, "a.example", now, &x), 0);
	cr_expect_eq(a, x, "a was kept");
	cr_assert_eq(mint_leaf(m, "c.example", now, &x), 0);
	cr_expect_eq(c, x, "c was kept");
	cr_assert_eq(mint_leaf(m, "b.example", now, &x), 0);
	cr_expect_neq(b, x, "b was kept, not the least recently used");
	cr_expect_eq(mint_cached(m), 3);
	X509_free(b);
	X509_free(c);
}

Test(net_mint, bad_names, .init = setup, .fini = teardown)
{
	char longname[MINT_NAME_MAX + 2];
	X509 *x = NULL;

	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	cr_expect_eq(mint_leaf(m, "", 0, &x), EGRESS_ERR_INVALID);
	cr_expect_eq(mint_leaf(m, longname, 0, &x), EGRESS_ERR_INVALID);
	cr_expect_eq(mint_cached(m), 0);
}

Test(net_mint, key_must_match_ca)
{
	EVP_PKEY *k1 = NULL, *k2 = NULL;
	X509 *c1 = ca_test_make(1, &k1), *c2 = ca_test_make(1, &k2);
	struct mint *bad = NULL;

	cr_expect_eq(mint_new(c1, k2, 4, &bad), EGRESS_ERR_INVALID);
	cr_expect_null(bad);
	X509_free(c2);
	EVP_PKEY_free(k1);
}

/* ---- libevent's allocations, failing the Nth one when armed ---------- */

#define TRACK_MAX 4096
static void *track[TRACK_MAX];
static long fail_in = -1; /* allocations left before one fails; -1: none */
static long allocs;	  /* while armed */
static int bad;		  /* a block libevent did not own freed or moved */

static void
track_put(void *p)
{
	for (size_t i = 0; i < TRACK_MAX; i++)
		if (track[i] == NULL) {
			track[i] = p;
			return;
		}
	bad = 1;
}

static int
track_take(void *p)
{
	for (size_t i = 0; i < TRACK_MAX; i++)
		if (track[i] == p) {
			track[i] = NULL;
			return 1;
		}
	return 0;
}

static size_t
track_live(void)
{
	size_t n = 0;

	for (size_t i = 0; i < TRACK_MAX; i++)
		n += track[i] != NULL;
	return n;
}

static int
track_fails(void)
{
	if (fail_in < 0)
		return 0;
	allocs++;
	return fail_in-- == 0;
}

static void *
t_malloc(size_t n)
{
	void *p = track_fails() ? NULL : malloc(n);

	if (p != NULL)
		track_put(p);
	return p;
}

static void *
t_realloc(void *old, size_t n)
{
	void *p;

	if (old == NULL)
		return t_malloc(n);
	if (track_fails())
		return NULL;
	if (!track_take(old)) {
		bad = 1;
		return NULL;
	}
	if ((p = realloc(old, n)) != NULL)
		track_put(p);
	return p;
}

static void
t_free(void *p)
{
	if (p == NULL)
		return;
	if (!track_take(p)) {
		bad = 1; /* a second free: not done */
		return;
	}
	free(p);
}

enum wrap_end { WRAP_OK, WRAP_FAILED_CLEAN, WRAP_BAD };

/* mint_wrap() on a fresh connection with libevent's allocation number
 * n failing (n < 0: none); *count: libevent's allocations in it. */
static enum wrap_end
wrap_once(long n, long *count)
{
	struct event_base *base = event_base_new();
	struct bufferevent *bev, *tls = NULL;
	int sv[2], err;
	char c;

	if (base == NULL || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0 ||
	    (bev = bufferevent_socket_new(base, sv[0],
		 BEV_OPT_CLOSE_ON_FREE)) == NULL)
		return WRAP_BAD;
	allocs = 0;
	fail_in = n < 0 ? 1L << 30 : n;
	err = mint_wrap(m, base, bev, "api.example", time(NULL), &tls);
	fail_in = -1;
	*count = allocs;
	if (err == 0)
		bufferevent_free(tls);
	(void)event_base_loop(base, EVLOOP_NONBLOCK);
	event_base_free(base);
	/* Freed once, nothing left, the socket closed (the peer reads
	 * the end). */
	if (bad || track_live() != 0 || read(sv[1], &c, 1) != 0 ||
	    (err != 0 && err != EGRESS_ERR_NOMEM))
		return WRAP_BAD;
	return err == 0 ? WRAP_OK : WRAP_FAILED_CLEAN;
}

/* Each of libevent's allocations in mint_wrap() failing in turn, each
 * in a child of its own. libevent 2.1 itself crashes when the filter's
 * own buffers cannot be made (it frees the half-made filter): such a
 * child dies of a signal, tolerated; a failure libevent absorbs may
 * still wrap; every other end must leave no block freed twice and none
 * behind, and some must be failures of mint_wrap(). */
Test(net_mint, wrap_failure_frees_once, .init = setup, .fini = teardown)
{
	long total = 0, count = 0;
	int clean = 0, status;

	event_set_mem_functions(t_malloc, t_realloc, t_free);
	cr_assert_eq(wrap_once(-1, &total), WRAP_OK);
	cr_assert_gt(total, 0);
	for (long n = 0; n < total; n++) {
		pid_t pid = fork();

		cr_assert_geq(pid, 0);
		if (pid == 0)
			_exit((int)wrap_once(n, &count));
		cr_assert_eq(waitpid(pid, &status, 0), pid);
		cr_assert(!WIFEXITED(status) ||
			WEXITSTATUS(status) != WRAP_BAD,
		    "allocation %ld of %ld failing: freed twice or left behind",
		    n, total);
		clean += WIFEXITED(status) &&
		    WEXITSTATUS(status) == WRAP_FAILED_CLEAN;
	}
	cr_assert_geq(clean, 1, "no failure ran to its end");
}
