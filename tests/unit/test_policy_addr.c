/* SPDX-License-Identifier: ISC */
/*
 * Unit tests for policy/addr.c: canonical address parsing and formatting,
 * and classification of every range of docs/policy.md at its first and
 * last address and just outside it, plus every embedded form (IPv4-mapped,
 * IPv4-compatible, NAT64 well-known, 6to4, Teredo server and client), the
 * 2001::/23 exceptions and this host's own addresses (loopback class,
 * whatever their range, unless reserved or metadata).
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy.h"

#define PUB POLICY_CLASS_PUBLIC
#define PRV POLICY_CLASS_PRIVATE
#define RSV POLICY_CLASS_RESERVED
#define MET POLICY_CLASS_METADATA
#define LPB POLICY_CLASS_LOOPBACK

struct cls_case {
	char addr[48];
	unsigned cls;
};

static struct cls_case v4_cases[] = {
	{ "0.0.0.0", RSV },
	{ "0.255.255.255", RSV },
	{ "1.0.0.0", PUB },
	{ "1.1.1.1", PUB },
	{ "8.8.8.8", PUB },
	{ "9.255.255.255", PUB },
	{ "10.0.0.0", PRV },
	{ "10.255.255.255", PRV },
	{ "11.0.0.0", PUB },
	{ "100.63.255.255", PUB },
	{ "100.64.0.0", PRV },
	{ "100.100.100.199", PRV },
	{ "100.100.100.200", MET },
	{ "100.100.100.201", PRV },
	{ "100.127.255.255", PRV },
	{ "100.128.0.0", PUB },
	{ "126.255.255.255", PUB },
	{ "127.0.0.0", LPB },
	{ "127.0.0.1", LPB },
	{ "127.255.255.255", LPB },
	{ "128.0.0.0", PUB },
	{ "168.63.129.15", PUB },
	{ "168.63.129.16", MET },
	{ "168.63.129.17", PUB },
	{ "169.253.255.255", PUB },
	{ "169.254.0.0", MET },
	{ "169.254.169.254", MET },
	{ "169.254.255.255", MET },
	{ "169.255.0.0", PUB },
	{ "172.15.255.255", PUB },
	{ "172.16.0.0", PRV },
	{ "172.31.255.255", PRV },
	{ "172.32.0.0", PUB },
	{ "191.255.255.255", PUB },
	{ "192.0.0.0", RSV },
	{ "192.0.0.255", RSV },
	{ "192.0.1.0", PUB },
	{ "192.0.1.255", PUB },
	{ "192.0.2.0", RSV },
	{ "192.0.2.255", RSV },
	{ "192.0.3.0", PUB },
	{ "192.88.98.255", PUB },
	{ "192.88.99.0", RSV },
	{ "192.88.99.255", RSV },
	{ "192.88.100.0", PUB },
	{ "192.167.255.255", PUB },
	{ "192.168.0.0", PRV },
	{ "192.168.255.255", PRV },
	{ "192.169.0.0", PUB },
	{ "198.17.255.255", PUB },
	{ "198.18.0.0", RSV },
	{ "198.19.255.255", RSV },
	{ "198.20.0.0", PUB },
	{ "198.51.99.255", PUB },
	{ "198.51.100.0", RSV },
	{ "198.51.100.255", RSV },
	{ "198.51.101.0", PUB },
	{ "203.0.112.255", PUB },
	{ "203.0.113.0", RSV },
	{ "203.0.113.255", RSV },
	{ "203.0.114.0", PUB },
	{ "223.255.255.255", PUB },
	{ "224.0.0.0", RSV },
	{ "239.255.255.255", RSV },
	{ "240.0.0.0", RSV },
	{ "255.255.255.254", RSV },
	{ "255.255.255.255", RSV },
};

static struct cls_case v6_cases[] = {
	/* Unspecified, loopback, IPv4-compatible ::/96. */
	{ "::", RSV },
	{ "::1", LPB },
	{ "::2", RSV },
	{ "::8.8.8.8", RSV },
	{ "::10.0.0.1", RSV },
	{ "::169.254.0.0", MET },
	{ "::169.254.169.254", MET },
	{ "::169.254.255.255", MET },
	{ "::100.100.100.200", MET },
	{ "::168.63.129.16", MET },
	{ "::255.255.255.255", RSV },
	/* IPv4-mapped ::ffff:0:0/96: exactly the IPv4 class. */
	{ "::ffff:0.0.0.0", RSV },
	{ "::ffff:8.8.8.8", PUB },
	{ "::ffff:10.0.0.1", PRV },
	{ "::ffff:127.0.0.1", LPB },
	{ "::ffff:127.255.255.255", LPB },
	{ "::ffff:169.254.169.254", MET },
	{ "::ffff:100.100.100.200", MET },
	{ "::ffff:168.63.129.16", MET },
	{ "::ffff:192.0.2.1", RSV },
	{ "::ffff:255.255.255.255", RSV },
	/* Around them, outside 2000::/3. */
	{ "::1:0:0:0", RSV },
	{ "::fffe:ffff:ffff", RSV },
	{ "::ffff:0:102:304", RSV },
	{ "::1:0:0", RSV },
	/* NAT64 well-known 64:ff9b::/96: the embedded address decides. */
	{ "64:ff9b::", RSV },
	{ "64:ff9b::808:808", PUB },
	{ "64:ff9b::a00:1", PRV },
	{ "64:ff9b::7f00:1", LPB },
	{ "64:ff9b::a9fe:a9fe", MET },
	{ "64:ff9b::6464:64c8", MET },
	{ "64:ff9b::a83f:8110", MET },
	{ "64:ff9b::c000:201", RSV },
	{ "64:ff9b::ffff:ffff", RSV },
	{ "64:ff9a:ffff:ffff:ffff:ffff:ffff:ffff", RSV },
	{ "64:ff9b::1:0:0", RSV },
	{ "64:ff9b:0:1::", RSV },
	/* Local-use NAT64 64:ff9b:1::/48, not declared. */
	{ "64:ff9b:1::", RSV },
	{ "64:ff9b:1::808:808", RSV },
	{ "64:ff9b:1:ffff:ffff:ffff:ffff:ffff", RSV },
	/* Discard 100::/64, 5f00::/16. */
	{ "100::", RSV },
	{ "100::ffff:ffff:ffff:ffff", RSV },
	{ "100:0:0:1::", RSV },
	{ "5f00::", RSV },
	{ "5f00:ffff:ffff:ffff:ffff:ffff:ffff:ffff", RSV },
	/* ULA, link-local, site-local, multicast and the gaps. */
	{ "fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", RSV },
	{ "fc00::", PRV },
	{ "fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", PRV },
	{ "fe00::", RSV },
	{ "fe7f:ffff:ffff:ffff:ffff:ffff:ffff:ffff", RSV },
	{ "fe80::", PRV },
	{ "fe80::1", PRV },
	{ "febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff", PRV },
	{ "fec0::", PRV },
	{ "feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", PRV },
	{ "ff00::", RSV },
	{ "ff02::1", RSV },
	{ "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", RSV },
	/* Metadata inside fc00::/7. */
	{ "fd00:ec1:ffff:ffff:ffff:ffff:ffff:ffff", PRV },
	{ "fd00:ec2::", MET },
	{ "fd00:ec2::254", MET },
	{ "fd00:ec2::ffff:ffff:ffff:ffff", MET },
	{ "fd00:ec2:0:1::", PRV },
	{ "fd20:ce::253", PRV },
	{ "fd20:ce::254", MET },
	{ "fd20:ce::255", PRV },
	/* 2000::/3 edges. */
	{ "1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", RSV },
	{ "2000::", PUB },
	{ "2000:ffff:ffff:ffff:ffff:ffff:ffff:ffff", PUB },
	{ "2606:4700::1111", PUB },
	{ "3ffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff", PUB },
	{ "3fff::", RSV },
	{ "3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff", RSV },
	{ "3fff:1000::", PUB },
	{ "3fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", PUB },
	{ "4000::", RSV },
	/* Documentation 2001:db8::/32. */
	{ "2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", PUB },
	{ "2001:db8::", RSV },
	{ "2001:db8::1", RSV },
	{ "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", RSV },
	{ "2001:db9::", PUB },
	/* 2001::/23 and its globally reachable exceptions. */
	{ "2001:1::", RSV },
	{ "2001:1::1", PUB },
	{ "2001:1::2", PUB },
	{ "2001:1::3", PUB },
	{ "2001:1::4", RSV },
	{ "2001:2::", RSV },
	{ "2001:2:ffff:ffff:ffff:ffff:ffff:ffff", RSV },
	{ "2001:3::", PUB },
	{ "2001:3:ffff:ffff:ffff:ffff:ffff:ffff", PUB },
	{ "2001:4::", RSV },
	{ "2001:4:111:ffff:ffff:ffff:ffff:ffff", RSV },
	{ "2001:4:112::", PUB },
	{ "2001:4:112:ffff:ffff:ffff:ffff:ffff", PUB },
	{ "2001:4:113::", RSV },
	{ "2001:1f:ffff:ffff:ffff:ffff:ffff:ffff", RSV },
	{ "2001:20::", PUB },
	{ "2001:3f:ffff:ffff:ffff:ffff:ffff:ffff", PUB },
	{ "2001:40::", RSV },
	{ "2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff", RSV },
	{ "2001:200::", PUB },
	/* Teredo 2001::/32: server bits 32-63, client inverted 96-127. */
	{ "2001::", RSV },
	{ "2001:0:808:808::f7f7:f7f7", RSV },
	{ "2001:0:ffff:ffff:ffff:ffff:ffff:ffff", RSV },
	{ "2001:0:a9fe:a9fe::", MET },
	{ "2001:0:a9fe:0:8000:ffff::", MET },
	{ "2001:0:6464:64c8::", MET },
	{ "2001:0:a83f:8110::", MET },
	{ "2001:0:4136:e378:8000:63bf:5601:5601", MET },
	{ "2001::5601:ffff", MET },
	{ "2001::9b9b:9b37", MET },
	{ "2001::57c0:7eef", MET },
	{ "2001::57c0:7eee", RSV },
	{ "2001::5601:5600", MET },
	{ "2001::5602:0", RSV },
	{ "2001::5601:5601", MET }, /* the example of docs/policy.md */
	/* 6to4 2002::/16: embedded bits 16-47. */
	{ "2001:ffff:ffff:ffff:ffff:ffff:ffff:ffff", PUB },
	{ "2002::", RSV },
	{ "2002:808:808::", RSV },
	{ "2002:a00:1::", RSV },
	{ "2002:a9fe::", MET },
	{ "2002:a9fe:a9fe::", MET },
	{ "2002:a9fe:a9fe:ffff:ffff:ffff:ffff:ffff", MET },
	{ "2002:a9fe:ffff::", MET },
	{ "2002:a9ff::", RSV },
	{ "2002:6464:64c8::", MET },
	{ "2002:a83f:8110::1", MET },
	{ "2002:ffff:ffff:ffff:ffff:ffff:ffff:ffff", RSV },
	{ "2003::", PUB },
};

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

static struct policy_addr
must_parse(const char *s)
{
	struct policy_addr a;

	memset(&a, 0, sizeof(a));
	cr_assert_eq(policy_addr_parse(s, &a), 0, "'%s' does not parse", s);
	return a;
}

ParameterizedTestParameters(addr, classify_v4)
{
	return cr_make_param_array(struct cls_case, v4_cases, NELEM(v4_cases));
}

ParameterizedTest(struct cls_case *c, addr, classify_v4)
{
	struct policy_addr a = must_parse(c->addr);

	cr_assert_eq(a.family, 4);
	cr_expect_eq(policy_addr_classify(NULL, &a), c->cls,
	    "%s: class %#x, want %#x", c->addr, policy_addr_classify(NULL, &a),
	    c->cls);
}

ParameterizedTestParameters(addr, classify_v6)
{
	return cr_make_param_array(struct cls_case, v6_cases, NELEM(v6_cases));
}

ParameterizedTest(struct cls_case *c, addr, classify_v6)
{
	struct policy_classify_ctx ctx;
	struct policy_nat64_list empty;
	struct policy_addr a = must_parse(c->addr);

	cr_assert_eq(a.family, 6);
	cr_expect_eq(policy_addr_classify(NULL, &a), c->cls,
	    "%s: class %#x, want %#x", c->addr, policy_addr_classify(NULL, &a),
	    c->cls);
	/* An empty context is the same as none. */
	memset(&ctx, 0, sizeof(ctx));
	memset(&empty, 0, sizeof(empty));
	ctx.nat64 = &empty;
	cr_expect_eq(policy_addr_classify(&ctx, &a), c->cls, "%s", c->addr);
}

/* Every IPv4 case, IPv4-mapped, is classified exactly as the IPv4. */
Test(addr, mapped_equals_v4)
{
	size_t i;

	for (i = 0; i < NELEM(v4_cases); i++) {
		struct policy_addr a = must_parse(v4_cases[i].addr), m;

		memset(&m, 0, sizeof(m));
		m.family = 6;
		m.bytes[10] = 0xff;
		m.bytes[11] = 0xff;
		memcpy(m.bytes + 12, a.bytes, 4);
		cr_expect_eq(policy_addr_classify(NULL, &m), v4_cases[i].cls,
		    "::ffff:%s", v4_cases[i].addr);
	}
}

/* Every IPv4 case behind the well-known NAT64 prefix keeps its class. */
Test(addr, nat64_well_known_equals_v4)
{
	size_t i;

	for (i = 0; i < NELEM(v4_cases); i++) {
		struct policy_addr a = must_parse(v4_cases[i].addr), m;

		memset(&m, 0, sizeof(m));
		m.family = 6;
		m.bytes[1] = 0x64;
		m.bytes[2] = 0xff;
		m.bytes[3] = 0x9b;
		memcpy(m.bytes + 12, a.bytes, 4);
		cr_expect_eq(policy_addr_classify(NULL, &m), v4_cases[i].cls,
		    "64:ff9b::%s", v4_cases[i].addr);
	}
}

/* Compatible, 6to4 and Teredo (both halves) carry metadata when the
 * embedded IPv4 is metadata, and are reserved otherwise. */
Test(addr, embedded_forms)
{
	size_t i, j;

	for (i = 0; i < NELEM(v4_cases); i++) {
		struct policy_addr a = must_parse(v4_cases[i].addr), e;
		unsigned want = v4_cases[i].cls == MET ? MET : RSV;

		memset(&e, 0, sizeof(e));
		e.family = 6;
		memcpy(e.bytes + 12, a.bytes, 4);
		/* ::0.0.0.0 and ::0.0.0.1 are :: and ::1, tested apart. */
		if (!(a.bytes[0] == 0 && a.bytes[1] == 0 && a.bytes[2] == 0 &&
			a.bytes[3] <= 1))
			cr_expect_eq(policy_addr_classify(NULL, &e), want,
			    "::%s", v4_cases[i].addr);

		memset(&e, 0, sizeof(e));
		e.family = 6;
		e.bytes[0] = 0x20;
		e.bytes[1] = 0x02;
		memcpy(e.bytes + 2, a.bytes, 4);
		cr_expect_eq(policy_addr_classify(NULL, &e), want,
		    "2002:%s::", v4_cases[i].addr);

		memset(&e, 0, sizeof(e));
		e.family = 6;
		e.bytes[0] = 0x20;
		e.bytes[1] = 0x01;
		memcpy(e.bytes + 4, a.bytes, 4);
		cr_expect_eq(policy_addr_classify(NULL, &e), want,
		    "Teredo server %s", v4_cases[i].addr);

		memset(&e, 0, sizeof(e));
		e.family = 6;
		e.bytes[0] = 0x20;
		e.bytes[1] = 0x01;
		for (j = 0; j < 4; j++)
			e.bytes[12 + j] = (uint8_t)~a.bytes[j];
		cr_expect_eq(policy_addr_classify(NULL, &e), want,
		    "Teredo client %s", v4_cases[i].addr);
		/* Not inverted, the client bits are not read as metadata
		 * (no case here inverts into a metadata address). */
		memcpy(e.bytes + 12, a.bytes, 4);
		cr_expect_eq(policy_addr_classify(NULL, &e), RSV,
		    "Teredo client %s not inverted", v4_cases[i].addr);
	}
}

struct local_case {
	char addr[48];
	unsigned cls;
};

static struct local_case local_cases[] = {
	{ "8.8.4.4", LPB }, /* public and local: loopback */
	{ "8.8.8.8", PUB },
	{ "::ffff:8.8.4.4", LPB },
	{ "64:ff9b::808:404", LPB }, /* translates to a local address */
	{ "1.0.0.1", LPB },	     /* listed in IPv4-mapped form */
	{ "2606:4700::1111", LPB },
	{ "2606:4700::1112", PUB },
	{ "192.0.2.1", RSV },	/* reserved stays reserved */
	{ "169.254.1.1", MET }, /* metadata stays metadata */
	{ "10.0.0.1", LPB },	/* private and local: loopback */
	{ "10.0.0.2", PRV },
	{ "fd00::5", LPB },
	{ "fd00::6", PRV },
	{ "::ffff:10.0.0.1", LPB },
	{ "127.0.0.2", LPB },
};

ParameterizedTestParameters(addr, local)
{
	return cr_make_param_array(struct local_case, local_cases,
	    NELEM(local_cases));
}

ParameterizedTest(struct local_case *c, addr, local)
{
	static const char *const locals[] = {
		"8.8.4.4",
		"2606:4700::1111",
		"10.0.0.1",
		"192.0.2.1",
		"169.254.1.1",
		"::ffff:1.0.0.1",
		"fd00::5",
	};
	struct policy_addr l[NELEM(locals)], a = must_parse(c->addr);
	struct policy_classify_ctx ctx;
	size_t i;

	for (i = 0; i < NELEM(locals); i++)
		l[i] = must_parse(locals[i]);
	memset(&ctx, 0, sizeof(ctx));
	ctx.local = l;
	ctx.nlocal = NELEM(locals);
	cr_expect_eq(policy_addr_classify(&ctx, &a), c->cls, "%s: %#x",
	    c->addr, policy_addr_classify(&ctx, &a));
	/* nlocal 0 ignores the array. */
	ctx.nlocal = 0;
	cr_expect_eq(policy_addr_classify(&ctx, &a),
	    policy_addr_classify(NULL, &a), "%s", c->addr);
}

/*
 * Prefixes this host delivers locally (a prefix on lo, an AnyIP route:
 * `ip route add local 9.9.9.0/24 dev lo`) are in the loopback class, not
 * only the interface addresses: an answer of 9.9.9.9 reached a listener
 * on the broker host while only interface addresses counted.
 */
struct net_case {
	char addr[48];
	unsigned cls;
};

static struct net_case net_cases[] = {
	{ "9.9.9.9", LPB }, { "9.9.9.0", LPB }, { "9.9.9.255", LPB },
	{ "9.9.8.255", PUB }, { "9.9.10.0", PUB }, { "172.31.5.77", LPB },
	{ "172.31.6.1", PRV }, { "::ffff:9.9.9.9", LPB },
	{ "2a00:1450::77", LPB }, { "2a00:1450::ffff:ffff:ffff:ffff", LPB },
	{ "2a00:1450:0:1::1", PUB }, { "1.2.3.4", LPB }, /* 1.2.3.4/32 */
	{ "1.2.3.5", PUB }, { "8.15.0.1", LPB },	 /* 8.8.0.0/13 */
	{ "8.16.0.1", PUB }, { "8.7.255.255", PUB },
	{ "2606:4700::1", LPB }, /* 2606:4700::/33 */
	{ "2606:4700:8000::1", PUB },
	{ "198.51.100.7", RSV }, /* reserved stays reserved */
	{ "169.254.169.254", MET },
	{ "64:ff9b::909:909", LPB }, /* NAT64 to 9.9.9.9 */
};

ParameterizedTestParameters(addr, local_route)
{
	return cr_make_param_array(struct net_case, net_cases,
	    NELEM(net_cases));
}

static struct policy_net
must_net(const char *text, unsigned len)
{
	struct policy_net n;

	memset(&n, 0, sizeof(n));
	n.addr = must_parse(text);
	n.len = len;
	return n;
}

ParameterizedTest(struct net_case *c, addr, local_route)
{
	struct policy_net nets[] = {
		must_net("9.9.9.0", 24), must_net("172.31.5.0", 24),
		must_net("1.2.3.4", 32), must_net("8.8.0.0", 13),
		must_net("198.51.100.0", 24), must_net("169.254.0.0", 16),
		must_net("2a00:1450::", 64), must_net("2606:4700::", 33),
		must_net("::", 129), /* beyond IPv6: ignored */
	};
	struct policy_addr a = must_parse(c->addr);
	struct policy_classify_ctx ctx;

	qsort(nets, NELEM(nets), sizeof(nets[0]), policy_net_cmp);
	memset(&ctx, 0, sizeof(ctx));
	ctx.nets = nets;
	ctx.nnets = NELEM(nets);
	cr_expect_eq(policy_addr_classify(&ctx, &a), c->cls, "%s: %#x",
	    c->addr, policy_addr_classify(&ctx, &a));
	/* nnets 0 ignores the array. */
	ctx.nnets = 0;
	cr_expect_eq(policy_addr_classify(&ctx, &a),
	    policy_addr_classify(NULL, &a), "%s", c->addr);
}

/* The search over nets agrees with a plain scan, for random IPv4 nets of
 * every length and random addresses (a fixed seed: the same every run). */
static uint32_t
lcg(uint32_t *st)
{
	*st = *st * 1103515245u + 12345u;
	return *st;
}

static int
v4_in_net(const struct policy_net *n, uint32_t a)
{
	uint32_t net = ((uint32_t)n->addr.bytes[0] << 24) |
	    ((uint32_t)n->addr.bytes[1] << 16) |
	    ((uint32_t)n->addr.bytes[2] << 8) | n->addr.bytes[3];
	uint32_t mask = n->len == 0 ? 0 : ~(uint32_t)0 << (32 - n->len);

	return (a & mask) == net;
}

Test(addr, local_route_search_matches_scan)
{
	static struct policy_net nets[400];
	struct policy_classify_ctx ctx;
	struct policy_addr a;
	uint32_t st = 7, w, mask;
	size_t n = 0, i, j, k, nin = 0;
	unsigned base, want;
	int in;

	for (i = 0; i < 400; i++) {
		memset(&nets[n], 0, sizeof(nets[n]));
		nets[n].addr.family = 4;
		nets[n].len = 16 + lcg(&st) % 17; /* 16 to 32 */
		mask = ~(uint32_t)0 << (32 - nets[n].len);
		/* Clustered, so that addresses fall inside some of them. */
		w = ((lcg(&st) >> 8) & 0x00ffffffu) | (9u << 24);
		w &= mask;
		for (k = 0; k < 4; k++)
			nets[n].addr.bytes[k] = (uint8_t)(w >> (24 - 8 * k));
		n++;
	}
	qsort(nets, n, sizeof(nets[0]), policy_net_cmp);
	for (i = 1, j = 1; i < n; i++)
		if (policy_net_cmp(&nets[i], &nets[j - 1]) != 0)
			nets[j++] = nets[i];
	n = j;
	memset(&ctx, 0, sizeof(ctx));
	ctx.nets = nets;
	ctx.nnets = n;
	for (i = 0; i < 20000; i++) {
		w = ((lcg(&st) >> 8) & 0x00ffffffu) | (9u << 24);
		memset(&a, 0, sizeof(a));
		a.family = 4;
		for (k = 0; k < 4; k++)
			a.bytes[k] = (uint8_t)(w >> (24 - 8 * k));
		for (k = 0, in = 0; k < n && !in; k++)
			in = v4_in_net(&nets[k], w);
		nin += (size_t)in;
		base = policy_addr_classify(NULL, &a);
		want = in && (base == PUB || base == PRV) ? LPB : base;
		cr_assert_eq(policy_addr_classify(&ctx, &a), want,
		    "9.x address %u.%u.%u.%u: inside %d", a.bytes[0],
		    a.bytes[1], a.bytes[2], a.bytes[3], in);
	}
	cr_assert(nin > 1000 && nin < 19000, "%zu of 20000 inside", nin);
}

/* A catch-all local route (0.0.0.0/0, ::/0) puts every address there. */
Test(addr, local_route_default)
{
	struct policy_net nets[2];
	struct policy_addr a = must_parse("8.8.8.8"),
			   b = must_parse("2606::1");
	struct policy_classify_ctx ctx;

	memset(nets, 0, sizeof(nets));
	nets[0].addr.family = 4;
	nets[1].addr.family = 6;
	memset(&ctx, 0, sizeof(ctx));
	ctx.nets = nets;
	ctx.nnets = 2;
	cr_expect_eq(policy_addr_classify(&ctx, &a), LPB);
	cr_expect_eq(policy_addr_classify(&ctx, &b), LPB);
}

Test(addr, classify_fails_closed)
{
	struct policy_addr a;

	cr_expect_eq(policy_addr_classify(NULL, NULL), RSV);
	memset(&a, 0, sizeof(a));
	a.bytes[0] = 8;
	cr_expect_eq(policy_addr_classify(NULL, &a), RSV); /* family 0 */
	a.family = 5;
	cr_expect_eq(policy_addr_classify(NULL, &a), RSV);
}

struct parse_case {
	char text[64];
	int ok;
	int family;
};

static struct parse_case parse_cases[] = {
	{ "0.0.0.0", 1, 4 },
	{ "255.255.255.255", 1, 4 },
	{ "100.64.9.199", 1, 4 },
	{ "8.80.208.250", 1, 4 },
	{ "10.0.0.1", 1, 4 },
	{ "::", 1, 6 },
	{ "::1", 1, 6 },
	{ "2001:db8::1", 1, 6 },
	{ "::ffff:10.0.0.1", 1, 6 },
	{ "64:ff9b::a00:1", 1, 6 },
	{ "fe80::1", 1, 6 },
	{ "::169.254.169.254", 1, 6 },
	{ "2001:db8::1:0:0:1", 1, 6 },
	{ "", 0, 0 },
	{ "127.1", 0, 0 },
	{ "010.0.0.1", 0, 0 },
	{ "0x7f.0.0.1", 0, 0 },
	{ "2130706433", 0, 0 },
	{ "1.2.3", 0, 0 },
	{ "1.2.3.4.", 0, 0 },
	{ "256.0.0.1", 0, 0 },
	{ " 1.2.3.4", 0, 0 },
	{ "1.2.3.4 ", 0, 0 },
	{ "1.2.3.04", 0, 0 },
	{ "2001:0db8::1", 0, 0 },
	{ "2001:DB8::1", 0, 0 },
	{ "::FFFF:10.0.0.1", 0, 0 },
	{ "::ffff:a00:1", 0, 0 },
	{ "0:0::1", 0, 0 },
	{ "[::1]", 0, 0 },
	{ "fe80::1%eth0", 0, 0 },
	{ "2001:db8:0:0:1:0:0:1", 0, 0 },
	{ "64:ff9b::10.0.0.1", 0, 0 },
	{ "::0.0.0.2", 0, 0 },
	{ "1::2::3", 0, 0 },
	{ "example.com", 0, 0 },
	{ "0000:0000:0000:0000:0000:0000:0000:0000:00", 0, 0 },
};

ParameterizedTestParameters(addr, parse)
{
	return cr_make_param_array(struct parse_case, parse_cases,
	    NELEM(parse_cases));
}

ParameterizedTest(struct parse_case *c, addr, parse)
{
	struct policy_addr a, sentinel;
	char buf[64];
	int rc;

	memset(&a, 0xa5, sizeof(a));
	sentinel = a;
	rc = policy_addr_parse(c->text, &a);
	if (!c->ok) {
		cr_expect_eq(rc, EGRESS_ERR_INVALID, "'%s' parsed", c->text);
		cr_expect_eq(memcmp(&a, &sentinel, sizeof(a)), 0,
		    "'%s': output written on failure", c->text);
		return;
	}
	cr_assert_eq(rc, 0, "'%s' rejected", c->text);
	cr_expect_eq(a.family, c->family);
	cr_assert_eq(policy_addr_format(&a, buf, sizeof(buf)), 0);
	cr_expect_str_eq(buf, c->text);
	/* Exactly long enough, then one byte short. */
	cr_expect_eq(policy_addr_format(&a, buf, strlen(c->text) + 1), 0);
	cr_expect_eq(policy_addr_format(&a, buf, strlen(c->text)),
	    EGRESS_ERR_TOO_BIG);
}

Test(addr, bad_arguments)
{
	struct policy_addr a;
	char buf[64];

	cr_expect_eq(policy_addr_parse(NULL, &a), EGRESS_ERR_INVALID);
	cr_expect_eq(policy_addr_parse("1.2.3.4", NULL), EGRESS_ERR_INVALID);
	memset(&a, 0, sizeof(a));
	a.family = 5;
	cr_expect_eq(policy_addr_format(&a, buf, sizeof(buf)),
	    EGRESS_ERR_INVALID);
	cr_expect_eq(policy_addr_format(NULL, buf, sizeof(buf)),
	    EGRESS_ERR_INVALID);
	a.family = 4;
	cr_expect_eq(policy_addr_format(&a, NULL, 0), EGRESS_ERR_INVALID);
}
