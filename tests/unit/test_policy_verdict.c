/* SPDX-License-Identifier: ISC */
/*
 * Unit tests for policy/verdict.c: every step of the verdict in order
 * (first failure wins), the intersection of grant and declaration and
 * operator_defined, the private and loopback carve-outs (neither re-opens
 * the other's class), mixed zones, NAT64 and local
 * addresses through the verdict, deduplication in resolver order, the
 * reason strings and the argument errors. Instances are built directly
 * from grant sets whose entries come from policy_entry_parse().
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <string.h>

#include "policy/policy.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* Public suffixes known to the fake check. */
static int
fake_psl(void *ctx, const char *domain)
{
	static const char *const suffixes[] = {
		"com",
		"net",
		"org",
		"uk",
		"co.uk",
		"arpa",
		"local",
	};
	size_t i;

	(void)ctx;
	for (i = 0; i < NELEM(suffixes); i++)
		if (strcmp(domain, suffixes[i]) == 0)
			return 1;
	return 0;
}

static struct policy_grant *
grant_of(const char *const *v, size_t n)
{
	struct policy_grant *g;
	struct policy_entry e;
	struct policy_err err;
	size_t i;

	cr_assert_not_null(g = policy_grant_new());
	for (i = 0; i < n; i++) {
		cr_assert_eq(policy_entry_parse(v[i], strlen(v[i]), fake_psl,
				 NULL, &e, &err),
		    0, "entry '%s': %s", v[i], err.msg);
		cr_assert_eq(policy_grant_add(g, &e), 0);
	}
	return g;
}

static const char *const std_hosts[] = {
	"api.example.com",
	"*.tiles.example.com",
	"notdeclared.example.com",
	"lan.example.com",
	"mixed.example.com",
	"db.internal",
	"localhost",
	"printer.local",
	"10.0.0.5",
	"8.8.8.8",
	"::1",
	"192.0.2.1",
	"169.254.169.254",
	"lo.example.com",
	"both.example.com",
	"router.internal",
	"127.0.0.1",
};
static const char *const std_declared[] = {
	"api.example.com",
	"*.tiles.example.com",
	"lan.example.com",
	"mixed.example.com",
	"db.internal",
	"localhost",
	"printer.local",
	"10.0.0.5",
	"8.8.8.8",
	"::1",
	"192.0.2.1",
	"169.254.169.254",
	"notgranted.example.com",
	"x.localhost",
	"lo.example.com",
	"both.example.com",
	"router.internal",
	"127.0.0.1",
};
static const char *const std_private[] = {
	"lan.example.com",
	"mixed.example.com",
	"db.internal",
	"localhost",
	"10.0.0.5",
	"::1",
	"169.254.169.254",
	"both.example.com",
};
static const char *const std_loopback[] = {
	"lo.example.com",
	"both.example.com",
	"router.internal",
	"localhost",
	"127.0.0.1",
	"169.254.169.254",
};

enum inst_kind {
	I_STD = 1,   /* the instance above */
	I_NULL,	     /* no entry */
	I_REFUSED,   /* manifest refused */
	I_OPDEF,     /* operator_defined = true */
	I_NODECL,    /* neither hosts nor operator_defined (NULL set) */
	I_EMPTYDECL, /* same, as an empty set */
	I_NOPERM,    /* no permissions */
	I_NOLOOP,    /* no egress_allow_loopback (NULL set) */
};

enum ctx_kind {
	C_NONE = 0,
	C_NAT64, /* 2001:db8::/32 and 2001:db8:a00::/40 declared */
	C_LOCAL, /* 8.8.4.4 is this host's own address */
};

struct fixture {
	struct policy_instance inst;
	struct policy_grant *hosts, *declared, *priv, *loop, *empty;
	struct policy_nat64_list nat64;
	struct policy_addr local[1];
	struct policy_classify_ctx ctx;
};

static const struct policy_instance *
fixture_init(struct fixture *f, enum inst_kind ik, enum ctx_kind ck)
{
	const char *nat64[] = { "2001:db8::/32", "2001:db8:a00::/40" };
	struct policy_err err;

	memset(f, 0, sizeof(*f));
	f->hosts = grant_of(std_hosts, NELEM(std_hosts));
	f->declared = grant_of(std_declared, NELEM(std_declared));
	f->priv = grant_of(std_private, NELEM(std_private));
	f->loop = grant_of(std_loopback, NELEM(std_loopback));
	f->empty = grant_of(NULL, 0);
	f->inst.name = "weather";
	f->inst.manifest_ok = 1;
	f->inst.permissions = POLICY_PERM_HTTP_CLIENT |
	    POLICY_PERM_SOCKET_CLIENT;
	f->inst.hosts = f->hosts;
	f->inst.allow_private = f->priv;
	f->inst.allow_loopback = f->loop;
	f->inst.declared = f->declared;
	switch (ik) {
	case I_REFUSED:
		f->inst.manifest_ok = 0;
		break;
	case I_OPDEF:
		f->inst.operator_defined = 1;
		break;
	case I_NODECL:
		f->inst.declared = NULL;
		break;
	case I_EMPTYDECL:
		f->inst.declared = f->empty;
		break;
	case I_NOPERM:
		f->inst.permissions = 0;
		break;
	case I_NOLOOP:
		f->inst.allow_loopback = NULL;
		break;
	default:
		break;
	}
	if (ck == C_NAT64)
		cr_assert_eq(policy_nat64_parse_list(nat64, NELEM(nat64),
				 &f->nat64, &err),
		    0, "%s", err.msg);
	f->ctx.nat64 = &f->nat64;
	if (ck == C_LOCAL) {
		cr_assert_eq(policy_addr_parse("8.8.4.4", &f->local[0]), 0);
		f->ctx.local = f->local;
		f->ctx.nlocal = 1;
	}
	return ik == I_NULL ? NULL : &f->inst;
}

static void
fixture_done(struct fixture *f)
{
	policy_grant_free(f->hosts);
	policy_grant_free(f->declared);
	policy_grant_free(f->priv);
	policy_grant_free(f->loop);
	policy_grant_free(f->empty);
}

/* Parse "a,b,c" into answers; return the count. */
static size_t
answers_of(const char *text, struct policy_addr *v, size_t max)
{
	char buf[512], *p, *save = NULL;
	size_t n = 0;

	(void)snprintf(buf, sizeof(buf), "%s", text);
	for (p = strtok_r(buf, ",", &save); p != NULL;
	     p = strtok_r(NULL, ",", &save)) {
		cr_assert_lt(n, max);
		cr_assert_eq(policy_addr_parse(p, &v[n]), 0, "answer '%s'", p);
		n++;
	}
	return n;
}

static void
dest_of(const char *host, struct policy_dest *d)
{
	struct policy_err err;

	memset(d, 0, sizeof(*d));
	cr_assert_eq(policy_host_parse(host, strlen(host), &d->host, &err), 0,
	    "host '%s': %s", host, err.msg);
	d->port = 443;
}

#define H	       POLICY_TRANSPORT_HTTP
#define W	       POLICY_TRANSPORT_WEBSOCKET
#define T	       POLICY_TRANSPORT_TCP
#define S	       POLICY_TRANSPORT_TLS

#define R_ALLOW	       POLICY_REASON_ALLOW
#define R_UNKNOWN      POLICY_REASON_UNKNOWN_INSTANCE
#define R_REFUSED      POLICY_REASON_MANIFEST_REFUSED
#define R_NOPERM       POLICY_REASON_NO_PERMISSION
#define R_NOTGRANTED   POLICY_REASON_NOT_GRANTED
#define R_NOTDECLARED  POLICY_REASON_NOT_DECLARED
#define R_PRIVATE      POLICY_REASON_PRIVATE_ADDRESS
#define R_UNRESOLVABLE POLICY_REASON_UNRESOLVABLE
#define R_METADATA     POLICY_REASON_METADATA
#define R_RESERVED     POLICY_REASON_RESERVED_ADDRESS
#define R_MIXED	       POLICY_REASON_MIXED_ZONES
#define R_LOOPBACK     POLICY_REASON_LOOPBACK_ADDRESS

struct vcase {
	int inst;
	int ctx;
	int transport;
	char host[64];
	int dest_reason;   /* from policy_check_destination */
	char answers[256]; /* comma-separated, for a destination allow */
	int reason;	   /* final */
	char addrs[256];   /* validated, on allow */
};

static struct vcase vcases[] = {
	/* 2: no entry. */
	{ I_NULL, C_NONE, H, "api.example.com", R_UNKNOWN, "", R_UNKNOWN, "" },
	/* 2b before 3: a refused manifest, even for a missing permission. */
	{ I_REFUSED, C_NONE, W, "other.example.com", R_REFUSED, "", R_REFUSED,
	    "" },
	{ I_REFUSED, C_NONE, H, "api.example.com", R_REFUSED, "", R_REFUSED,
	    "" },
	/* 3 before 4. */
	{ I_NOPERM, C_NONE, H, "api.example.com", R_NOPERM, "", R_NOPERM, "" },
	{ I_STD, C_NONE, W, "other.example.com", R_NOPERM, "", R_NOPERM, "" },
	{ I_STD, C_NONE, W, "api.example.com", R_NOPERM, "", R_NOPERM, "" },
	/* 4: not granted; a declaration grants nothing. */
	{ I_STD, C_NONE, T, "other.example.com", R_NOTGRANTED, "",
	    R_NOTGRANTED, "" },
	{ I_STD, C_NONE, S, "notgranted.example.com", R_NOTGRANTED, "",
	    R_NOTGRANTED, "" },
	{ I_STD, C_NONE, H, "tiles.example.com", R_NOTGRANTED, "",
	    R_NOTGRANTED, "" },
	{ I_STD, C_NONE, H, "10.0.0.6", R_NOTGRANTED, "", R_NOTGRANTED, "" },
	{ I_STD, C_NONE, H, "[::ffff:8.8.8.8]", R_NOTGRANTED, "", R_NOTGRANTED,
	    "" },
	/* 4 before 6: a local name that is not granted. */
	{ I_STD, C_NONE, H, "x.localhost", R_NOTGRANTED, "", R_NOTGRANTED,
	    "" },
	/* 5: the intersection, operator_defined, no declaration. */
	{ I_STD, C_NONE, H, "notdeclared.example.com", R_NOTDECLARED, "",
	    R_NOTDECLARED, "" },
	{ I_OPDEF, C_NONE, H, "notdeclared.example.com", R_ALLOW, "8.8.8.8",
	    R_ALLOW, "8.8.8.8" },
	{ I_NODECL, C_NONE, H, "api.example.com", R_NOTDECLARED, "",
	    R_NOTDECLARED, "" },
	{ I_EMPTYDECL, C_NONE, H, "api.example.com", R_NOTDECLARED, "",
	    R_NOTDECLARED, "" },
	{ I_NODECL, C_NONE, H, "8.8.8.8", R_NOTDECLARED, "", R_NOTDECLARED,
	    "" },
	/* 6: local by nature, before resolution, unless carved out. */
	{ I_STD, C_NONE, H, "printer.local", R_PRIVATE, "", R_PRIVATE, "" },
	{ I_OPDEF, C_NONE, H, "printer.local", R_PRIVATE, "", R_PRIVATE, "" },
	{ I_STD, C_NONE, H, "localhost", R_ALLOW, "127.0.0.1,::1", R_ALLOW,
	    "127.0.0.1,::1" },
	/* localhost is loopback by nature: the private carve-out alone does
	 * not open it; other local names take either carve-out. */
	{ I_NOLOOP, C_NONE, H, "localhost", R_LOOPBACK, "", R_LOOPBACK, "" },
	{ I_STD, C_LOCAL, H, "router.internal", R_ALLOW, "8.8.4.4", R_ALLOW,
	    "8.8.4.4" },
	{ I_STD, C_NONE, H, "router.internal", R_ALLOW, "10.0.0.1", R_PRIVATE,
	    "" },
	/* 7: no addresses. */
	{ I_STD, C_NONE, H, "api.example.com", R_ALLOW, "", R_UNRESOLVABLE,
	    "" },
	/* 8: over all answers. */
	{ I_STD, C_NONE, H, "api.example.com", R_ALLOW, "8.8.8.8", R_ALLOW,
	    "8.8.8.8" },
	{ I_STD, C_NONE, H, "API.Example.COM.", R_ALLOW, "8.8.8.8", R_ALLOW,
	    "8.8.8.8" },
	{ I_STD, C_NONE, S, "a.b.tiles.example.com", R_ALLOW,
	    "2606:4700::1111", R_ALLOW, "2606:4700::1111" },
	{ I_STD, C_NONE, H, "api.example.com", R_ALLOW,
	    "8.8.8.8,1.1.1.1,8.8.8.8,2606:4700::1111,1.1.1.1,::ffff:8.8.8.8",
	    R_ALLOW, "8.8.8.8,1.1.1.1,2606:4700::1111,::ffff:8.8.8.8" },
	{ I_STD, C_NONE, H, "api.example.com", R_ALLOW, "8.8.8.8,10.0.0.1",
	    R_PRIVATE, "" },
	{ I_STD, C_NONE, H, "api.example.com", R_ALLOW, "10.0.0.1,192.0.2.1",
	    R_RESERVED, "" },
	{ I_STD, C_NONE, H, "api.example.com", R_ALLOW,
	    "10.0.0.1,192.0.2.1,169.254.169.254", R_METADATA, "" },
	{ I_STD, C_NONE, H, "api.example.com", R_ALLOW,
	    "8.8.8.8,64:ff9b::a9fe:a9fe", R_METADATA, "" },
	{ I_STD, C_NONE, H, "api.example.com", R_ALLOW, "::ffff:10.0.0.1",
	    R_PRIVATE, "" },
	{ I_STD, C_NONE, H, "api.example.com", R_ALLOW,
	    "2001:0:a9fe:a9fe::", R_METADATA, "" },
	{ I_STD, C_NONE, H, "api.example.com", R_ALLOW,
	    "2002:a00:1::", R_RESERVED, "" },
	{ I_STD, C_NONE, H, "api.example.com", R_ALLOW, "fe80::1", R_PRIVATE,
	    "" },
	{ I_STD, C_NONE, H, "api.example.com", R_ALLOW, "2001:1::1", R_ALLOW,
	    "2001:1::1" },
	{ I_STD, C_NONE, H, "api.example.com", R_ALLOW, "2001:1::4",
	    R_RESERVED, "" },
	/* The carve-out: private allowed, metadata and reserved never. */
	{ I_STD, C_NONE, H, "lan.example.com", R_ALLOW, "10.0.0.1", R_ALLOW,
	    "10.0.0.1" },
	{ I_STD, C_NONE, H, "lan.example.com", R_ALLOW, "8.8.8.8", R_ALLOW,
	    "8.8.8.8" },
	{ I_STD, C_NONE, H, "lan.example.com", R_ALLOW, "10.0.0.1,8.8.8.8",
	    R_MIXED, "" },
	{ I_STD, C_NONE, H, "mixed.example.com", R_ALLOW,
	    "2606:4700::1111,fd00::1", R_MIXED, "" },
	{ I_STD, C_NONE, H, "lan.example.com", R_ALLOW, "169.254.169.254",
	    R_METADATA, "" },
	{ I_STD, C_NONE, H, "lan.example.com", R_ALLOW, "10.0.0.1,0.0.0.0",
	    R_RESERVED, "" },
	{ I_STD, C_NONE, H, "lan.example.com", R_ALLOW, "64:ff9b::a00:1",
	    R_ALLOW, "64:ff9b::a00:1" },
	/* Local by nature and carved out: any public answer is mixed. */
	{ I_STD, C_NONE, H, "localhost", R_ALLOW, "127.0.0.1,8.8.8.8", R_MIXED,
	    "" },
	{ I_STD, C_NONE, H, "localhost", R_ALLOW, "8.8.8.8", R_MIXED, "" },
	{ I_STD, C_NONE, H, "db.internal", R_ALLOW, "10.1.2.3", R_ALLOW,
	    "10.1.2.3" },
	{ I_STD, C_NONE, H, "db.internal", R_ALLOW, "2606:4700::1111", R_MIXED,
	    "" },
	/* NAT64 through the verdict: one address, two zones. */
	{ I_STD, C_NAT64, H, "lan.example.com", R_ALLOW,
	    "2001:db8:a08:808:8::", R_MIXED, "" },
	{ I_STD, C_NAT64, H, "api.example.com", R_ALLOW,
	    "2001:db8:a08:808:8::", R_PRIVATE, "" },
	{ I_STD, C_NAT64, H, "api.example.com", R_ALLOW,
	    "2001:db8:808:808:8::", R_ALLOW, "2001:db8:808:808:8::" },
	{ I_STD, C_NONE, H, "api.example.com", R_ALLOW,
	    "2001:db8:808:808:8::", R_RESERVED, "" },
	/* Loopback is its own class: the private carve-out does not re-open
	 * it, in any form the classifier decodes; the loopback one does,
	 * and only for loopback. */
	{ I_STD, C_NONE, H, "api.example.com", R_ALLOW, "127.0.0.1",
	    R_LOOPBACK, "" },
	{ I_STD, C_NONE, H, "api.example.com", R_ALLOW, "10.0.0.1,127.0.0.1",
	    R_LOOPBACK, "" },
	{ I_STD, C_NONE, H, "lan.example.com", R_ALLOW, "127.0.0.1",
	    R_LOOPBACK, "" },
	{ I_STD, C_NONE, H, "lan.example.com", R_ALLOW, "127.255.0.9",
	    R_LOOPBACK, "" },
	{ I_STD, C_NONE, H, "lan.example.com", R_ALLOW, "::1", R_LOOPBACK,
	    "" },
	{ I_STD, C_NONE, H, "lan.example.com", R_ALLOW, "::ffff:127.0.0.1",
	    R_LOOPBACK, "" },
	{ I_STD, C_NONE, H, "lan.example.com", R_ALLOW, "64:ff9b::7f00:1",
	    R_LOOPBACK, "" },
	{ I_STD, C_NAT64, H, "lan.example.com", R_ALLOW,
	    "2001:db8:7f00:1::", R_LOOPBACK, "" },
	{ I_STD, C_NAT64, H, "lo.example.com", R_ALLOW,
	    "2001:db8:7f00:1::", R_ALLOW, "2001:db8:7f00:1::" },
	{ I_STD, C_NONE, H, "lan.example.com", R_ALLOW, "10.0.0.1,::1",
	    R_LOOPBACK, "" },
	{ I_STD, C_NONE, H, "lo.example.com", R_ALLOW, "::127.0.0.1",
	    R_RESERVED, "" },
	{ I_STD, C_NONE, H, "lo.example.com", R_ALLOW,
	    "2002:7f00:1::", R_RESERVED, "" },
	{ I_STD, C_NONE, H, "lo.example.com", R_ALLOW,
	    "2001:0:4136:e378:8000:63bf:80ff:fffe", R_RESERVED, "" },
	{ I_STD, C_NONE, H, "lo.example.com", R_ALLOW, "127.0.0.1,::1",
	    R_ALLOW, "127.0.0.1,::1" },
	{ I_STD, C_NONE, H, "lo.example.com", R_ALLOW, "8.8.8.8", R_ALLOW,
	    "8.8.8.8" },
	{ I_STD, C_NONE, H, "lo.example.com", R_ALLOW, "10.0.0.1", R_PRIVATE,
	    "" },
	{ I_STD, C_NONE, H, "lo.example.com", R_ALLOW, "127.0.0.1,10.0.0.1",
	    R_PRIVATE, "" },
	{ I_STD, C_NONE, H, "lo.example.com", R_ALLOW, "127.0.0.1,8.8.8.8",
	    R_MIXED, "" },
	{ I_STD, C_NONE, H, "lo.example.com", R_ALLOW,
	    "169.254.169.254,127.0.0.1", R_METADATA, "" },
	{ I_STD, C_NONE, H, "lo.example.com", R_ALLOW, "127.0.0.1,0.0.0.0",
	    R_RESERVED, "" },
	/* Loopback and private together need both carve-outs; public
	 * beside either is mixed. */
	{ I_STD, C_NONE, H, "both.example.com", R_ALLOW, "127.0.0.1,10.0.0.1",
	    R_ALLOW, "127.0.0.1,10.0.0.1" },
	{ I_STD, C_NONE, H, "both.example.com", R_ALLOW,
	    "10.0.0.1,::1,8.8.8.8", R_MIXED, "" },
	{ I_NOLOOP, C_NONE, H, "both.example.com", R_ALLOW,
	    "127.0.0.1,10.0.0.1", R_LOOPBACK, "" },
	/* This host's own addresses are loopback, whatever their range. */
	{ I_STD, C_LOCAL, H, "api.example.com", R_ALLOW, "8.8.4.4", R_LOOPBACK,
	    "" },
	{ I_STD, C_LOCAL, H, "api.example.com", R_ALLOW, "::ffff:8.8.4.4",
	    R_LOOPBACK, "" },
	{ I_STD, C_LOCAL, H, "lan.example.com", R_ALLOW, "8.8.4.4,10.0.0.1",
	    R_LOOPBACK, "" },
	{ I_STD, C_LOCAL, H, "lan.example.com", R_ALLOW, "8.8.4.4,8.8.8.8",
	    R_LOOPBACK, "" },
	{ I_STD, C_LOCAL, H, "lo.example.com", R_ALLOW, "8.8.4.4", R_ALLOW,
	    "8.8.4.4" },
	{ I_STD, C_LOCAL, H, "lo.example.com", R_ALLOW, "8.8.4.4,8.8.8.8",
	    R_MIXED, "" },
	{ I_STD, C_LOCAL, H, "both.example.com", R_ALLOW, "8.8.4.4,10.0.0.1",
	    R_ALLOW, "8.8.4.4,10.0.0.1" },
	/* IP literals are their own answer. */
	{ I_STD, C_NONE, T, "10.0.0.5", R_ALLOW, "10.0.0.5", R_ALLOW,
	    "10.0.0.5" },
	{ I_STD, C_NONE, S, "8.8.8.8", R_ALLOW, "8.8.8.8", R_ALLOW,
	    "8.8.8.8" },
	{ I_STD, C_NONE, H, "[::1]", R_ALLOW, "::1", R_LOOPBACK, "" },
	{ I_STD, C_NONE, H, "127.0.0.1", R_ALLOW, "127.0.0.1", R_ALLOW,
	    "127.0.0.1" },
	{ I_NOLOOP, C_NONE, H, "127.0.0.1", R_ALLOW, "127.0.0.1", R_LOOPBACK,
	    "" },
	{ I_STD, C_NONE, H, "192.0.2.1", R_ALLOW, "192.0.2.1", R_RESERVED,
	    "" },
	{ I_STD, C_NONE, H, "169.254.169.254", R_ALLOW, "169.254.169.254",
	    R_METADATA, "" },
};

ParameterizedTestParameters(verdict, order)
{
	return cr_make_param_array(struct vcase, vcases, NELEM(vcases));
}

static void
join_addrs(const struct policy_verdict *v, char *buf, size_t n)
{
	char one[64];
	size_t i;

	buf[0] = '\0';
	for (i = 0; i < v->naddrs; i++) {
		cr_assert_eq(policy_addr_format(&v->addrs[i], one,
				 sizeof(one)),
		    0);
		if (i > 0)
			(void)strncat(buf, ",", n - strlen(buf) - 1);
		(void)strncat(buf, one, n - strlen(buf) - 1);
	}
}

ParameterizedTest(struct vcase *c, verdict, order)
{
	struct fixture f;
	const struct policy_instance *inst;
	struct policy_dest d;
	struct policy_verdict v;
	struct policy_addr ans[POLICY_ANSWERS_MAX];
	char got[512];
	size_t n;

	inst = fixture_init(&f, (enum inst_kind)c->inst,
	    (enum ctx_kind)c->ctx);
	dest_of(c->host, &d);
	memset(&v, 0x5a, sizeof(v));
	cr_assert_eq(policy_check_destination(inst,
			 (enum policy_transport)c->transport, &d, &v),
	    0);
	cr_assert_eq(v.reason, (enum policy_reason)c->dest_reason,
	    "%s: destination %s, want %s", c->host,
	    policy_reason_str(v.reason),
	    policy_reason_str((enum policy_reason)c->dest_reason));
	cr_expect_eq(v.naddrs, 0);
	if (c->dest_reason != R_ALLOW) {
		cr_expect_eq(v.need_resolve, 0);
		/* Defence in depth: the answer step refuses on its own, for
		 * every step that does not depend on the transport. */
		if (c->dest_reason != R_NOPERM) {
			n = answers_of(d.host.kind == POLICY_HOST_NAME ?
				"8.8.8.8" :
				d.host.name,
			    ans, NELEM(ans));
			cr_assert_eq(policy_check_answers(inst, &d, ans, n,
					 &f.ctx, &v),
			    0);
			cr_expect_eq(v.reason,
			    (enum policy_reason)c->dest_reason,
			    "%s: answers %s", c->host,
			    policy_reason_str(v.reason));
		}
		fixture_done(&f);
		return;
	}
	cr_expect_eq(v.need_resolve, d.host.kind == POLICY_HOST_NAME,
	    "%s: need_resolve %d", c->host, v.need_resolve);

	n = answers_of(c->answers, ans, NELEM(ans));
	memset(&v, 0x5a, sizeof(v));
	cr_assert_eq(policy_check_answers(inst, &d, ans, n, &f.ctx, &v), 0);
	cr_expect_eq(v.reason, (enum policy_reason)c->reason,
	    "%s [%s]: %s, want %s", c->host, c->answers,
	    policy_reason_str(v.reason),
	    policy_reason_str((enum policy_reason)c->reason));
	if (c->reason == R_ALLOW) {
		join_addrs(&v, got, sizeof(got));
		cr_expect_str_eq(got, c->addrs, "%s", c->host);
	} else
		cr_expect_eq(v.naddrs, 0);
	fixture_done(&f);
}

struct reason_case {
	int reason;
	char name[32];
};

static struct reason_case reason_cases[] = {
	{ 0, "allow" },
	{ 1, "invalid-destination" },
	{ 2, "unknown-instance" },
	{ 3, "manifest-refused" },
	{ 4, "no-permission" },
	{ 5, "not-granted" },
	{ 6, "not-declared" },
	{ 7, "private-address" },
	{ 8, "unresolvable" },
	{ 9, "metadata" },
	{ 10, "reserved-address" },
	{ 11, "mixed-zones" },
	{ 12, "loopback-address" },
	{ 13, "unknown" },
	{ -1, "unknown" },
	{ 1000, "unknown" },
};

ParameterizedTestParameters(verdict, reason_str)
{
	return cr_make_param_array(struct reason_case, reason_cases,
	    NELEM(reason_cases));
}

ParameterizedTest(struct reason_case *c, verdict, reason_str)
{
	cr_expect_str_eq(policy_reason_str((enum policy_reason)c->reason),
	    c->name);
}

Test(verdict, bad_arguments)
{
	struct fixture f;
	const struct policy_instance *inst;
	struct policy_dest d, lit;
	struct policy_verdict v, sentinel;
	struct policy_addr ans[POLICY_ANSWERS_MAX + 1];
	size_t i;

	inst = fixture_init(&f, I_STD, C_NONE);
	dest_of("api.example.com", &d);
	dest_of("8.8.8.8", &lit);
	memset(&v, 0x5a, sizeof(v));
	sentinel = v;

	cr_expect_eq(policy_check_destination(inst, (enum policy_transport)0,
			 &d, &v),
	    EGRESS_ERR_INVALID);
	cr_expect_eq(policy_check_destination(inst, (enum policy_transport)9,
			 &d, &v),
	    EGRESS_ERR_INVALID);
	cr_expect_eq(policy_check_destination(inst, H, NULL, &v),
	    EGRESS_ERR_INVALID);
	cr_expect_eq(policy_check_destination(inst, H, &d, NULL),
	    EGRESS_ERR_INVALID);
	d.host.kind = (enum policy_host_kind)0;
	cr_expect_eq(policy_check_destination(inst, H, &d, &v),
	    EGRESS_ERR_INVALID);
	cr_expect_eq(policy_check_answers(inst, &d, NULL, 0, NULL, &v),
	    EGRESS_ERR_INVALID);
	dest_of("api.example.com", &d);

	for (i = 0; i < NELEM(ans); i++)
		cr_assert_eq(policy_addr_parse("8.8.8.8", &ans[i]), 0);
	cr_expect_eq(policy_check_answers(inst, &d, ans,
			 POLICY_ANSWERS_MAX + 1, NULL, &v),
	    EGRESS_ERR_TOO_BIG);
	cr_expect_eq(policy_check_answers(inst, &d, NULL, 1, NULL, &v),
	    EGRESS_ERR_INVALID);
	cr_expect_eq(policy_check_answers(inst, NULL, ans, 1, NULL, &v),
	    EGRESS_ERR_INVALID);
	cr_expect_eq(policy_check_answers(inst, &d, ans, 1, NULL, NULL),
	    EGRESS_ERR_INVALID);
	ans[1].family = 0;
	cr_expect_eq(policy_check_answers(inst, &d, ans, 2, NULL, &v),
	    EGRESS_ERR_INVALID);
	ans[1].family = 4;
	/* An IP literal must come with exactly itself as the answer. */
	cr_expect_eq(policy_check_answers(inst, &lit, ans, 0, NULL, &v),
	    EGRESS_ERR_INVALID);
	cr_expect_eq(policy_check_answers(inst, &lit, ans, 2, NULL, &v),
	    EGRESS_ERR_INVALID);
	cr_assert_eq(policy_addr_parse("::ffff:8.8.8.8", &ans[2]), 0);
	cr_expect_eq(policy_check_answers(inst, &lit, &ans[2], 1, NULL, &v),
	    EGRESS_ERR_INVALID);
	cr_assert_eq(policy_addr_parse("1.1.1.1", &ans[2]), 0);
	cr_expect_eq(policy_check_answers(inst, &lit, &ans[2], 1, NULL, &v),
	    EGRESS_ERR_INVALID);
	/* Errors leave the verdict alone. */
	cr_expect_eq(memcmp(&v, &sentinel, sizeof(v)), 0);

	/* Exactly POLICY_ANSWERS_MAX answers are fine, and deduplicated. */
	cr_assert_eq(policy_addr_parse("8.8.8.8", &ans[2]), 0);
	cr_expect_eq(policy_check_answers(inst, &d, ans, POLICY_ANSWERS_MAX,
			 NULL, &v),
	    0);
	cr_expect_eq(v.reason, R_ALLOW);
	cr_expect_eq(v.naddrs, 1);
	/* A NULL context is an empty one. */
	cr_expect_eq(policy_check_answers(inst, &lit, ans, 1, NULL, &v), 0);
	cr_expect_eq(v.reason, R_ALLOW);
	fixture_done(&f);
}

/* Without any set (all NULL), nothing is granted. */
Test(verdict, empty_instance)
{
	struct policy_instance inst;
	struct policy_dest d;
	struct policy_verdict v;

	memset(&inst, 0, sizeof(inst));
	inst.manifest_ok = 1;
	inst.permissions = POLICY_PERM_HTTP_CLIENT;
	inst.operator_defined = 1;
	dest_of("api.example.com", &d);
	cr_assert_eq(policy_check_destination(&inst, H, &d, &v), 0);
	cr_expect_eq(v.reason, R_NOTGRANTED);
}

struct lo_name_case {
	char host[64];
	int want;
};

/* localhost and names under it are loopback by nature; nothing else is. */
ParameterizedTestParameters(verdict, loopback_name)
{
	static struct lo_name_case cases[] = {
		{ "localhost", 1 },
		{ "LOCALHOST.", 1 },
		{ "x.localhost", 1 },
		{ "a.b.localhost", 1 },
		{ "xlocalhost", 0 },
		{ "localhost.example.com", 0 },
		{ "local", 0 },
		{ "db.internal", 0 },
		{ "127.0.0.1", 0 },
		{ "[::1]", 0 },
	};

	return cr_make_param_array(struct lo_name_case, cases, NELEM(cases));
}

ParameterizedTest(struct lo_name_case *c, verdict, loopback_name)
{
	struct policy_dest d;

	dest_of(c->host, &d);
	cr_expect_eq(policy_host_is_loopback_name(&d.host), c->want, "%s",
	    c->host);
	cr_expect_eq(policy_host_is_loopback_name(NULL), 0);
}
