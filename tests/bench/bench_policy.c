/* SPDX-License-Identifier: ISC */
/*
 * Benchmark (not a test): policy decisions per second, one decision being
 * policy_check_destination() followed, when it allows a name, by
 * policy_check_answers() over two answers, for grant sets of 10, 1,000,
 * 10,000 and 100,000 entries. The same mix of destinations (exact hits,
 * deep suffix hits, near misses and IP literals) runs against every size,
 * so the time per decision must stay flat as the list grows. Prints one
 * table; see docs/benchmarks.md.
 *
 * usage: bench_policy [-n decisions-per-round] [-r rounds] [-s entries]
 * (-s runs one size only, as for counting instructions under callgrind).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "policy/policy.h"

#define NQUERIES   4096
#define NDECISIONS 500000 /* per round, default */
#define NROUNDS	   9	  /* at most */
#define NSIZES	   4

static int
bench_psl(void *ctx, const char *domain)
{
	(void)ctx;
	return strcmp(domain, "example") == 0 || strcmp(domain, "com") == 0;
}

static void
die(const char *what)
{
	fprintf(stderr, "bench_policy: %s\n", what);
	exit(1);
}

static void
add(struct policy_grant *g, const char *text)
{
	struct policy_entry e;
	struct policy_err err;

	if (policy_entry_parse(text, strlen(text), bench_psl, NULL, &e,
		&err) != 0) {
		fprintf(stderr, "bench_policy: '%s': %s\n", text, err.msg);
		exit(1);
	}
	if (policy_grant_add(g, &e) != 0)
		die("out of memory");
}

/* Entry i: three in four exact names, one in four suffixes. */
static void
entry_text(size_t i, char *buf, size_t n)
{
	if (i % 4 == 3)
		(void)snprintf(buf, n, "*.zone%zu.tiles.bench.example", i);
	else
		(void)snprintf(buf, n, "api%zu.svc.bench.example", i);
}

static double
now(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
		die("clock_gettime");
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void
query_text(size_t q, size_t nentries, char *buf, size_t n)
{
	size_t i = ((q * 2654435761u) >> 3) % nentries;

	switch (q % 8) {
	case 0:
	case 1:
	case 2: /* exact hit */
		i -= i % 4 == 3 ? 1 : 0;
		(void)snprintf(buf, n, "api%zu.svc.bench.example", i);
		break;
	case 3:
	case 4: /* deep suffix hit, when the set holds one */
		i = i - i % 4 + 3;
		(void)snprintf(buf, n, "a.b.c.d.zone%zu.tiles.bench.example",
		    i < nentries ? i : 3);
		break;
	case 5: /* near miss: no such exact name */
		(void)snprintf(buf, n, "api%zu.svc.bench.example",
		    nentries + i);
		break;
	case 6: /* miss at the apex of a suffix */
		(void)snprintf(buf, n, "zone%zu.tiles.bench.example",
		    i - i % 4 + 3);
		break;
	default: /* granted IP literal */
		(void)snprintf(buf, n, "198.51.99.1");
		break;
	}
}

struct bench_set {
	size_t nentries;
	struct policy_grant *hosts, *priv;
	struct policy_instance inst;
	struct policy_dest dests[NQUERIES];
	double ns[NROUNDS];
	size_t allowed;
};

static void
set_init(struct bench_set *b, size_t nentries)
{
	char text[POLICY_NAME_MAX + 1];
	struct policy_err err;
	size_t i, q;

	b->nentries = nentries;
	if ((b->hosts = policy_grant_new()) == NULL ||
	    (b->priv = policy_grant_new()) == NULL)
		die("out of memory");
	for (i = 0; i < nentries - 1; i++) {
		entry_text(i, text, sizeof(text));
		add(b->hosts, text);
	}
	add(b->hosts, "198.51.99.1");
	if (policy_grant_count(b->hosts) != nentries)
		die("entry count");
	add(b->priv, "api0.svc.bench.example");
	memset(&b->inst, 0, sizeof(b->inst));
	b->inst.name = "bench";
	b->inst.manifest_ok = 1;
	b->inst.permissions = POLICY_PERM_HTTP_CLIENT;
	b->inst.hosts = b->hosts;
	b->inst.declared = b->hosts; /* the intersection is looked up */
	b->inst.allow_private = b->priv;
	for (q = 0; q < NQUERIES; q++) {
		query_text(q, nentries - 1, text, sizeof(text));
		memset(&b->dests[q], 0, sizeof(b->dests[q]));
		if (policy_host_parse(text, strlen(text), &b->dests[q].host,
			&err) != 0)
			die(err.msg);
		b->dests[q].port = 443;
	}
}

/* Run one round of ndecisions decisions; return ns per decision. Never
 * inlined, so that callgrind --toggle-collect=set_round can count it. */
static __attribute__((noinline)) double
set_round(struct bench_set *b, size_t ndecisions,
    const struct policy_addr answers[2], const struct policy_addr *literal,
    const struct policy_classify_ctx *ctx)
{
	struct policy_verdict v;
	size_t i, allowed = 0;
	double t0, t1;

	t0 = now();
	for (i = 0; i < ndecisions; i++) {
		const struct policy_dest *d = &b->dests[i % NQUERIES];

		if (policy_check_destination(&b->inst, POLICY_TRANSPORT_HTTP,
			d, &v) != 0)
			die("check_destination");
		if (v.reason != POLICY_REASON_ALLOW)
			continue;
		if (policy_check_answers(&b->inst, d,
			v.need_resolve ? answers : literal,
			v.need_resolve ? 2 : 1, ctx, &v) != 0)
			die("check_answers");
		allowed += v.reason == POLICY_REASON_ALLOW;
	}
	t1 = now();
	b->allowed = allowed;
	return (t1 - t0) * 1e9 / (double)ndecisions;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static size_t
number(const char *s)
{
	char *end;
	unsigned long v;

	v = strtoul(s, &end, 10);
	if (*s == '\0' || *end != '\0' || v == 0 || v > 1000000000ul)
		die("usage: bench_policy [-n decisions] [-r rounds] "
		    "[-s entries]");
	return (size_t)v;
}

int
main(int argc, char **argv)
{
	static const size_t sizes[NSIZES] = { 10, 1000, 10000, 100000 };
	static struct bench_set sets[NSIZES];
	struct policy_addr answers[2], literal;
	struct policy_classify_ctx ctx;
	struct policy_nat64_list nat64;
	const char *nat64_items[] = { "2001:db8:64::/96" };
	struct policy_err err;
	size_t s, r, ndecisions = NDECISIONS, nrounds = NROUNDS, only = 0;
	int ch;

	while ((ch = getopt(argc, argv, "n:r:s:")) != -1) {
		switch (ch) {
		case 'n':
			ndecisions = number(optarg);
			break;
		case 'r':
			if ((nrounds = number(optarg)) > NROUNDS)
				die("at most 9 rounds");
			break;
		case 's':
			only = number(optarg);
			break;
		default:
			die("usage: bench_policy [-n decisions] [-r rounds] "
			    "[-s entries]");
		}
	}

	if (policy_addr_parse("8.8.8.8", &answers[0]) != 0 ||
	    policy_addr_parse("2606:4700::1111", &answers[1]) != 0 ||
	    policy_addr_parse("198.51.99.1", &literal) != 0)
		die("address");
	if (policy_nat64_parse_list(nat64_items, 1, &nat64, &err) != 0)
		die(err.msg);
	memset(&ctx, 0, sizeof(ctx));
	ctx.nat64 = &nat64;
	for (s = 0; s < NSIZES; s++)
		if (only == 0 || only == sizes[s])
			set_init(&sets[s], sizes[s]);

	/* Rounds interleave the sizes, so that noise from other load on the
	 * machine falls on all of them alike; the best round is reported
	 * with the median. */
	for (r = 0; r < nrounds; r++)
		for (s = 0; s < NSIZES; s++)
			if (sets[s].nentries != 0)
				sets[s].ns[r] = set_round(&sets[s], ndecisions,
				    answers, &literal, &ctx);

	printf("policy decisions: check_destination + check_answers "
	       "(%zu rounds of %zu)\n",
	    nrounds, ndecisions);
	printf("%10s %10s %10s %14s %9s\n", "entries", "best ns", "median ns",
	    "decisions/s", "allowed");
	for (s = 0; s < NSIZES; s++) {
		if (sets[s].nentries == 0)
			continue;
		qsort(sets[s].ns, nrounds, sizeof(double), cmp_double);
		printf("%10zu %10.0f %10.0f %14.0f %8.1f%%\n", sizes[s],
		    sets[s].ns[0], sets[s].ns[nrounds / 2],
		    1e9 / sets[s].ns[0],
		    100.0 * (double)sets[s].allowed / (double)ndecisions);
		policy_grant_free(sets[s].hosts);
		policy_grant_free(sets[s].priv);
	}
	return 0;
}
